"""Turn decided runs into a :class:`~models.Plan`: node placement, gap filling, actions.

The MIP (or the greedy fallback) decides *which* jobs run on which pool in which
slices. This module places them on nodes, slice by slice (a job keeps its nodes for its
whole run and, where it can, the nodes it had before), drops a job whose gang finds no
hole (it is reported pending with ``no_gang_hole``), then fills what is left with
waiting work, in fair-share order, so no GPU idles while eligible work waits.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import NamedTuple

from models import (
    Action,
    Assignment,
    JobState,
    NodeFree,
    Pending,
    Plan,
    ProjectPlan,
    Slice,
    SolverInfo,
    drain_guard,
    keeps_running,
)
from planner.mip.epoch import Epoch, JobClass, SubPool, remaining_with_restart, resumes
from planner.mip.objective import WORK_BONUS, free_marginal, segment_ends, segment_slopes
from planner.placement import nodes_needed, place_gang


@dataclass(frozen=True)
class Start:
    """A queued job started in slice ``slice`` on sub-pool ``pool``."""

    state: JobState
    pool: int
    slice: int


@dataclass
class Run:
    """A placed run: slices ``first .. last-1`` on ``nodes``.

    ``charged`` says, per slice of the run, whether it is charged to the budget
    (:func:`charge_runs`); a funded job past its project's headroom runs unallocated.
    """

    state: JobState
    pool: int
    first: int
    last: int
    nodes: tuple[str, ...]
    running: bool
    charged: list[bool] = field(default_factory=list)


@dataclass
class Board:
    """Free GPUs per node per slice while runs are placed, and budget left per project."""

    epoch: Epoch
    free: dict[str, list[int]] = field(default_factory=dict)
    size: dict[str, int] = field(default_factory=dict)
    runs: list[Run] = field(default_factory=list)
    #: Free GPUs per (pool, slice): the sum of ``free`` over the pool's nodes.
    totals: dict[tuple[int, int], int] = field(default_factory=dict)
    budget: dict[str, int] = field(default_factory=dict)
    work: dict[str, int] = field(default_factory=dict)
    #: Per pool, its nodes grouped by their free GPUs in every slice (``free``). Nodes
    #: alike differ only by name, which breaks ties last: a hole is looked for among
    #: the groups, not the nodes (5-26 times fewer on the benchmark's epochs; a
    #: placement looks for a hole about once per start, and asking every node was about
    #: half of its time).
    alike: dict[int, dict[tuple[int, ...], set[str]]] = field(default_factory=dict)

    @classmethod
    def empty(cls, epoch: Epoch) -> Board:
        """A board with every open node free and the full headroom."""
        board = cls(epoch)
        for p in epoch.pools:
            for n in p.nodes:
                board.size[n] = p.gpus_per_node
                board.free[n] = [
                    0 if n in p.drained[k] else p.gpus_per_node for k in range(epoch.slices)
                ]
            for k in range(epoch.slices):
                board.totals[(p.index, k)] = p.capacity(k)
            groups: dict[tuple[int, ...], set[str]] = {}
            for n in p.nodes:
                groups.setdefault(tuple(board.free[n]), set()).add(n)
            board.alike[p.index] = groups
        board.budget = dict(epoch.headroom_q)
        return board

    def copy(self) -> Board:
        """An independent copy (to try another placement order)."""
        return Board(
            self.epoch,
            free={n: list(f) for n, f in self.free.items()},
            size=self.size,
            budget=dict(self.budget),
            work=dict(self.work),
            runs=list(self.runs),
            totals=dict(self.totals),
            alike={p: {v: set(nodes) for v, nodes in g.items()} for p, g in self.alike.items()},
        )

    def occupy(self, run: Run, pool: SubPool) -> None:
        """Take the run's GPUs on its nodes for its slices."""
        per_node = pool.held(run.state.job.gpus, 1)
        groups = self.alike[pool.index]
        for n in run.nodes:
            slots = self.free[n]
            was = tuple(slots)
            for k in range(run.first, run.last):
                new = max(slots[k] - per_node, 0)
                self.totals[(pool.index, k)] -= slots[k] - new
                slots[k] = new
            group = groups[was]
            group.discard(n)
            if not group:
                del groups[was]
            groups.setdefault(tuple(slots), set()).add(n)
        self.runs.append(run)
        job = run.state.job
        span = run.last - run.first
        self.work[job.project] = self.work.get(job.project, 0) + span * self.epoch.work_q(job.gpus, pool)

    def place(
        self, pool: SubPool, gpus: int, first: int, last: int, prefer: tuple[str, ...],
        contract: float = 0.0,
    ) -> tuple[str, ...] | None:
        """Nodes open and free enough in every slice of ``first .. last-1``, and none
        whose maintenance opens while a contract of ``contract`` seconds from the start of
        slice ``first`` would hold.

        Without nodes of its own to return to, a small gang prefers nodes that stay in
        use to the epoch's end, so nodes about to empty stay whole for large gangs. Among
        nodes that fit equally, the gang takes those with the fewest GPUs free in the
        other slices (``spare``), leaving the nodes free for longer to longer runs.
        """
        gpn = pool.gpus_per_node
        end = self.epoch.slices - 1
        # Only nodes the gang could use: room for a single-node gang, whole for the
        # nodes of a multi-node one.
        need = min(gpus, gpn)
        # (free GPUs in the window, in the slices outside it, names) per group that fits.
        fit: list[tuple[int, int, set[str], tuple[int, ...]]] = []
        for slots, names in self.alike[pool.index].items():
            if slots[first] < need:
                continue
            window = min(slots[first:last])
            if window >= need:
                fit.append((window, sum(slots) - sum(slots[first:last]), names, slots))
        # Maintenance in reach (most pools have none): then each node's rule is asked,
        # and the choice is place_gang's over the nodes left.
        if pool.drain_opens or any(pool.drained[k] for k in range(first, last)):
            t0 = self.epoch.slice_start(first)
            free: dict[str, int] = {}
            spare: dict[str, int] = {}  # free GPUs in the slices outside the run
            for window, outside, names, _ in fit:
                for n in names:
                    if not pool.keeps_off(n, first, last, t0, contract):
                        free[n] = window
                        spare[n] = outside
            if not prefer and 2 * gpus <= gpn:
                prefer = tuple(n for n in free if self.free[n][end] < gpn)
            return place_gang(free, self.size, gpus, prefer=prefer, spare=spare)
        return _place_alike(fit, gpus, gpn, prefer, end)

    def pool_free(self, pool: SubPool, k: int) -> int:
        """Free GPUs of ``pool`` in slice ``k``."""
        return self.totals[(pool.index, k)]


