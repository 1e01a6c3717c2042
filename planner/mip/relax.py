"""The LP relaxation of a :class:`LinearModel`, solved by an LP-capable backend.

It gives the large epochs two things: a proven upper bound on the objective, and the
values that the planner rounds into its first incumbents and compares with each
incumbent to choose the next neighbourhood (:mod:`planner.mip`). The LP itself is
solved by whichever registered backend declares ``lp_relaxation``
(:func:`planner.mip.backends.lp_backend`); this module sees only its
:class:`~planner.mip.backends.base.LpSession`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import math
import threading
import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.mip.backends import lp_backend
from planner.mip.backends.base import IntegerAnswer, LpCapable
from planner.mip.backends.isolate import Isolated, SolverDied, Unavailable
from planner.mip.model import Constraint, LinearModel

#: The longest one part's MIP may take in the Lagrangian bound (seconds): a part the
#: solver cannot close in this keeps the bound it proved, and the time goes to the next.
PART_MIP_CAP = 0.25
#: Seconds a part's MIP may answer after the planner's deadline before its process is
#: stopped (:data:`PARTS_PROCESS`).
PARTS_GRACE = 0.02


def import_highs() -> bool:
    """The parts process's first task: load HiGHS and this module before it is needed,
    and give way to every other process: it solves parts beside the searches
    (:class:`PartsBeside`), on what CPU they leave."""
    import os

    import highspy  # noqa: F401

    with contextlib.suppress(OSError, AttributeError):
        os.nice(19)
    return True


#: The process the parts' MIPs run in. HiGHS does not stop at its time limit inside its
#: root's cut rounds (parts of the benchmark's epochs ran 0.6-1.25 s past a 0.25 s
#: limit: docs/formulation-passes.md, *Seventeenth pass*); a process can be stopped at the
#: planner's deadline. Started by :func:`warm_parts`, long before the parts phase.
PARTS_PROCESS = Isolated(grace=PARTS_GRACE, startup=import_highs)


def warm_parts() -> None:
    """Start :data:`PARTS_PROCESS` without waiting for it."""
    PARTS_PROCESS.warm()


@dataclass(frozen=True)
class Relaxation:
    """The LP optimum: values (floats) and objective, an upper bound of the MIP's."""

    values: npt.NDArray[np.float64]
    bound: float
    seconds: float


def lp_available() -> bool:
    """Whether a registered backend can solve LP relaxations (nothing is imported)."""
    return lp_backend() is not None


def solve_relaxation(
    model: LinearModel, time_limit: float, lp: LpCapable | None = None
) -> Relaxation | None:
    """Solve the LP relaxation with ``lp`` (default: the registry's LP-capable backend).

    ``None`` when no backend can, or it finds no optimum.
    """
    lp = lp or lp_backend()
    if lp is None:
        return None
    t0 = time.perf_counter()
    session = lp.open_lp(model)
    if not session.run(time_limit):
        return None
    return Relaxation(session.values(), session.objective(), time.perf_counter() - t0)


@dataclass(frozen=True)
class Lagrangian:
    """A Lagrangian bound: its value, and how many parts were branched and closed."""

    bound: float
    parts: int
    branched: int
    closed: int
    seconds: float
    #: The LP's values with each solved project's integer optimum (under the prices) in
    #: place of its fractional ones: a point to round into an incumbent.
    values: npt.NDArray[np.float64]
    #: The parts branched and left open, for :func:`solve_open_parts`.
    open_parts: tuple[OpenPart, ...] = ()
    #: The hair added to ``bound`` against the solver's tolerances.
    slack: float = 0.0


@dataclass(frozen=True)
class OpenPart:
    """A part of the Lagrangian bound left open: its variables, its rows, its priced
    objective (one float per variable) and the bound it holds."""

    idx: npt.NDArray[np.int64]
    rows: tuple[int, ...]
    cost: npt.NDArray[np.float64]
    known: float


@dataclass(frozen=True)
class Parts:
    """The parts a model falls into once its coupling rows are priced out: the
    variables linked by the other rows (transitively), keyed by a root variable."""

    #: root -> the part's variables, ascending.
    members: dict[int, npt.NDArray[np.int64]]
    #: root -> the part's rows (none for a variable that is in no row but coupling ones).
    rows: dict[int, list[int]]
    #: variable -> the root of its part.
    roots: npt.NDArray[np.int64]


