"""Shared machinery of the greedy policies: shape-bucketed queues and victim search.

A greedy pass walks the queue in policy order and starts whatever fits. Walking every
queued job on every event would be O(events x queue); instead each queue group (a
project, or the whole queue) keeps one heap per job *shape* (GPUs and allowed pools).
Within a pass, once a shape fails to fit, every later job of that shape fails too, so a
pass costs O(groups x shapes + jobs started), not O(queue).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterator
from typing import Any

from models import Pool
from planner.placement import nodes_needed
from planner.simulator.engine import Engine
from planner.simulator.state import JobRun

Shape = tuple[int, tuple[str, ...] | None, tuple[str, ...] | None]


def shape_of(run: JobRun) -> Shape:
    j = run.job
    return (j.gpus, j.gpu_types, j.clusters)


class ShapeQueues:
    """Queued jobs grouped by ``group`` then shape, each heap ordered by ``key``."""

    def __init__(self, key: Callable[[JobRun], tuple[Any, ...]]) -> None:
        self.key = key
        self.groups: dict[Hashable, dict[Shape, list[tuple[Any, ...]]]] = {}

    def push(self, group: Hashable, run: JobRun) -> None:
        shapes = self.groups.setdefault(group, {})
        heap = shapes.setdefault(shape_of(run), [])
        heapq.heappush(heap, (*self.key(run), run.index, run.token))

    def _clean(self, engine: Engine, heap: list[tuple[Any, ...]]) -> None:
        runs = engine.runs
        while heap:
            run = runs[heap[0][-2]]
            if run.status == "queued" and run.token == heap[0][-1]:
                return
            heapq.heappop(heap)

    def iter_group(
        self, engine: Engine, group: Hashable, dead: set[Shape]
    ) -> Iterator[tuple[Shape, JobRun]]:
        """Heads of the group's shapes in key order, skipping shapes in ``dead``.

        The consumer either starts the yielded job (it leaves the queue) or adds its
        shape to ``dead``; both move the iteration on.
        """
        shapes = self.groups.get(group)
        if not shapes:
            return
        while True:
            best: tuple[Any, ...] | None = None
            best_shape: Shape | None = None
            for shape, heap in list(shapes.items()):
                if shape in dead:
                    continue
                self._clean(engine, heap)
                if not heap:
                    del shapes[shape]
                    continue
                if best is None or heap[0] < best:
                    best, best_shape = heap[0], shape
            if best is None or best_shape is None:
                return
            run = engine.runs[best[-2]]
            yield best_shape, run
            heap = shapes.get(best_shape)
            if heap and heap[0] is best and run.status != "queued":
                heapq.heappop(heap)


def find_victims(
    engine: Engine,
    run: JobRun,
    eligible: Callable[[JobRun], bool],
    cost: Callable[[JobRun], float],
) -> tuple[Pool, list[JobRun]] | None:
    """The cheapest set of running jobs whose preemption opens a hole for ``run``.

    Only non-drained nodes of allowed pools count. A gang that fits one node needs one
    node whose free GPUs plus its eligible victims' GPUs reach its size; a multi-node
    gang needs whole nodes whose every job is eligible. ``cost`` ranks victims (lower is
    preempted first); the set with the least total cost wins.
    """
    cl = engine.cluster
    job = run.job
    best: tuple[float, Pool, list[JobRun]] | None = None
    for pool, ps in cl.pools.items():
        if not job.allows(pool.cluster, pool.gpu_type):
            continue
        for name, size in ps.size.items():
            if name in cl.drained:
                continue
            if job.gpus <= size:
                free = cl.free[name]
                if free >= job.gpus:
                    continue  # place_gang would have used it; nothing to preempt here
                cands = [engine.runs[i] for i in cl.jobs_on[name]]
                cands = [v for v in cands if eligible(v)]
                if free + sum(v.per_node for v in cands) < job.gpus:
                    continue
                cands.sort(key=lambda v: (cost(v), v.index))
                chosen: list[JobRun] = []
                got = free
                total = 0.0
                for v in cands:
                    chosen.append(v)
                    got += v.per_node
                    total += cost(v)
                    if got >= job.gpus:
                        break
                if best is None or total < best[0]:
                    best = (total, pool, chosen)
        if job.gpus > max(ps.size.values()):
            need = nodes_needed(job.gpus, max(ps.size.values()))
            options: list[tuple[float, str, list[JobRun]]] = []
            for name, size in ps.size.items():
                if name in cl.drained or size != max(ps.size.values()):
                    continue
                victims = [engine.runs[i] for i in cl.jobs_on[name]]
                if all(eligible(v) for v in victims):
                    options.append((sum(cost(v) for v in victims), name, victims))
            if len(options) >= need:
                options.sort(key=lambda o: (o[0], o[1]))
                chosen_set: dict[int, JobRun] = {}
                total = 0.0
                for c, _, victims in options[:need]:
                    total += c
                    for v in victims:
                        chosen_set[v.index] = v
                if best is None or total < best[0]:
                    best = (total, pool, list(chosen_set.values()))
    if best is None:
        return None
    return best[1], best[2]