def _place_alike(
    fit: list[tuple[int, int, set[str], tuple[int, ...]]],
    gpus: int,
    gpn: int,
    prefer: tuple[str, ...],
    end: int,
) -> tuple[str, ...] | None:
    """:func:`place_gang`'s choice among groups of alike nodes (:attr:`Board.alike`):
    ``fit`` holds each group with room, as (free GPUs in the window, free GPUs outside
    it, its nodes, its free GPUs per slice); nodes of ``gpn`` GPUs each.

    The same order as place_gang's: the nodes of ``prefer`` first (without them, for a
    small gang, nodes still busy in the last slice), then best fit, then least to
    spare, then name; a multi-node gang takes whole empty nodes in that order.
    """
    if not fit:
        return None
    preferred = set(prefer)
    if gpus <= gpn:
        if preferred:
            own = [(window - gpus, outside, n) for window, outside, names, _ in fit for n in names & preferred]
            if own:
                return (min(own)[2],)
            return (min((window - gpus, outside, min(names)) for window, outside, names, _ in fit)[2],)
        small = 2 * gpus <= gpn
        best = min((small and slots[end] >= gpn, window - gpus, outside, min(names))
                   for window, outside, names, slots in fit)
        return (best[3],)
    need = nodes_needed(gpus, gpn)
    empty = [(outside, names) for window, outside, names, _ in fit if window == gpn]
    if sum(len(names) for _, names in empty) < need:
        return None
    chosen = sorted((outside, n) for outside, names in empty for n in names & preferred)[:need]
    by_outside: dict[int, list[str]] = {}
    for outside, names in empty:
        by_outside.setdefault(outside, []).extend(names - preferred)
    for outside in sorted(by_outside):
        if len(chosen) >= need:
            break
        chosen.extend((outside, n) for n in sorted(by_outside[outside])[: need - len(chosen)])
    return tuple(sorted(n for _, n in chosen))