def split_parts(model: LinearModel, coupling: list[int]) -> Parts:
    """The parts of ``model`` with its ``coupling`` rows left out (here one per project)."""
    n = model.num_vars
    is_coupling = np.zeros(len(model.constraints), dtype=bool)
    is_coupling[coupling] = True
    # Union-find over plain lists: numpy scalars cost ten times as much per access.
    parent = list(range(n))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for i, c in enumerate(model.constraints):
        if is_coupling[i] or len(c.vars) < 2:
            continue
        first, *rest = c.vars.tolist()
        root = find(first)
        for v in rest:
            other = find(v)
            if other != root:
                parent[other] = root
    roots = [find(v) for v in range(n)]
    rows: dict[int, list[int]] = {}
    for i, c in enumerate(model.constraints):
        if not is_coupling[i] and len(c.vars):
            rows.setdefault(roots[int(c.vars[0])], []).append(i)
    members: dict[int, list[int]] = {}
    for v, root in enumerate(roots):
        members.setdefault(root, []).append(v)
    return Parts(
        {root: np.asarray(vs, dtype=np.int64) for root, vs in members.items()}, rows, np.asarray(roots, dtype=np.int64)
    )


def priced_objective(
    model: LinearModel, coupling: list[int], duals: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], float]:
    """The objective with the ``coupling`` rows moved into it at prices ``duals``:
    ``c' = c - sum_i y_i a_i`` and the constant ``sum_i y_i b_i`` (offset included).
    A price of the wrong sign for its row is taken as 0 (it would not bound)."""
    cost = model.objective_vector()
    const = float(model.objective_offset)
    for i in coupling:
        c = model.constraints[i]
        y = float(duals[i])
        if (c.sense == "<=" and y < 0) or (c.sense == ">=" and y > 0):
            y = 0.0
        cost[c.vars] -= y * c.coefs
        const += y * c.rhs
    return cost, const


def part_model(model: LinearModel, idx: npt.NDArray[np.int64], rows: list[int] | tuple[int, ...]) -> LinearModel:
    """The model of one part: variables ``idx`` of ``model`` and its ``rows``, renumbered."""
    where = np.full(model.num_vars, -1, dtype=np.int64)
    where[idx] = np.arange(len(idx))
    sub = LinearModel(
        names=[model.names[v] for v in idx],
        lower=[model.lower[v] for v in idx],
        upper=[model.upper[v] for v in idx],
    )
    for i in rows:
        c = model.constraints[i]
        sub.constraints.append(
            Constraint(vars=where[c.vars], coefs=c.coefs, sense=c.sense, rhs=c.rhs, name=c.name)
        )
    return sub


