"""Shared machinery of the greedy policies: shape-bucketed queues and victim search.

A greedy pass walks the queue in policy order and starts whatever fits. Walking every
queued job on every event would be O(events x queue); instead each queue group (a
project, or the whole queue) keeps one heap per job *shape* (GPUs and allowed pools).
Within a pass, once a shape fails to fit, every later job of that shape fails too, so a
pass costs O(groups x shapes + jobs started), not O(queue).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Any

from models import Job, Pool, ProjectStanding
from planner.placement import nodes_needed
from planner.scheduler.core import Scheduler
from planner.scheduler.state import JobRun

Shape = int
"""A job shape (its GPUs, allowed GPU types and allowed clusters) by number: a pass
hashes and compares shapes at every step, and a number is cheaper at both than the
tuple (:func:`shape_of`)."""

_SHAPES: dict[tuple[int, tuple[str, ...] | None, tuple[str, ...] | None], int] = {}
_NEXT_SHAPE = itertools.count()


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


def victims_may_open(engine: Scheduler, ratio: dict[str, float], job: Job, threshold: float) -> bool:
    """Whether :func:`victim_level`'s victims above ``threshold`` could open ``job``'s
    GPUs in one of its pools: an upper bound without a node scan (the pool's free GPUs
    plus those of its running jobs past their contract that the rule lets go,
    :attr:`Scheduler.preemptible_by`). ``False`` means :meth:`VictimIndex.find` would
    find nothing at this threshold; most searches of a greedy pass are such.
    """
    need = job.gpus
    by_pool = engine.preemptible_by
    for pool, ps, _ in engine.cluster.allowed_pools(job):
        room = ps.free_gpus
        if room >= need:
            return True
        held = by_pool.get(pool)
        if not held:
            continue
        for (project, charged, resumable), gpus in held.items():
            level = (ratio[project] if resumable else -math.inf) if charged else math.inf
            if level > threshold:
                room += gpus
                if room >= need:
                    return True
    return False


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
    return rank_by_ratio(projects, {p: s.ratio for p, s in standing.items()})


def rank_by_ratio(
    projects: list[str], ratios: Mapping[str, float]
) -> tuple[dict[str, float], list[str]]:
    """:func:`fair_share_rank` from the ratios alone (``Scheduler.ratios``; a project
    left out has ratio 0)."""
    ratio = {p: ratios.get(p, 0.0) for p in projects}
    return ratio, sorted(projects, key=lambda p: (ratio[p], p))


def _first(item: tuple[int, Any]) -> int:
    return item[0]


def shape_of(run: JobRun) -> Shape:
    """The number of ``run``'s shape, the same for every job of that shape (in every
    queue and thread: numbers come from one counter, and ``setdefault`` keeps the first
    one given to a shape)."""
    j = run.job
    key = (j.gpus, j.gpu_types, j.clusters)
    found = _SHAPES.get(key)
    if found is None:
        found = _SHAPES.setdefault(key, next(_NEXT_SHAPE))
    return found


class ShapeQueues:
    """Queued jobs grouped by ``group`` then shape, each heap ordered by ``key``."""

    def __init__(self, key: Callable[[JobRun], tuple[Any, ...]]) -> None:
        self.key = key
        self.groups: dict[Hashable, dict[Shape, list[tuple[Any, ...]]]] = {}
        # Pushes into a group that had no queued shape: a pass that walks the groups
        # it found with work (:meth:`with_work`) looks again when this moves.
        self.revived = 0

    def push(self, group: Hashable, run: JobRun) -> None:
        shapes = self.groups.get(group)
        if not shapes:
            self.revived += 1
            if shapes is None:
                shapes = self.groups[group] = {}
        heap = shapes.setdefault(shape_of(run), [])
        heapq.heappush(heap, (*self.key(run), run.index, run.token))

    def with_work(self, rank: Mapping[Any, int], after: int = -1) -> list[tuple[int, Hashable]]:
        """``(rank, group)`` of the groups ranked in ``rank`` above ``after`` that hold a
        queued shape, by rank.

        A pass over the groups in rank order may walk only these: a group gains work
        only by a push (when :attr:`revived` moves, ask again for the groups past the
        current one).
        """
        found = []
        for group, shapes in self.groups.items():
            at = rank.get(group)
            if at is not None and at > after and shapes:
                found.append((at, group))
        found.sort(key=_first)
        return found

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
        runs = engine.runs
        pop = heapq.heappop
        # Only a consumer that passes ``skip`` stashes skipped jobs (it may add to it as
        # the iteration goes).
        stash: list[tuple[list[tuple[Any, ...]], tuple[Any, ...]]] | None = None
        stashed: set[int] = set()  # ids of the heaps with entries in the stash
        if skip is not None:
            stash = []
        done = False
        try:
            while True:
                best: tuple[Any, ...] | None = None
                best_shape: Shape | None = None
                best_heap: list[tuple[Any, ...]] = []
                empty: list[Shape] | None = None
                for shape, heap in shapes.items():
                    if shape in dead:
                        continue
                    # Drop stale entries (started or requeued since) and stash skipped jobs.
                    while heap:
                        head = heap[0]
                        run = runs[head[-2]]
                        if run.status != "queued" or run.token != head[-1]:
                            pop(heap)
                        elif stash is not None and skip and head[-2] in skip:
                            stash.append((heap, pop(heap)))
                            stashed.add(id(heap))
                        else:
                            break
                    if not heap:
                        if id(heap) not in stashed:
                            if empty is None:
                                empty = []
                            empty.append(shape)
                        continue
                    if best is None or heap[0] < best:
                        best, best_shape, best_heap = heap[0], shape, heap
                if empty is not None:
                    for shape in empty:
                        del shapes[shape]
                if best is None or best_shape is None:
                    done = True
                    return
                run = runs[best[-2]]
                yield best_shape, run
                # The shape's heap is still in ``shapes``: only this iteration deletes.
                if best_heap and best_heap[0] is best and run.status != "queued":
                    pop(best_heap)
        finally:
            if stash:
                for heap, entry in stash:
                    heapq.heappush(heap, entry)
            if not done or stash:
                # Stopped early (or jobs came back from the stash): drop emptied shapes.
                # Run to the end, the last step dropped every emptied heap it saw, and
                # the heaps of shapes in ``dead`` were never popped.
                for shape, heap in list(shapes.items()):
                    if not heap:
                        del shapes[shape]
            if not shapes and self.groups.get(group) is shapes:
                del self.groups[group]  # so that the groups held are those with work


class _PoolIndex:
    """A pool's whole-size, non-drained nodes ordered for the multi-node search:
    ``ordered`` by (total victim cost, name), ``clears`` the sorted clear levels (how
    many nodes a threshold leaves is a bisection)."""

    __slots__ = ("clears", "ordered")

    def __init__(self, rows: list[tuple[float, str, float]]) -> None:
        self.ordered = sorted(rows)
        self.clears = sorted(r[2] for r in rows)

    def remove(self, row: tuple[float, str, float]) -> None:
        del self.ordered[bisect.bisect_left(self.ordered, row)]
        del self.clears[bisect.bisect_left(self.clears, row[2])]

    def add(self, row: tuple[float, str, float]) -> None:
        bisect.insort(self.ordered, row)
        bisect.insort(self.clears, row[2])

    def cheapest(
        self, threshold: float, need: int, keep: Callable[[str], bool] | None = None
    ) -> list[tuple[float, str, float]] | None:
        """The ``need`` cheapest nodes whose every job is a victim above ``threshold``
        and that ``keep`` (by name) lets through, or ``None`` when fewer are (ties by
        name, as ``heapq.nsmallest`` of ``(total, name)`` picks them)."""
        if len(self.clears) - bisect.bisect_right(self.clears, threshold) < need:
            return None
        picked = []
        for row in self.ordered:
            if row[2] > threshold and (keep is None or keep(row[1])):
                picked.append(row)
                if len(picked) == need:
                    return picked
        return None


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
        # node -> (clear level: min level of its jobs, total cost, entries sorted by
        # cost, highest level, GPUs of its jobs that are ever victims)
        self.nodes: dict[str, tuple[float, float, list[tuple[float, float, int, int]], float, int]] = {}
        # Searches that failed since the last change, per allowed-pool key: (threshold,
        # gpus). Fewer victims (a higher threshold) and a bigger gang fail too, so a pass
        # over a long queue does not repeat a hopeless node scan.
        self.failed: dict[Hashable, list[tuple[float, int]]] = {}
        # Per pool, its whole-size nodes ordered for multi-node gangs (built on demand,
        # kept up to date as nodes are refreshed, dropped when the drained set changes).
        self.pools: dict[Pool, _PoolIndex] = {}
        # Per pool, its non-drained nodes that hold a job that is ever a victim, in the
        # pool's node order (built on demand, dropped when one of its nodes changes): the
        # single-node search skips every other node anyway, and most nodes are such.
        # With them, the highest level of a job on them, and the most GPUs one of them
        # could open (its free GPUs and those of its jobs that are ever victims).
        self.holders: dict[Pool, tuple[list[str], float, int]] = {}
        self._drained: frozenset[str] = frozenset()
        self.invalidate()

    def invalidate(self) -> None:
        self.nodes.clear()
        self.failed.clear()
        self.pools.clear()
        self.holders.clear()
        self.engine.touched.update(self.engine.cluster.nodes)

    def _refresh(self) -> None:
        e = self.engine
        cl = e.cluster
        if cl.drained != self._drained:
            self._drained = frozenset(cl.drained)
            self.pools.clear()
            self.holders.clear()
        if not e.touched:
            return
        self.failed.clear()
        runs = e.runs
        nodes = self.nodes
        pools = self.pools
        holders = self.holders
        info_of = cl.nodes
        cost, level = self.cost, self.level
        rated: dict[int, tuple[float, float, int]] = {}  # a gang's jobs are rated once
        minus_inf = -math.inf
        for name in e.touched:
            entries = []
            for i in cl.jobs_on[name]:
                got = rated.get(i)
                if got is None:
                    v = runs[i]
                    got = rated[i] = (cost(v), level(v), v.per_node)
                entries.append((*got, i))
            if len(entries) == 1:
                # One job on the node (the common case): the loop below, unrolled.
                c, clear, per_node, _ = entries[0]
                top = clear
                total = 0.0 + c
                ever = per_node if clear > minus_inf else 0
            else:
                entries.sort()
                # One loop for what min/sum/max/sum of four generators gave (the same
                # values: the costs are added in the same order, from 0).
                clear, total, top, ever = math.inf, 0.0, minus_inf, 0
                for c, lv, per_node, _ in entries:
                    total += c
                    if lv < clear:
                        clear = lv
                    if lv > top:
                        top = lv
                    if lv > minus_inf:
                        ever += per_node
            old = nodes.get(name)
            nodes[name] = (clear, total, entries, top, ever)
            if holders:
                holders.pop(info_of[name].pool, None)
            if pools:
                info = info_of[name]
                index = pools.get(info.pool)
                if index is not None and info.size == cl.max_size[info.pool] and name not in cl.drained:
                    if old is not None:
                        index.remove((old[1], name, old[0]))
                    index.add((total, name, clear))
        e.touched.clear()

    def _pool_index(self, pool: Pool) -> _PoolIndex:
        index = self.pools.get(pool)
        if index is None:
            cl = self.engine.cluster
            max_size = cl.max_size[pool]
            nodes = self.nodes
            index = self.pools[pool] = _PoolIndex([
                (nodes[name][1], name, nodes[name][0])
                for name, size in cl.pools[pool].size.items()
                if size == max_size and name not in cl.drained
            ])
        return index

    def _holders(self, pool: Pool, size: Mapping[str, int]) -> tuple[list[str], float, int]:
        """The pool's non-drained nodes with a job that is ever a victim, in ``size``'s
        order (a node without one never opens a hole: its top level is ``-inf``), the
        highest level on them and the most GPUs one of them could open."""
        found = self.holders.get(pool)
        if found is None:
            drained = self.engine.cluster.drained
            free = self.engine.cluster.free
            nodes = self.nodes
            minus_inf = -math.inf
            names = []
            top, most = minus_inf, 0
            for name in size:
                summary = nodes[name]
                if name not in drained and summary[3] > minus_inf:
                    names.append(name)
                    top = max(top, summary[3])
                    most = max(most, free[name] + summary[4])
            found = self.holders[pool] = (names, top, most)
        return found

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
        gpus = job.gpus
        key = (job.gpu_types, job.clusters)
        # Failures are cached only for the plain search (the others depend on the caller).
        plain = not exclude and spare is None
        failed = self.failed.get(key, ()) if plain else ()
        if any(threshold >= t and gpus >= g for t, g in failed):
            return None
        runs = e.runs
        nodes = self.nodes
        free = cl.free
        best: tuple[float, Pool, list[int]] | None = None
        keep: Callable[[str], bool] | None = None
        if not plain:

            def keep(name: str) -> bool:
                """Whether a multi-node gang may take this whole node: not excluded, and
                no job on it spared."""
                return name not in exclude and (
                    spare is None or not any(spare(runs[x[3]]) for x in nodes[name][2])
                )

        for pool, ps, max_size in cl.allowed_pools(job):
            if gpus <= max_size:
                sizes = ps.size
                holders, top, most = self._holders(pool, sizes)
                if top <= threshold or most < gpus:
                    continue  # no node of the pool passes the checks below
                for name in holders:
                    if sizes[name] < gpus or name in exclude:
                        continue
                    got = free[name]
                    if got >= gpus:
                        continue  # a free hole: placement, not preemption
                    summary = nodes[name]
                    if summary[3] <= threshold or got + summary[4] < gpus:
                        continue  # not enough GPUs of victims above the threshold
                    chosen: list[int] = []
                    total = 0.0
                    for c, lv, per_node, i in summary[2]:
                        if lv > threshold and (spare is None or not spare(runs[i])):
                            chosen.append(i)
                            got += per_node
                            total += c
                            if got >= gpus:
                                break
                    if got >= gpus and (best is None or total < best[0]):
                        best = (total, pool, chosen)
            else:
                # The pool's index holds its whole-size, non-drained nodes in (total
                # cost, name) order: the first ``need`` that pass are the cheapest, and
                # a threshold too high for ``need`` of them ends the search before any
                # node is looked at.
                need = nodes_needed(gpus, max_size)
                rows = self._pool_index(pool).cheapest(threshold, need, keep)
                if rows is None:
                    continue
                picked = [(r[0], r[1]) for r in rows]
                total = sum(o[0] for o in picked)
                if best is None or total < best[0]:
                    ids = sorted({x[3] for _, n in picked for x in nodes[n][2]})
                    best = (total, pool, ids)
        if best is None:
            if plain:
                self.failed.setdefault(key, []).append((threshold, gpus))
            return None
        return best[1], [e.runs[i] for i in best[2]]