def previous_nodes(previous: Plan | None) -> dict[str, tuple[str, ...]]:
    """The nodes each job held in the last slice it appeared in ``previous``."""
    out: dict[str, tuple[str, ...]] = {}
    if previous is None:
        return out
    for s in previous.slices:
        for a in s.assignments:
            out[a.job] = a.nodes
    return out


def place_runs(
    epoch: Epoch,
    ends: dict[str, int],
    starts: list[Start],
    previous: Plan | None,
    *,
    fill: bool,
    counts: dict[tuple[str, bool, int], int] | None = None,
) -> tuple[list[Run], set[str], Board]:
    """Place running jobs (on their nodes) and starts; optionally fill the gaps.

    ``counts`` are the model's charged slices (:func:`charge_runs`). Returns the runs,
    the ids of the starts whose gang found no hole, and the board.
    """
    board = Board.empty(epoch)
    runs: list[Run] = []
    for r in epoch.running:
        end = ends.get(r.id, r.must)
        if end <= 0:
            continue
        run = Run(r.state, r.pool, 0, end, r.state.nodes, True)
        board.occupy(run, epoch.pools[r.pool])
        runs.append(run)
    prev = previous_nodes(previous)
    class_of = {st.job.id: c for c in epoch.classes for st in c.jobs}
    length = {s.state.job.id: class_of[s.state.job.id].length(s.slice, epoch.slices) for s in starts}

    def big(s: Start) -> bool:
        """Whether the gang needs a node to itself."""
        return 2 * s.state.job.gpus > epoch.pools[s.pool].gpus_per_node

    def run_length(s: Start) -> int:
        return length[s.state.job.id]

    # Several orders; the one that places the most work wins. Measured on the 3,000-job
    # benchmark epochs (docs/formulation.md), the first two drop the fewest gangs:
    # slice by slice with the longest runs first (a long run needs the same nodes in
    # more slices, so it goes before short runs fragment them), and gangs that need
    # whole nodes first, longest first. The others: slice by slice with the most
    # GPU-slices first; slice by slice with the largest gangs first; gangs that need
    # whole nodes first in slice order; and those, then the small gangs largest first
    # whatever their slice (first-fit decreasing: the 1-GPU jobs fill the last holes).
    orders = [
        sorted(starts, key=lambda s: (s.slice, -run_length(s), -s.state.job.gpus, s.state.job.id)),
        sorted(
            starts,
            key=lambda s: (not big(s), -run_length(s), s.slice, -s.state.job.gpus, s.state.job.id),
        ),
        sorted(
            starts,
            key=lambda s: (
                s.slice,
                -run_length(s) * epoch.pools[s.pool].taken(s.state.job.gpus),
                s.state.job.id,
            ),
        ),
        sorted(starts, key=lambda s: (s.slice, -s.state.job.gpus, s.state.job.id)),
        sorted(starts, key=lambda s: (not big(s), s.slice, -s.state.job.gpus, s.state.job.id)),
        sorted(
            starts,
            key=lambda s: (
                not big(s),
                s.slice if big(s) else -s.state.job.gpus,
                s.slice,
                s.state.job.id,
            ),
        ),
    ]
    best: tuple[int, Board, list[Run], set[str]] | None = None
    for order in orders:
        trial = board.copy()
        result = place_in_order(epoch, trial, order, length, prev, beat=None if best is None else best[0])
        if result is None:
            continue  # it could no longer place more work than the best order
        work, placed_runs, dropped = result
        if best is None or work > best[0]:
            best = (work, trial, placed_runs, dropped)
        if not dropped:
            break
    assert best is not None
    _, board, placed_runs, dropped = best
    runs.extend(placed_runs)
    if fill:
        placed = {r.state.job.id for r in runs}
        runs.extend(fill_gaps(epoch, board, placed, prev))
    board.budget = charge_runs(epoch, runs, counts)
    return runs, dropped, board