def lagrangian_bound(
    model: LinearModel,
    coupling: list[int],
    values: npt.NDArray[np.float64],
    duals: npt.NDArray[np.float64],
    deadline: float,
    lp: LpCapable,
    nodes: int = 10,
    deeper: int = 0,
    close_share: float = 0.4,
    parts: Parts | None = None,
) -> Lagrangian:
    """An upper bound of the MIP at least as tight as its LP's, from the LP's duals.

    The ``coupling`` rows (those that link the parts, here the projects, through shared
    capacity) move into the objective with the LP's duals as multipliers
    (:meth:`~planner.mip.backends.base.LpSession.duals`, clipped to their valid sign):
    ``max c'x + const`` with ``c' = c - sum_i y_i a_i`` and ``const = sum_i y_i b_i``.
    For any such multipliers this bounds the MIP from above (weak duality), and with the
    LP's it equals the LP bound before any branching. What is left falls apart into
    independent parts (connected by the remaining rows); the bound is the sum of the
    parts' maxima. A part the LP solves integrally is exact already; the others are
    branched best first on their own small LPs, at most ``nodes`` branchings each, and
    contribute the best LP value still open (their optimum if a node came out integral
    first). When at least ``close_share`` of the parts branched closed (small parts, as
    with 1,000 projects of three jobs), the parts left open are branched again, at most
    ``deeper`` branchings each, while the deadline allows. Parts not reached by
    ``deadline`` keep their LP value, so the result is a valid bound whenever it stops.
    ``parts``: :func:`split_parts` of ``model`` and ``coupling`` when the caller has it.
    """
    t0 = time.perf_counter()
    cost, const = priced_objective(model, coupling, duals)
    if parts is None:
        parts = split_parts(model, coupling)
    rows = parts.rows
    lower = np.asarray(model.lower, dtype=np.float64)
    upper = np.asarray(model.upper, dtype=np.float64)
    total = const
    fractional = np.abs(values - np.round(values)) > 1e-6
    members = parts.members
    # Parts the LP leaves fractional, the most objective at stake first.
    todo: list[tuple[float, int]] = []
    for root, idx in members.items():
        if root not in rows:
            # No rows: each variable at its better bound.
            total += float(np.maximum(cost[idx] * lower[idx], cost[idx] * upper[idx]).sum())
            continue
        total += float(np.dot(cost[idx], values[idx]))
        if fractional[idx].any():
            todo.append((-float(np.abs(cost[idx] * (values[idx] - np.floor(values[idx]))).sum()), root))
    todo.sort()
    point = values.copy()
    branched = closed = 0
    #: The branched parts left open, each with its bound so far.
    open_parts: list[OpenPart] = []
    for _, root in todo:
        if time.perf_counter() >= deadline:
            break
        idx = members[root]
        part_lp = float(np.dot(cost[idx], values[idx]))
        best = _branch_part(model, idx, rows[root], cost[idx], lower[idx], upper[idx], nodes, deadline, lp)
        if best is None:
            continue
        value, exact, solution = best
        branched += 1
        closed += int(exact)
        if exact:
            point[idx] = solution
        else:
            open_parts.append(OpenPart(idx, tuple(rows[root]), cost[idx], min(value, part_lp)))
        total += min(value, part_lp) - part_lp
    if deeper > nodes and branched and closed >= close_share * branched:
        fall, more, open_parts = _close_parts(
            model, lower, upper, open_parts, point, deeper, deadline, lp, exact_mip=False
        )
        total += fall
        closed += more

    # HiGHS's tolerances: a hair of slack so that rounding never makes it invalid.
    slack = 1e-7 * abs(total)
    return Lagrangian(
        total + slack, len(todo), branched, closed, time.perf_counter() - t0, point, tuple(open_parts), slack
    )


def solve_open_parts(
    model: LinearModel, lag: Lagrangian, deadline: float, lp: LpCapable, beside: threading.Event | None = None
) -> Lagrangian:
    """``lag`` with the parts it left open solved as integers by ``lp``'s own MIP (a
    backend that declares ``integer_parts``), smallest first, each for at most
    :data:`PART_MIP_CAP`, until ``deadline``: a tighter bound, valid whenever it stops
    (a part not closed keeps the solver's proven bound, or the one it had).

    On the benchmark's families this takes 0.02-0.19 points more off the bound in 2 s
    than the branching leaves (docs/formulation-passes.md, *Twelfth pass*); the planner runs
    it beside its searches and in the time after the last (:class:`PartsBeside`).

    With ``beside`` (an event that stops it between parts), every part is solved in
    :data:`PARTS_PROCESS`, waiting for it to start, never in this process
    (:class:`PartsBeside`).
    """
    t0 = time.perf_counter()
    lower = np.asarray(model.lower, dtype=np.float64)
    upper = np.asarray(model.upper, dtype=np.float64)
    point = lag.values.copy()
    parts = sorted(lag.open_parts, key=lambda part: len(part.idx))
    fall, more, still = _close_parts(model, lower, upper, parts, point, 0, deadline, lp, exact_mip=True, beside=beside)
    total = lag.bound - lag.slack + fall
    slack = 1e-7 * abs(total)
    return dataclasses.replace(
        lag, bound=total + slack, closed=lag.closed + more, values=point, open_parts=tuple(still),
        slack=slack, seconds=lag.seconds + time.perf_counter() - t0,
    )


