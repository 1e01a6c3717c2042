"""Shared machinery of the greedy policies: shape-bucketed queues and victim search.

A greedy pass walks the queue in policy order and starts whatever fits. Walking every
queued job on every event would be O(events x queue); instead each queue group (a
project, or the whole queue) keeps one heap per job *shape* (GPUs and allowed pools).
Within a pass, once a shape fails to fit, every later job of that shape fails too, so a
pass costs O(groups x shapes + jobs started), not O(queue).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Any

from models import Pool, ProjectStanding
from planner.placement import nodes_needed
from planner.scheduler.core import Scheduler
from planner.scheduler.state import JobRun

Shape = tuple[int, tuple[str, ...] | None, tuple[str, ...] | None]


def victim_level(engine: Scheduler, ratio: dict[str, float], v: JobRun) -> float:
    """How preemptible ``v`` is: a funded requester of ratio r may preempt it when level > r.

    Work inside its contract, and charged non-resumable work, is never a victim; free work
    always is; charged resumable work past its contract is as preemptible as its project
    is over its share.
    """
    if not engine.past_contract(v):
        return -math.inf
    if not v.charged:
        return math.inf
    return ratio[v.job.project] if v.job.resumable else -math.inf


def within_project(run: JobRun) -> tuple[Any, ...]:
    """The order inside a project: urgent first, then priority, then submission (the only
    place priority still matters, as the institute's design has it)."""
    j = run.job
    return (not j.urgent, -j.priority, j.submit)


def fair_share_rank(
    projects: list[str], standing: Mapping[str, ProjectStanding]
) -> tuple[dict[str, float], list[str]]:
    """Each project's fair-share ratio and the projects in queue order (lowest ratio
    first, ties by name): the one ranking the greedy passes and the fast lane share."""
    ratio = {p: (standing[p].ratio if p in standing else 0.0) for p in projects}
    return ratio, sorted(projects, key=lambda p: (ratio[p], p))


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

    def _clean(self, engine: Scheduler, heap: list[tuple[Any, ...]]) -> None:
        runs = engine.runs
        while heap:
            run = runs[heap[0][-2]]
            if run.status == "queued" and run.token == heap[0][-1]:
                return
            heapq.heappop(heap)

    def iter_group(
        self,
        engine: Scheduler,
        group: Hashable,
        dead: set[Shape],
        skip: set[int] | None = None,
    ) -> Iterator[tuple[Shape, JobRun]]:
        """Heads of the group's shapes in key order, skipping shapes in ``dead``.

        The consumer either starts the yielded job (it leaves the queue), adds its shape
        to ``dead``, or adds its index to ``skip`` (only that job is passed over, for the
        rest of this iteration); each moves the iteration on.
        """
        shapes = self.groups.get(group)
        if not shapes:
            return
        stash: list[tuple[list[tuple[Any, ...]], tuple[Any, ...]]] = []
        try:
            while True:
                best: tuple[Any, ...] | None = None
                best_shape: Shape | None = None
                for shape, heap in list(shapes.items()):
                    if shape in dead:
                        continue
                    self._clean(engine, heap)
                    while skip and heap and heap[0][-2] in skip:
                        stash.append((heap, heapq.heappop(heap)))
                        self._clean(engine, heap)
                    if not heap:
                        if not any(h is heap for h, _ in stash):
                            del shapes[shape]
                        continue
                    if best is None or heap[0] < best:
                        best, best_shape = heap[0], shape
                if best is None or best_shape is None:
                    return
                run = engine.runs[best[-2]]
                yield best_shape, run
                head = shapes.get(best_shape)
                if head and head[0] is best and run.status != "queued":
                    heapq.heappop(head)
        finally:
            for heap, entry in stash:
                heapq.heappush(heap, entry)
            for shape, heap in list(shapes.items()):
                if not heap:
                    del shapes[shape]


class VictimIndex:
    """Which running jobs a requester may preempt, cached per node.

    ``level(v)`` says how protected a running job is: a requester with threshold ``r``
    may preempt ``v`` when ``level(v) > r`` (``-inf``: never). ``cost(v)`` ranks victims
    (lower goes first). Per-node summaries are recomputed only for nodes the engine
    touched since the last query (``engine.touched``), or all after :meth:`invalidate`
    (the policy's ranking changed).
    """

    def __init__(
        self,
        engine: Scheduler,
        level: Callable[[JobRun], float],
        cost: Callable[[JobRun], float],
    ) -> None:
        self.engine = engine
        self.level = level
        self.cost = cost
        # node -> (clear level: min level of its jobs, entries sorted by cost)
        self.nodes: dict[str, tuple[float, float, list[tuple[float, float, int, int]]]] = {}
        # Searches that failed since the last change, per allowed-pool key: (threshold,
        # gpus). Fewer victims (a higher threshold) and a bigger gang fail too, so a pass
        # over a long queue does not repeat a hopeless node scan.
        self.failed: dict[Hashable, list[tuple[float, int]]] = {}
        self.invalidate()

    def invalidate(self) -> None:
        self.nodes.clear()
        self.failed.clear()
        self.engine.touched.update(self.engine.cluster.nodes)

    def _refresh(self) -> None:
        e = self.engine
        if not e.touched:
            return
        self.failed.clear()
        runs = e.runs
        for name in e.touched:
            entries = []
            for i in e.cluster.jobs_on[name]:
                v = runs[i]
                entries.append((self.cost(v), self.level(v), v.per_node, i))
            entries.sort()
            clear = min((x[1] for x in entries), default=math.inf)
            total = sum(x[0] for x in entries)
            self.nodes[name] = (clear, total, entries)
        e.touched.clear()

    def find(
        self,
        run: JobRun,
        threshold: float,
        *,
        exclude: set[str] | frozenset[str] = frozenset(),
        spare: Callable[[JobRun], bool] | None = None,
    ) -> tuple[Pool, list[JobRun]] | None:
        """The cheapest set of running jobs whose preemption opens a hole for ``run``.

        Only non-drained nodes of allowed pools count, and none in ``exclude``. A gang
        that fits one node needs a node whose free GPUs plus its eligible victims' GPUs
        reach its size; a multi-node gang needs whole nodes whose every job is eligible.
        ``spare(v)`` true makes a running job no victim this time (a rule that depends
        on the clock, which the per-node cache does not hold).
        """
        self._refresh()
        e = self.engine
        cl = e.cluster
        job = run.job
        key = (job.gpu_types, job.clusters)
        # Failures are cached only for the plain search (the others depend on the caller).
        plain = not exclude and spare is None
        failed = self.failed.get(key, ()) if plain else ()
        if any(threshold >= t and job.gpus >= g for t, g in failed):
            return None
        runs = e.runs
        best: tuple[float, Pool, list[int]] | None = None
        for pool, ps in cl.pools.items():
            if not job.allows(pool.cluster, pool.gpu_type):
                continue
            max_size = cl.max_size[pool]
            if job.gpus <= max_size:
                for name, size in ps.size.items():
                    if name in cl.drained or size < job.gpus or name in exclude:
                        continue
                    got = cl.free[name]
                    if got >= job.gpus:
                        continue  # a free hole: placement, not preemption
                    chosen: list[int] = []
                    total = 0.0
                    for c, lv, per_node, i in self.nodes[name][2]:
                        if lv > threshold and (spare is None or not spare(runs[i])):
                            chosen.append(i)
                            got += per_node
                            total += c
                            if got >= job.gpus:
                                break
                    if got >= job.gpus and (best is None or total < best[0]):
                        best = (total, pool, chosen)
            else:
                need = nodes_needed(job.gpus, max_size)
                options = [
                    (self.nodes[name][1], name)
                    for name, size in ps.size.items()
                    if size == max_size and name not in cl.drained and name not in exclude
                    and self.nodes[name][0] > threshold
                    and (spare is None or not any(spare(runs[x[3]]) for x in self.nodes[name][2]))
                ]
                if len(options) >= need:
                    picked = heapq.nsmallest(need, options)
                    total = sum(o[0] for o in picked)
                    if best is None or total < best[0]:
                        ids = sorted({x[3] for _, n in picked for x in self.nodes[n][2]})
                        best = (total, pool, ids)
        if best is None:
            if plain:
                self.failed.setdefault(key, []).append((threshold, job.gpus))
            return None
        return best[1], [e.runs[i] for i in best[2]]