def place_in_order(
    epoch: Epoch,
    board: Board,
    order: list[Start],
    length: dict[str, int],
    prev: dict[str, tuple[str, ...]],
    beat: int | None = None,
) -> tuple[int, list[Run], set[str]] | None:
    """Place ``order``'s starts one by one on ``board`` (which takes them).

    ``length`` is each start's run length in slices, by job id. Returns the work placed
    (quanta), the placed runs, and the ids of the starts whose gang found no hole; or
    ``None`` as soon as the gangs dropped leave no more than ``beat`` quanta to place
    (another order placed that much already: this one cannot win, and the rest of it
    need not be placed).
    """
    runs: list[Run] = []
    dropped: set[str] = set()
    work = 0
    most = None
    if beat is not None:
        most = sum(length[s.state.job.id] * epoch.work_q(s.state.job.gpus, epoch.pools[s.pool]) for s in order)
    for s in order:
        pool = epoch.pools[s.pool]
        last = s.slice + length[s.state.job.id]
        nodes = board.place(pool, s.state.job.gpus, s.slice, last, prev.get(s.state.job.id, ()),
                            drain_guard(s.state.job, True, s.state.remaining))
        if nodes is None:
            dropped.add(s.state.job.id)
            if most is not None:
                most -= (last - s.slice) * epoch.work_q(s.state.job.gpus, pool)
                if beat is not None and most <= beat:
                    return None
            continue
        run = Run(s.state, s.pool, s.slice, last, nodes, False)
        board.occupy(run, pool)
        runs.append(run)
        work += (last - s.slice) * epoch.work_q(s.state.job.gpus, pool)
    return work, runs, dropped


def charge_runs(
    epoch: Epoch, runs: list[Run], counts: dict[tuple[str, bool, int], int] | None = None
) -> dict[str, int]:
    """Decide which slices of funded runs are charged; returns the headroom left.

    ``counts`` (from the MIP: :func:`planner.mip.formulation.charge_counts`) says how
    many slices of each size, per project and urgent or not, to charge: so the plan
    charges what the model counted. Within a size, and then for any headroom still left
    (placement may have dropped a run the model charged, or the fill added some),
    slices are charged in this order while the headroom lasts: running jobs first, then
    urgent work, higher priority, earlier slices. The rest runs unallocated.
    """
    left = dict(epoch.headroom_q)
    order = sorted(
        runs,
        key=lambda r: (
            not r.running,
            not r.state.job.urgent,
            -r.state.job.priority,
            r.first,
            r.state.job.id,
        ),
    )
    for run in order:
        run.charged = [False] * (run.last - run.first)
    want = dict(counts or {})
    for top_up in (False, True) if want else (True,):
        for run in order:
            job = run.state.job
            if not job.allocated:
                continue
            wq = epoch.work_q(job.gpus, epoch.pools[run.pool])
            key = (job.project, job.urgent, wq)
            cost = epoch.charge_of(wq, job.urgent)
            for i in range(run.last - run.first):
                if run.charged[i] or left.get(job.project, 0) < cost:
                    continue
                if not top_up:
                    if want.get(key, 0) <= 0:
                        break
                    want[key] -= 1
                run.charged[i] = True
                left[job.project] = left.get(job.project, 0) - cost
    return left