class PartsBeside:
    """:func:`solve_open_parts` in a thread of this process, its parts' MIPs in
    :data:`PARTS_PROCESS` (which gives way to every other process), from the Lagrangian
    bound to ``deadline``: the parts are solved on the CPU the neighbourhood searches
    leave, while the planner places their answers, instead of only in the time after
    the last search. The searches do not see it (the point they are guided by stays
    the bound's); :meth:`result` gives its bound at the end.
    """

    def __init__(
        self, model: LinearModel, lag: Lagrangian, deadline: float, lp: LpCapable, after: threading.Event | None = None
    ) -> None:
        self.given = lag
        self.started = time.perf_counter()
        self._stop = threading.Event()
        self._out: Lagrangian | None = None
        self._thread = threading.Thread(target=self._run, args=(model, lag, deadline, lp, after), daemon=True)
        self._thread.start()

    def _run(
        self, model: LinearModel, lag: Lagrangian, deadline: float, lp: LpCapable, after: threading.Event | None
    ) -> None:
        if after is not None:
            # The parts process has other work first (the master's columns).
            after.wait(max(deadline - time.perf_counter(), 0.0))
        with contextlib.suppress(Exception):  # a part that fails keeps the bound it had
            self._out = solve_open_parts(model, lag, deadline, lp, beside=self._stop)

    def result(self, deadline: float) -> Lagrangian:
        """The bound with the parts solved by ``deadline`` (waiting for them until then):
        the given one when none was."""
        self._thread.join(max(deadline - time.perf_counter(), 0.0) + PARTS_GRACE + 0.05)
        if self._thread.is_alive():
            self.stop()
            return self.given
        return self._out or self.given

    def stop(self) -> None:
        """Take no further part. The one being solved ends within its own limit, by
        the deadline at the latest (its process is killed then), at a priority below
        the next epoch's work; killing it now would cost the next epoch a fresh
        process."""
        self._stop.set()


def _close_parts(
    model: LinearModel,
    lower: npt.NDArray[np.float64],
    upper: npt.NDArray[np.float64],
    parts: list[OpenPart],
    point: npt.NDArray[np.float64],
    nodes: int,
    deadline: float,
    lp: LpCapable,
    exact_mip: bool,
    beside: threading.Event | None = None,
) -> tuple[float, int, list[OpenPart]]:
    """Branch ``parts`` again (``nodes`` branchings each), or solve them by the solver's
    MIP (``exact_mip``), in order until ``deadline`` (``lower`` and ``upper``: the whole
    model's variable bounds): how far their bounds fell together, how many closed (their
    optima written into ``point``), and the parts still open with their bounds."""
    fall = 0.0
    closed = 0
    still: list[OpenPart] = []
    for k, part in enumerate(parts):
        if time.perf_counter() >= deadline or (beside is not None and beside.is_set()):
            still += parts[k:]
            break
        best = _branch_part(
            model, part.idx, list(part.rows), part.cost, lower[part.idx], upper[part.idx], nodes, deadline, lp,
            exact_mip, beside is not None,
        )
        if best is None:
            still.append(part)
            continue
        value, exact, solution = best
        known = min(value, part.known)
        fall += known - part.known
        if exact:
            closed += 1
            point[part.idx] = solution
        else:
            still.append(dataclasses.replace(part, known=known))
    return fall, closed, still


def solve_integer(
    lp: LpCapable,
    model: LinearModel,
    objective: npt.NDArray[np.float64],
    time_limit: float,
    start: npt.NDArray[np.int64] | None = None,
) -> IntegerAnswer | None:
    """``model`` (priced by ``objective``) solved as integers by ``lp`` within
    ``time_limit``, from the integer point ``start`` when given."""
    return lp.open_lp(model, objective).run_integer(time_limit, start=start)