def fill_gaps(
    epoch: Epoch, board: Board, placed: set[str], prev: dict[str, tuple[str, ...]]
) -> list[Run]:
    """Start waiting jobs on what is left, greedily by the objective's gain per quantum.

    The next job is the one whose whole run adds most objective per quantum of work
    (:func:`start_gain`): the project's concave utility over the work the run adds (its
    charged slices while the headroom lasts, the uncharged slope for the rest while the
    project's work is below its owed share), plus the work-conservation bonus. So a
    project just short of a utility step takes a small job that fills the step rather
    than a large gang that would run past it at a lower slope. Ties: urgent, then
    priority, then the oldest. A job that fits nowhere now never will (the board only
    fills), so its whole class is set aside. This is also the whole of the greedy
    fallback plan.
    """
    state = _fill_state(epoch, board)
    # Per project and shape (funded, urgent, work per slice, span: all a member's gain
    # depends on), a heap of its waiting members: urgent, then priority, then the oldest.
    Shape = tuple[bool, bool, int, int]
    Entry = tuple[bool, int, float, str, int]
    waiting: dict[str, dict[Shape, list[Entry]]] = {}
    for c in epoch.classes:
        shape = (c.allocated, c.urgent, epoch.work_q(c.gpus, epoch.pools[c.pools[0]]), c.length(0, epoch.slices))
        heap_of = waiting.setdefault(c.project, {}).setdefault(shape, [])
        for i, st in enumerate(c.jobs):
            if st.job.id not in placed:
                heap_of.append((not c.urgent, -c.priority, st.job.submit, st.job.id, c.index * 1_000_000 + i))
    for shapes in waiting.values():
        for heap_of in shapes.values():
            heapq.heapify(heap_of)
    dead: set[int] = set()  # classes none of whose members fits any more
    # Each project's gain per quantum by shape: it changes only when the project starts
    # a job (start_gain reads only the project's own state), so it is kept until then.
    gains: dict[str, dict[Shape, float]] = {}
    # Each project's shapes ranked, a heap of (-gain per quantum, head member, shape):
    # its top is the project's best shape (the highest gain, then the first member by
    # urgent, priority, age). A class's members all have one shape, so when a member
    # finds no room (its class dies) only that shape's head moves; when the project
    # starts a job every gain moves, and all its shapes are ranked again.
    ranked: dict[str, list[tuple[float, Entry, Shape]]] = {}

    def head(project: str, shape: Shape) -> Entry | None:
        """The shape's first member still alive (dead classes' members dropped)."""
        heap_of = waiting[project].get(shape)
        if heap_of is None:
            return None
        while heap_of and heap_of[0][4] // 1_000_000 in dead:
            heapq.heappop(heap_of)
        if not heap_of:
            del waiting[project][shape]
            return None
        return heap_of[0]

    def gain(project: str, shape: Shape) -> float:
        known = gains.setdefault(project, {})
        d = known.get(shape)
        if d is None:
            allocated, urgent, wq, span = shape
            d = start_gain(epoch, state, project, allocated, urgent, wq, span) / max(span * wq, 1)
            known[shape] = d
        return d

    def rank_all(project: str) -> None:
        ranks: list[tuple[float, Entry, Shape]] = []
        for shape in list(waiting[project]):
            first = head(project, shape)
            if first is not None:
                ranks.append((-gain(project, shape), first, shape))
        heapq.heapify(ranks)
        ranked[project] = ranks

    def rerank(project: str, shape: Shape) -> None:
        first = head(project, shape)
        if first is not None:
            heapq.heappush(ranked[project], (-gain(project, shape), first, shape))

    # The heap holds each project once, keyed by its best shape's gain (the project
    # names break every tie), with that shape: nothing a project's ranking reads (its
    # waiting members, its dead classes, its own charged work) changes while another
    # project takes its turn, so its best when pushed is still its best when popped.
    heap: list[tuple[float, str, Shape]] = []
    for project in waiting:
        rank_all(project)
        if ranked[project]:
            neg, _, shape = ranked[project][0]
            heap.append((neg, project, shape))
    heapq.heapify(heap)
    out: list[Run] = []
    no_hole: set[tuple[int, int, int, int, float]] = set()  # see _try_start
    while heap:
        _, project, shape = heapq.heappop(heap)
        heapq.heappop(ranked[project])  # the shape's entry: its head is taken now
        entry = heapq.heappop(waiting[project][shape])
        cls = epoch.classes[entry[4] // 1_000_000]
        st = cls.jobs[entry[4] % 1_000_000]
        started = _try_start(epoch, board, cls, st, prev, no_hole)
        if started is None:
            dead.add(cls.index)  # identical members: none fits now, nor will later
            rerank(project, shape)
        else:
            out.append(started)
            state.add(epoch, started)
            gains.pop(project, None)
            rank_all(project)
        if ranked[project]:
            neg, _, nxt = ranked[project][0]
            heapq.heappush(heap, (neg, project, nxt))
    return out


class UtilityCurve(NamedTuple):
    """A project's utility, as the fill values its work (:func:`utility_curve`)."""

    #: Objective per charged quantum in each segment (decreasing).
    slopes: list[int]
    #: Where the segments end, in charged quanta.
    ends: list[int]
    #: Objective per uncharged quantum while the project's work is below its share.
    free: int


@dataclass
class FillState:
    """Per project: charged work, budget spent and all work (quanta) of the runs so far."""

    charged: dict[str, int]
    spent: dict[str, int]
    work: dict[str, int]
    #: Per project, its utility's slopes and segment ends and its uncharged slope: the
    #: fill asks for a project's gain thousands of times, and they never change.
    curves: dict[str, UtilityCurve] = field(default_factory=dict)

    def curve(self, epoch: Epoch, project: str) -> UtilityCurve:
        """``project``'s :func:`utility_curve`, worked out once."""
        known = self.curves.get(project)
        if known is None:
            known = self.curves[project] = utility_curve(epoch, project)
        return known

    def add(self, epoch: Epoch, run: Run) -> None:
        """Count a run: its slices are charged while the headroom lasts."""
        job = run.state.job
        pool = epoch.pools[run.pool]
        wq = epoch.work_q(job.gpus, pool)
        span = run.last - run.first
        p = job.project
        self.work[p] = self.work.get(p, 0) + span * wq
        if job.allocated:
            n = self.charged_slices(epoch, p, wq, job.urgent, span)
            self.charged[p] = self.charged.get(p, 0) + n * wq
            self.spent[p] = self.spent.get(p, 0) + n * epoch.charge_of(wq, job.urgent)

    def charged_slices(self, epoch: Epoch, project: str, wq: int, urgent: bool, span: int) -> int:
        """Of a funded run of ``span`` slices of ``wq`` quanta, the slices the project's
        headroom left still pays for (the first ones are charged)."""
        cost = epoch.charge_of(wq, urgent)
        return min(span, max(epoch.headroom_q.get(project, 0) - self.spent.get(project, 0), 0) // cost)


def utility_curve(epoch: Epoch, project: str) -> UtilityCurve:
    """``project``'s segment slopes, segment ends (quanta) and uncharged slope (while
    its work is below its owed share)."""
    return UtilityCurve(segment_slopes(epoch, project), segment_ends(epoch, project), free_marginal(epoch, project, 0))


def _fill_state(epoch: Epoch, board: Board) -> FillState:
    state = FillState({}, {}, {})
    order = sorted(board.runs, key=lambda r: (not r.running, not r.state.job.urgent, r.first))
    for run in order:
        state.add(epoch, run)
    return state


def start_gain(
    epoch: Epoch, state: FillState, project: str, allocated: bool, urgent: bool, wq: int, span: int
) -> float:
    """Objective a run of ``span`` slices of ``wq`` quanta adds to ``project``.

    Charged slices (while the headroom lasts) climb the concave utility from the
    project's charged work; the rest earns the uncharged slope while the project's work
    stays below its owed share; every quantum earns the work bonus.
    """
    target = epoch.target_q.get(project, 0)
    charged = state.charged.get(project, 0)
    n = state.charged_slices(epoch, project, wq, urgent, span) if allocated else 0
    curve = state.curve(epoch, project)
    gain = float(WORK_BONUS * span * wq)
    gain += utility_gain(epoch, project, charged, n * wq, curve)
    uncharged = (span - n) * wq
    if uncharged:
        # Uncharged work counts up to what the charged work leaves of the owed share.
        room = target - min(charged + n * wq, target) - (state.work.get(project, 0) - charged)
        gain += curve.free * max(min(uncharged, room), 0)
    return gain


def utility_gain(
    epoch: Epoch,
    project: str,
    charged: int,
    add: int,
    curve: UtilityCurve | None = None,
) -> float:
    """The concave utility of ``charged + add`` charged quanta minus that of ``charged``
    (``curve``: the project's :meth:`FillState.curve`, when known)."""
    if add <= 0:
        return 0.0
    slopes, ends, _ = curve if curve is not None else utility_curve(epoch, project)
    gain = 0.0
    lo, hi = charged, charged + add
    start = 0
    for s, slope in enumerate(slopes):
        end = ends[s] if s < len(ends) else hi
        a, b = max(lo, start), min(hi, end)
        if b > a:
            gain += slope * (b - a)
        start = end
    return gain


def _try_start(
    epoch: Epoch,
    board: Board,
    cls: JobClass,
    st: JobState,
    prev: dict[str, tuple[str, ...]],
    no_hole: set[tuple[int, int, int, int, float]],
) -> Run | None:
    """The job's run in the first slice and pool with a hole for it, taken on ``board``.

    ``no_hole`` holds the (pool, GPUs, first slice, end slice, contract) that found no
    hole on this board before: the board only fills, so they never will (whether a hole
    exists does not depend on the job's previous nodes, only which one is taken), and
    the jobs of other projects of the same shape skip the search of every node.
    """
    job = st.job
    pools = [(p, epoch.pools[p], epoch.pools[p].taken(job.gpus)) for p in cls.pools]
    guard = drain_guard(job, True, st.remaining)
    for first in range(epoch.slices):
        for p, pool, taken in pools:
            if board.pool_free(pool, first) < taken:
                continue
            last = first + cls.length(first, epoch.slices)
            key = (p, job.gpus, first, last, guard)
            if key in no_hole:
                continue
            nodes = board.place(pool, job.gpus, first, last, prev.get(job.id, ()), guard)
            if nodes is None:
                no_hole.add(key)
                continue
            run = Run(st, p, first, last, nodes, False)
            board.occupy(run, pool)
            return run
    return None


def build_plan(
    epoch: Epoch,
    runs: list[Run],
    pending: list[Pending],
    solver: SolverInfo,
) -> Plan:
    """The :class:`Plan` of placed runs."""
    snap = epoch.snapshot
    slices: list[list[Assignment]] = [[] for _ in range(epoch.slices)]
    actions: list[Action] = []
    for run in sorted(runs, key=lambda r: (r.first, r.state.job.id)):
        pool = epoch.pools[run.pool]
        job = run.state.job
        for k in range(run.first, run.last):
            charged = bool(run.charged[k - run.first]) if run.charged else False
            slices[k].append(
                Assignment(
                    job=job.id,
                    project=job.project,
                    cluster=pool.cluster,
                    gpu_type=pool.gpu_type,
                    nodes=run.nodes,
                    gpus=job.gpus,
                    charged=charged,
                )
            )
        if run.running:
            actions.append(Action(job=job.id, action="continue", at=epoch.start))
        else:
            kind = "resume" if resumes(run.state) else "start"
            actions.append(Action(job=job.id, action=kind, at=epoch.slice_start(run.first)))
    ran_to = {r.state.job.id: r.last for r in runs if r.running}
    for r in epoch.running:
        end = ran_to.get(r.id, 0)
        if end < r.finish:
            actions.append(Action(job=r.id, action="preempt", at=epoch.slice_start(end)))
    actions.sort(key=lambda a: (a.at, a.job))
    plan_slices = tuple(
        Slice(
            start=epoch.slice_start(k),
            end=epoch.slice_end(k),
            assignments=tuple(sorted(slices[k], key=lambda a: a.job)),
        )
        for k in range(epoch.slices)
    )
    return Plan(
        epoch_start=epoch.start,
        epoch_end=epoch.end,
        origin=snap.origin,
        slices=plan_slices,
        actions=tuple(actions),
        pending=tuple(sorted(pending, key=lambda p: p.job)),
        projects=_projects(epoch, runs),
        solver=solver,
        drained_nodes=_drained(epoch, runs),
    )


def slice_hours(epoch: Epoch, run: Run) -> list[float]:
    """Wall-clock hours of each slice of the run (a job may finish mid-slice)."""
    rest = run.state.remaining
    if not run.running:
        rest = remaining_with_restart(run.state, epoch.snapshot.policy.restart_overhead)
    out: list[float] = []
    for i in range(run.last - run.first):
        seconds = epoch.slice_len
        if rest is not None:
            seconds = min(seconds, max(rest - i * epoch.slice_len, 0.0))
        out.append(seconds / 3600.0)
    return out


def _projects(epoch: Epoch, runs: list[Run]) -> tuple[ProjectPlan, ...]:
    snap = epoch.snapshot
    hours = snap.policy.epoch / 3600.0
    planned: dict[str, float] = {}
    charged: dict[str, float] = {}
    for run in runs:
        pool = epoch.pools[run.pool]
        job = run.state.job
        factor = epoch.urgent_charge if job.urgent else 1.0
        for i, h in enumerate(slice_hours(epoch, run)):
            gpu_h = h * job.gpus * pool.rate
            planned[job.project] = planned.get(job.project, 0.0) + gpu_h
            if run.charged and run.charged[i]:
                charged[job.project] = charged.get(job.project, 0.0) + gpu_h * factor
    projects = sorted(set(snap.standing) | set(planned))
    return tuple(
        ProjectPlan(
            project=p,
            owed_gpu_h=(snap.standing[p].owed_gpus * hours) if p in snap.standing else 0.0,
            planned_gpu_h=planned.get(p, 0.0),
            charged_gpu_h=charged.get(p, 0.0),
        )
        for p in projects
    )


def _leaves_at(epoch: Epoch, run: Run) -> float:
    """When a run still going at the epoch's end leaves its (drained) nodes.

    Funded non-resumable work runs to completion (:func:`models.keeps_running`); other
    work moves off once its contract allows, at the latest when it completes. Unknown
    durations count as the epoch's end.
    """
    state = run.state
    need = (
        state.remaining
        if run.running
        else remaining_with_restart(state, epoch.snapshot.policy.restart_overhead)
    )
    done = epoch.end if need is None else epoch.slice_start(run.first) + need
    charged = state.charged if run.running else state.job.allocated
    if (charged and not state.job.resumable) or (
        run.running and keeps_running(state.job, state.charged, state.progress, epoch.slice_len)
    ):
        return max(done, epoch.slice_start(run.last - 1))
    contract = state.contract_end if run.running else epoch.slice_start(run.first) + state.job.min_runtime
    leave = max(epoch.end, contract if charged else epoch.end)
    return max(min(done, leave), epoch.slice_start(run.last - 1))


def _drained(epoch: Epoch, runs: list[Run]) -> tuple[NodeFree, ...]:
    """When each node drained during the epoch has no more work on it."""
    busy_until: dict[str, float] = {}
    for run in runs:
        end = epoch.slice_start(run.last)
        if run.last >= epoch.slices:
            end = _leaves_at(epoch, run)
        for n in run.nodes:
            busy_until[n] = max(busy_until.get(n, 0.0), end)
    out: list[NodeFree] = []
    for ns in epoch.snapshot.nodes:
        if ns.drain_start is None or ns.drain_start >= epoch.end:
            continue
        if ns.drain_end is not None and ns.drain_end <= epoch.start:
            continue
        start = max(ns.drain_start, epoch.start)
        out.append(NodeFree(node=ns.node.name, free_at=max(start, busy_until.get(ns.node.name, 0.0))))
    return tuple(sorted(out, key=lambda f: f.node))