def _integer_part(
    lp: LpCapable,
    model: LinearModel,
    objective: npt.NDArray[np.float64],
    time_limit: float,
    deadline: float,
    only_process: bool = False,
) -> IntegerAnswer | None:
    """:func:`solve_integer` in :data:`PARTS_PROCESS`, stopped at ``deadline`` (``None``
    then: the part keeps the bound it had); in this process when that one is not ready
    (not started, still importing, none can start) or ``lp`` cannot be sent there.
    With ``only_process``, never here: it waits for the process to be ready, and
    ``None`` when it is not by the deadline or cannot take the part."""
    if only_process:
        ready = PARTS_PROCESS.wait_ready(deadline - time.perf_counter())
    else:
        ready = PARTS_PROCESS.is_ready()
    if ready:
        try:
            answer: IntegerAnswer | None = PARTS_PROCESS.call(
                solve_integer, (lp, model, objective, time_limit), max(deadline - time.perf_counter(), 0.0)
            )
            return answer
        except SolverDied:
            warm_parts()  # stopped at the deadline: a fresh one for the next epoch
            return None
        except Unavailable:
            pass
    return None if only_process else solve_integer(lp, model, objective, time_limit)


def _branch_part(
    model: LinearModel,
    idx: npt.NDArray[np.int64],
    rows: list[int],
    cost: npt.NDArray[np.float64],
    lower: npt.NDArray[np.float64],
    upper: npt.NDArray[np.float64],
    nodes: int,
    deadline: float,
    lp: LpCapable,
    exact_mip: bool = False,
    only_process: bool = False,
) -> tuple[float, bool, npt.NDArray[np.float64]] | None:
    """Best-first branching on one part's LP: a bound of its maximum, whether it is
    exact, and the values of the last node taken (its optimum when exact). With
    ``exact_mip`` (backends that declare ``integer_parts``) the solver's own MIP instead,
    for at most :data:`PART_MIP_CAP`.

    ``None`` when its root LP finds no optimum in time (the caller keeps the LP value).
    """
    sub = part_model(model, idx, rows)
    if exact_mip:
        # The solver's own MIP: on the benchmark's parts it proves in hundredths of a
        # second what the branching below leaves open after its nodes
        # (docs/formulation-passes.md, *Twelfth pass*).
        limit = min(max(deadline - time.perf_counter(), 0.01), PART_MIP_CAP)
        answer = _integer_part(lp, sub, cost, limit, deadline, only_process)
        if answer is None:
            return None
        point = answer.values if answer.values is not None else np.asarray(sub.lower, dtype=np.float64)
        return answer.bound, answer.exact, point
    session = lp.open_lp(sub, cost)
    every = np.arange(len(idx))

    def solve(lo: npt.NDArray[np.float64], hi: npt.NDArray[np.float64]) -> tuple[float, npt.NDArray[np.float64]] | None:
        session.set_bounds(every, lo, hi)
        if not session.run(max(deadline - time.perf_counter(), 0.01)):
            return None
        return session.objective(), session.values()

    root = solve(lower, upper)
    if root is None:
        return None
    heap: list[tuple[float, int, npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]] = [
        (-root[0], 0, lower, upper, root[1])
    ]
    count = 1
    for _ in range(nodes + 1):
        if not heap:
            return None  # every branch proved empty: keep the LP's value (none expected)
        neg, _, lo, hi, x = heapq.heappop(heap)
        part = x - np.floor(x + 1e-9)
        frac = (part > 1e-6) & (part < 1 - 1e-6)
        if not frac.any():
            return -neg, True, x  # best first: the best open node is integral
        if time.perf_counter() >= deadline:
            return -neg, False, x
        # Branch where rounding moves the priced objective most: the fractional variable
        # of largest |c'| times its distance to the nearer integer (closing more parts in
        # the same time than the one closest to one half: docs/formulation.md).
        cand = np.flatnonzero(frac)
        dist = np.minimum(part[cand], 1 - part[cand])
        j = int(cand[np.argmax(np.abs(cost[cand]) * dist)])
        for side in (0, 1):
            lo2, hi2 = lo.copy(), hi.copy()
            if side:
                lo2[j] = math.ceil(x[j])
            else:
                hi2[j] = math.floor(x[j])
            got = solve(lo2, hi2)
            if got is None:
                if session.infeasible():
                    continue  # no point on this side: the other side holds the part's
                # Not solved in time: the parent's value still bounds both children.
                return -neg, False, x
            heapq.heappush(heap, (-got[0], count, lo2, hi2, got[1]))
            count += 1
    if not heap:
        return None
    return -heap[0][0], False, heap[0][4]
