"""A restricted master over per-project columns: other whole choices for each project,
recombined within the shared capacity.

Once its coupling rows (capacity, whole nodes, node cuts, busy nodes) are priced out,
the epoch's model falls apart into one part per project (:func:`~planner.mip.relax.split_parts`).
A *column* is one integer choice for a whole part: its starts, its running jobs'
slices and its charging. The neighbourhood searches move a few job groups at a time and
end in a local optimum of their own; the *master* instead picks one column per part,
for every part at once, within the coupling rows: a move that re-times and re-pools
dozens of projects together.

Columns come from each part's LP under the LP's prices and under copies of them
perturbed row by row (:data:`PRICE_SPREAD`), dived to an integer point
(:func:`dive`): starts and running slices first, then the charging that follows them.
Each part keeps one LP for all its price vectors: its bounds reset and its prices
changed, each dive starts from the last one's basis.
The dives run in the parts process (which gives way to the searches), in batches, from
a thread of the planner (:class:`ColumnsBeside`), and, until the master, off the same
queue in the planner's own process; the master is a model like any
other, solved by the planner's backend. Every part also gets, for free, its piece of
the Lagrangian bound's point where that is integral (:func:`with_point_columns`): when
the parts process dived alone, many-projects' dives reached only 128-240 of the 364-577
parts in time. Beside the
master, a second master adds columns that
start one more job of a class than the incumbent does (:func:`forced_columns`): the
perturbed prices' dives seldom give those, since each part's LP spreads such a start
over fractions of several. Before both, each part is dived under the master's own LP
prices too (:func:`priced_by_master`): what the other parts' columns leave room for;
then the parts whose dive falls farthest below their LP are solved exactly at those
prices.
In the planner, on six families, seeds 1-24:
better on 112 epochs, worse on 18 (docs/formulation-passes.md, *Twenty-second pass*);
ten price vectors from one LP per part then better on 93, worse on 37 (*Twenty-third*);
the master's prices, five families, seeds 1-24: better on 71, worse on 44
(*Thirty-sixth*); ten parts priced exactly, six families, seeds 1-24: better on 74,
worse on 44 (*Thirty-seventh*).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.mip.backends.base import LpCapable, LpSession
from planner.mip.backends.isolate import SolverDied, Unavailable
from planner.mip.model import LinearModel
from planner.mip.relax import (
    PARTS_PROCESS,
    Parts,
    part_model,
    priced_objective,
    solve_integer,
    warm_parts,
)

#: Price vectors per part: the LP's duals, and this many less one perturbed copies.
#: Offline, from the planner's final incumbents of 10-11 epochs of five families (master
#: 1 s): three gave a median 5.5% of the LP's gap, six 10.1%, ten 13.9%. With one LP per
#: part (:func:`dive_parts`) ten take about the time six took with an LP per vector; in
#: the planner, six families, seeds 1-24: better on 93 epochs, worse on 37 than six
#: (docs/formulation-passes.md, *Twenty-third pass*).
PRICE_VECTORS = 10
#: Each perturbed copy multiplies every coupling row's price by a factor drawn
#: uniformly from [1 - spread, 1 + spread].
PRICE_SPREAD = 0.3
#: A dive fixes this share of the fractional variables at once (the least fractional),
#: one at a time when that proves infeasible.
DIVE_SHARE = 0.25
#: A dive gives up after this many LP solves (with the settled decisions kept, the
#: largest parts take 6-37 solves for three price vectors).
DIVE_STEPS = 400
#: Parts sent to the parts process in one call: a call cut off at the deadline loses
#: only its own.
BATCH_PARTS = 16
#: Rounds of columns priced by the restricted master's own LP (:func:`priced_by_master`).
MASTER_ROUNDS = 2
#: A column priced by the master joins when its reduced cost is above this share of
#: its part's price of a column.
REDUCED_COST = 1e-6
#: Parts priced exactly after the master's dives (:func:`priced_by_master`): those whose
#: dived column falls farthest below their LP's value. Offline, ten (1.6-2.3 s in all)
#: lowered HiGHS's bound on the master's optimum by 0.13-0.51 points on four epochs that
#: miss; two more rounds of dives instead, by 0.00-0.17 (docs/formulation-passes.md,
#: *Thirty-seventh pass*).
EXACT_PARTS = 10
#: Seconds asked of HiGHS for one part's exact pricing (it may run over on parts of a few
#: thousand variables). At 0.1 s the same ten parts lowered the master's bound by only
#: 0.02-0.13 points.
EXACT_CAP = 0.25


def dive(
    session: LpSession,
    lower: npt.NDArray[np.float64],
    upper: npt.NDArray[np.float64],
    first: npt.NDArray[np.bool_],
    deadline: float,
) -> npt.NDArray[np.int64] | None:
    """An integer point of ``session``'s model, near its LP optimum: the least
    fractional variables fixed to their nearest integers, a share at a time, the LP
    solved again after each fixing; the variables in ``first`` (the decisions) before
    the others (what follows them). ``None`` when it runs into an infeasible fixing on
    both sides, out of steps or out of time."""
    lower, upper = lower.copy(), upper.copy()
    if not session.run(max(deadline - time.perf_counter(), 0.01)):
        return None
    x = session.values()
    for _ in range(DIVE_STEPS):
        off = np.abs(x - np.round(x))
        cand = np.flatnonzero(off > 1e-6)
        if not len(cand):
            return np.round(x).astype(np.int64)
        if first[cand].any():
            cand = cand[first[cand]]
            # The decisions the LP has integral stay so: otherwise the LP moves what a
            # fixing takes off one start onto another, one variable per step.
            settled = np.flatnonzero(first & (off <= 1e-6) & (lower < upper))
            if len(settled):
                lower[settled] = upper[settled] = np.round(x[settled])
                session.set_bounds(settled, lower, upper)
        order = cand[np.argsort(off[cand], kind="stable")]
        many = max(1, int(len(cand) * DIVE_SHARE))
        if many > 1:
            fix = order[:many]
            was_lo, was_hi = lower[fix].copy(), upper[fix].copy()
            lower[fix] = upper[fix] = np.round(x[fix])
            session.set_bounds(fix, lower, upper)
            if session.run(max(deadline - time.perf_counter(), 0.01)):
                x = session.values()
                continue
            lower[fix], upper[fix] = was_lo, was_hi
            session.set_bounds(fix, lower, upper)
        j = order[:1]
        near = float(np.round(x[j[0]]))
        other = float(np.floor(x[j[0]]) if near > x[j[0]] else np.ceil(x[j[0]]))
        for value in (near, other):
            lower[j] = upper[j] = value
            session.set_bounds(j, lower, upper)
            if session.run(max(deadline - time.perf_counter(), 0.01)):
                break
        else:
            return None
        if time.perf_counter() >= deadline:
            return None
        x = session.values()
    return None


def dive_parts(
    lp: LpCapable,
    parts: list[LinearModel],
    costs: list[list[npt.NDArray[np.float64]]],
    firsts: list[npt.NDArray[np.bool_]],
    seconds: float,
) -> list[list[npt.NDArray[np.int64]]]:
    """Each part's dived points, one per cost vector (without repeats), within
    ``seconds``: a part not reached keeps none."""
    deadline = time.perf_counter() + seconds
    out: list[list[npt.NDArray[np.int64]]] = []
    for sub, part_costs, first in zip(parts, costs, firsts, strict=True):
        found: list[npt.NDArray[np.int64]] = []
        lower = np.asarray(sub.lower, dtype=np.float64)
        upper = np.asarray(sub.upper, dtype=np.float64)
        every = np.arange(len(lower))
        session: LpSession | None = None
        for cost in part_costs:
            if time.perf_counter() >= deadline:
                break
            if session is None:
                session = lp.open_lp(sub, cost)
            else:
                # One LP per part, its bounds reset and its prices changed: a dive starts
                # from the last one's basis (urgent-heavy seed 1: the columns in 1.3 s, not
                # 2.2 s, with a new LP per price vector).
                session.set_bounds(every, lower, upper)
                session.set_objective(cost)
            point = dive(session, lower, upper, first, deadline)
            if point is not None:
                _add_new(found, point)
        out.append(found)
    return out


def forced_columns(
    model: LinearModel,
    found: ColumnSet,
    cost: npt.NDArray[np.float64],
    forced: list[tuple[int, int]],
    decisions: npt.NDArray[np.bool_],
    lp: LpCapable,
    deadline: float,
) -> ColumnSet:
    """``found`` and, for each ``(variable, at least)`` of ``forced``, its part's LP under
    ``cost`` with the variable held at or above that value, dived (:func:`dive`): a
    column that starts one more job of a class than the incumbent does, which the
    price vectors' dives seldom give (their LPs spread such a start over fractions).
    One LP per part, its bounds reset between forcings; until ``deadline``."""
    parts = found.parts
    columns = {r: list(c) for r, c in found.columns.items()}
    by_part: dict[int, list[tuple[int, int]]] = {}
    for var, least in forced:
        root = int(parts.roots[var])
        if root in parts.rows:
            by_part.setdefault(root, []).append((var, least))
    for root, wanted in by_part.items():
        if time.perf_counter() >= deadline:
            break
        idx = parts.members[root]
        sub = part_model(model, idx, parts.rows[root])
        lower = np.asarray(sub.lower, dtype=np.float64)
        upper = np.asarray(sub.upper, dtype=np.float64)
        every = np.arange(len(lower))
        session = lp.open_lp(sub, cost[idx])
        own = columns.setdefault(root, [])
        for var, least in wanted:
            if time.perf_counter() >= deadline:
                break
            at = int(np.searchsorted(idx, var))
            low = lower.copy()
            low[at] = min(max(float(least), low[at]), upper[at])
            session.set_bounds(every, low, upper)
            point = dive(session, low, upper, decisions[idx], deadline)
            if point is not None:
                _add_new(own, point)
    return ColumnSet(parts, columns, found.seconds)


def with_point_columns(found: ColumnSet, point: npt.NDArray[np.float64]) -> tuple[ColumnSet, int]:
    """``found`` and, for each part where ``point`` is integral, that part of it as one
    more column (when not among the part's columns already); and how many were added.
    With the LP optimum, or the Lagrangian bound's point (each solved part at its
    optimum under the LP's prices), these are the columns the first price vector's dives
    aim at, for every part, not only the parts the dives reached in time."""
    parts = found.parts
    columns = {r: list(c) for r, c in found.columns.items()}
    added = 0
    for root in parts.rows:
        x = point[parts.members[root]]
        near = np.round(x)
        if np.abs(x - near).max(initial=0.0) > 1e-6:
            continue
        added += _add_new(columns.setdefault(root, []), near.astype(np.int64))
    return ColumnSet(parts, columns, found.seconds), added


def _add_new(own: list[npt.NDArray[np.int64]], col: npt.NDArray[np.int64]) -> bool:
    """Append ``col`` to a part's columns ``own`` unless it is among them already;
    True when it was appended."""
    if any(np.array_equal(col, c) for c in own):
        return False
    own.append(col)
    return True


@dataclass
class ColumnSet:
    """Columns of the parts of a model: ``columns[root]`` are integer points of the part
    ``parts.members[root]`` (its variables' values, in that order)."""

    parts: Parts
    columns: dict[int, list[npt.NDArray[np.int64]]]
    seconds: float = 0.0

    @property
    def count(self) -> int:
        return sum(len(c) for c in self.columns.values())


class ColumnsBeside:
    """:func:`dive_parts` over every part of ``model`` (``parts``: its
    :func:`~planner.mip.relax.split_parts` by ``coupling``), from the LP's duals, batch
    by batch from one queue (the parts with most of the LP's objective first): in the
    parts process, from a thread of this process, until ``deadline`` (or :meth:`stop`);
    and in this process too, while the planner waits for the master
    (:meth:`dive_here`). :attr:`done` is set when the thread ends; :meth:`result` gives
    what it has by then."""

    def __init__(
        self,
        model: LinearModel,
        coupling: list[int],
        parts: Parts,
        duals: npt.NDArray[np.float64],
        lp_values: npt.NDArray[np.float64],
        decisions: npt.NDArray[np.bool_],
        lp: LpCapable,
        deadline: float,
    ) -> None:
        self.started = time.perf_counter()
        #: The rows the columns were priced over and the parts split by: the master's.
        self.coupling = coupling
        #: The objective at the LP's prices, the first price vector: what the master's
        #: own columns (:func:`forced_columns`) are dived under too.
        self.prices = priced_objective(model, coupling, duals)[0]
        self.done = threading.Event()
        self._stop = threading.Event()
        self._set = ColumnSet(parts, {})
        self._lock = threading.Lock()
        self._model, self._decisions, self._lp = model, decisions, lp
        #: The queue: the parts in the order they are dived, and where the next batch
        #: starts; the price vectors. Set by the thread before ``_ready``.
        self._order: list[int] = []
        self._taken = 0
        self._vectors: list[npt.NDArray[np.float64]] = []
        self._ready = threading.Event()
        warm_parts()
        self._thread = threading.Thread(target=self._run, args=(duals, lp_values, deadline), daemon=True)
        self._thread.start()

    def _run(self, duals: npt.NDArray[np.float64], lp_values: npt.NDArray[np.float64], deadline: float) -> None:
        model, parts = self._model, self._set.parts
        try:
            # The same perturbations every run: the planner is a pure function.
            rng = np.random.default_rng(0)
            vectors = [self.prices]
            for _ in range(PRICE_VECTORS - 1):
                factor = rng.uniform(1 - PRICE_SPREAD, 1 + PRICE_SPREAD, size=len(duals))
                vectors.append(priced_objective(model, self.coupling, duals * factor)[0])
            objective = model.objective_vector()
            self._vectors = vectors
            self._order = sorted(
                parts.rows, key=lambda r: -abs(float(np.dot(objective[parts.members[r]], lp_values[parts.members[r]])))
            )
            self._ready.set()
            while not self._stop.is_set():
                left = deadline - time.perf_counter()
                if left <= 0 or not PARTS_PROCESS.wait_ready(left):
                    break
                batch = self._take()
                if not batch:
                    break
                left = deadline - time.perf_counter()
                try:
                    got = PARTS_PROCESS.call(dive_parts, (self._lp, *self._inputs(batch), left), left)
                except SolverDied:
                    warm_parts()
                    break
                except Unavailable:
                    break
                self._keep(batch, got)
        except Exception:  # noqa: BLE001 - a failure keeps the columns found so far
            pass
        finally:
            self._set.seconds = time.perf_counter() - self.started
            self._ready.set()
            self.done.set()

    def _take(self) -> list[int]:
        """The next batch of parts off the queue (empty when none is left)."""
        with self._lock:
            batch = self._order[self._taken : self._taken + BATCH_PARTS]
            self._taken += len(batch)
            return batch

    def _inputs(
        self, batch: list[int]
    ) -> tuple[list[LinearModel], list[list[npt.NDArray[np.float64]]], list[npt.NDArray[np.bool_]]]:
        """:func:`dive_parts`'s models, price vectors and first-slice decisions for
        ``batch`` (its LP and time limit are the caller's)."""
        members, rows = self._set.parts.members, self._set.parts.rows
        subs = [part_model(self._model, members[r], rows[r]) for r in batch]
        costs = [[v[members[r]] for v in self._vectors] for r in batch]
        firsts = [self._decisions[members[r]] for r in batch]
        return subs, costs, firsts

    def _keep(self, batch: list[int], got: list[list[npt.NDArray[np.int64]]]) -> None:
        """Each part of ``batch`` gets its dived columns in ``got``."""
        with self._lock:
            for r, found in zip(batch, got, strict=True):
                self._set.columns[r] = found

    def dive_here(self, deadline: float) -> None:
        """Dive batches off the same queue in this process too, until ``deadline`` or
        the queue is empty; then wait for the parts process's batch in flight, at most
        until ``deadline``. The planner does this instead of searching before the master:
        with both processes diving, many-projects' masters (seeds 1-12) had 749-1,838
        columns, 27-366 of them from the bound's point, after 3.1-3.9 s, every part
        covered on 9 of 12; with the parts process alone, 869-1,262 columns, 184-378
        from the point, after 4.2-5.5 s, every part covered on none."""
        self._ready.wait(max(deadline - time.perf_counter(), 0.0))
        while not self._stop.is_set():
            left = deadline - time.perf_counter()
            batch = self._take() if left > 0 else []
            if not batch:
                break
            self._keep(batch, dive_parts(self._lp, *self._inputs(batch), left))
        self.done.wait(max(deadline - time.perf_counter(), 0.0))

    def stop(self) -> None:
        """Send no further batch."""
        self._stop.set()

    def result(self) -> ColumnSet:
        """The columns found so far."""
        with self._lock:
            return ColumnSet(self._set.parts, dict(self._set.columns), time.perf_counter() - self.started)


@dataclass(frozen=True)
class Master:
    """The restricted master of a :class:`ColumnSet` and an incumbent: a model, and how
    to read its answer back as values of the whole model."""

    model: LinearModel
    #: root -> the master's variables choosing each of the part's columns.
    choose: dict[int, list[int]]
    columns: dict[int, list[npt.NDArray[np.int64]]]
    #: (whole model's variable, master's variable) of the variables in no part.
    free: list[tuple[int, int]]
    members: dict[int, npt.NDArray[np.int64]]
    incumbent: npt.NDArray[np.int64]

    def prices(
        self, duals: npt.NDArray[np.float64], coupling: list[int], num_rows: int
    ) -> tuple[npt.NDArray[np.float64], dict[int, float]]:
        """The master's LP ``duals`` read back: the whole model's row prices (its
        ``coupling`` rows', in a model of ``num_rows`` rows; 0 elsewhere) and each
        part's price of choosing a column (its ``one_column`` row)."""
        roots = list(self.choose)
        prices = np.zeros(num_rows, dtype=np.float64)
        prices[np.asarray(coupling, dtype=np.int64)] = duals[len(roots) : len(roots) + len(coupling)]
        return prices, {root: float(duals[k]) for k, root in enumerate(roots)}

    def values(self, answer: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The whole model's values of the master's ``answer``."""
        out = self.incumbent.copy()
        for root, ids in self.choose.items():
            out[self.members[root]] = self.columns[root][int(np.argmax(answer[ids]))]
        for var, mine in self.free:
            out[var] = answer[mine]
        return out


def restricted_master(
    model: LinearModel, coupling: list[int], found: ColumnSet, incumbent: npt.NDArray[np.int64]
) -> Master:
    """One column per part (the incumbent's own first, then ``found``'s), within the
    ``coupling`` rows; the variables in no part free within their bounds. Hinted with
    the incumbent, which it contains."""
    parts = found.parts
    objective = model.objective_vector()
    m = LinearModel()
    choose: dict[int, list[int]] = {}
    columns: dict[int, list[npt.NDArray[np.int64]]] = {}
    hint: dict[int, int] = {}
    for root in parts.rows:
        own = incumbent[parts.members[root]].astype(np.int64)
        cols = [own] + [c for c in found.columns.get(root, []) if not np.array_equal(c, own)]
        ids = [m.add_var(f"column[{root},{k}]", 0, 1) for k in range(len(cols))]
        m.add_constraint([(i, 1) for i in ids], "==", 1, f"one_column[{root}]")
        for i, col in zip(ids, cols, strict=True):
            m.add_objective(i, int(round(float(np.dot(objective[parts.members[root]], col)))))
            hint[i] = 0
        hint[ids[0]] = 1
        choose[root], columns[root] = ids, cols
    free: list[tuple[int, int]] = []
    for root, idx in parts.members.items():
        if root in parts.rows:
            continue
        for var in idx.tolist():
            mine = m.add_var(model.names[var], model.lower[var], model.upper[var])
            if objective[var]:
                m.add_objective(mine, int(objective[var]))
            hint[mine] = int(incumbent[var])
            free.append((var, mine))
    m.objective_offset = model.objective_offset
    _add_coupling(m, model, coupling, parts, choose, columns, free)
    m.hint = hint
    return Master(m, choose, columns, free, parts.members, incumbent.astype(np.int64))


@dataclass(frozen=True)
class Priced:
    """What :func:`priced_by_master` added: the columns, how many its dives gave and how
    many its exact pricing gave (of how many parts it solved)."""

    columns: ColumnSet
    dived: int
    exact: int = 0
    solved: int = 0


def priced_by_master(
    model: LinearModel,
    coupling: list[int],
    found: ColumnSet,
    incumbent: npt.NDArray[np.int64],
    decisions: npt.NDArray[np.bool_],
    lp: LpCapable,
    deadline: float,
    rounds: int = MASTER_ROUNDS,
    exact_until: float | None = None,
    exact_parts: int = EXACT_PARTS,
) -> Priced:
    """``found`` and the columns its restricted master's LP asks for: up to ``rounds``
    times, the master's LP (over the columns so far) is solved, each part's LP is
    dived under the master's prices (the coupling rows' duals), and a dived column
    joins when it is worth more than the part's price of a column (a positive reduced
    cost), until ``deadline``. The prices of the LP's own optimum (the first vector of
    :func:`dive_parts`) lead every part to its own best; the master's lead each part
    to what the others leave room for.

    With ``exact_until`` (and an ``lp`` that solves integer parts), one more round
    until then: each part dived again, and the ``exact_parts`` parts whose dived
    column falls farthest below their LP's value solved as integers too, each for at
    most :data:`EXACT_CAP`: a dive fixes what the LP has nearly integral and can miss
    a part's best choice by much, as it does a small knapsack's."""
    parts = found.parts
    columns = {r: list(c) for r, c in found.columns.items()}
    roots = list(parts.rows)
    subs = [part_model(model, parts.members[r], parts.rows[r]) for r in roots]
    firsts = [decisions[parts.members[r]] for r in roots]
    dived = 0
    for _ in range(rounds):
        asked = _master_prices(model, coupling, ColumnSet(parts, columns), incumbent, lp, deadline)
        if asked is None:
            break
        master, cost, per_column = asked
        got = dive_parts(
            lp,
            subs,
            [[cost[parts.members[r]]] for r in roots],
            firsts,
            deadline - time.perf_counter(),
        )
        before = dived
        for root, points in zip(roots, got, strict=True):
            for point in points:
                dived += _join(
                    columns, master, root, point, cost[parts.members[root]], per_column[root]
                )
        if dived == before:
            break
    if exact_until is None or not lp.capabilities.integer_parts or exact_parts <= 0:
        return Priced(ColumnSet(parts, columns, found.seconds), dived)
    exact = solved = 0
    asked = _master_prices(model, coupling, ColumnSet(parts, columns), incumbent, lp, exact_until)
    if asked is not None:
        master, cost, per_column = asked
        short: list[tuple[float, int]] = []
        for k, root in enumerate(roots):
            if time.perf_counter() >= exact_until:
                break
            own = cost[parts.members[root]]
            value, near = _lp_and_dive(lp, subs[k], own, firsts[k], exact_until)
            if near is not None:
                dived += _join(columns, master, root, near, own, per_column[root])
            best = per_column[root] if near is None else max(per_column[root], float(np.dot(own, near)))
            if value is not None and _above(value, best, per_column[root]):
                short.append((value - best, k))
        for _, k in sorted(short, reverse=True)[:exact_parts]:
            left = exact_until - time.perf_counter()
            if left <= 0:
                break
            root = roots[k]
            own = cost[parts.members[root]]
            answer = solve_integer(lp, subs[k], own, min(EXACT_CAP, left))
            solved += 1
            if answer is not None and answer.values is not None:
                whole = np.round(answer.values).astype(np.int64)
                exact += _join(columns, master, root, whole, own, per_column[root])
    return Priced(ColumnSet(parts, columns, found.seconds), dived, exact, solved)


def _master_prices(
    model: LinearModel,
    coupling: list[int],
    found: ColumnSet,
    incumbent: npt.NDArray[np.int64],
    lp: LpCapable,
    deadline: float,
) -> tuple[Master, npt.NDArray[np.float64], dict[int, float]] | None:
    """The restricted master over ``found``, and its LP's prices: each variable's
    objective less what it uses of the priced coupling rows, and each part's price of
    a column. ``None`` past ``deadline`` or when the LP is not solved by then."""
    if time.perf_counter() >= deadline:
        return None
    master = restricted_master(model, coupling, found, incumbent)
    session = lp.open_lp(master.model)
    if not session.run(max(deadline - time.perf_counter(), 0.01)):
        return None
    prices, per_column = master.prices(session.duals(), coupling, len(model.constraints))
    return master, priced_objective(model, coupling, prices)[0], per_column


def _join(
    columns: dict[int, list[npt.NDArray[np.int64]]],
    master: Master,
    root: int,
    point: npt.NDArray[np.int64],
    cost: npt.NDArray[np.float64],
    per_column: float,
) -> int:
    """1 when ``point`` joins ``root``'s columns: worth more under ``cost`` than the
    part's price of a column, and not among the master's columns or ``columns``."""
    if not _above(float(np.dot(cost, point)), per_column, per_column):
        return 0
    # The master holds the incumbent's own column besides ``columns``.
    if any(np.array_equal(point, c) for c in master.columns[root]):
        return 0
    return int(_add_new(columns.setdefault(root, []), point))


def _above(value: float, than: float, per_column: float) -> bool:
    """Whether ``value`` is above ``than`` by more than :data:`REDUCED_COST` of the
    part's price of a column (``per_column``; at least 1)."""
    return value - than > REDUCED_COST * max(abs(per_column), 1.0)


def _lp_and_dive(
    lp: LpCapable,
    sub: LinearModel,
    cost: npt.NDArray[np.float64],
    first: npt.NDArray[np.bool_],
    deadline: float,
) -> tuple[float | None, npt.NDArray[np.int64] | None]:
    """``sub``'s LP value under ``cost`` and its dived point (:func:`dive`); ``None`` for
    what is not found by ``deadline``."""
    session = lp.open_lp(sub, cost)
    if not session.run(max(deadline - time.perf_counter(), 0.01)):
        return None, None
    value = session.objective()
    lower = np.asarray(sub.lower, dtype=np.float64)
    upper = np.asarray(sub.upper, dtype=np.float64)
    return value, dive(session, lower, upper, first, deadline)


def _add_coupling(
    m: LinearModel,
    model: LinearModel,
    coupling: list[int],
    parts: Parts,
    choose: dict[int, list[int]],
    columns: dict[int, list[npt.NDArray[np.int64]]],
    free: list[tuple[int, int]],
) -> None:
    """``model``'s ``coupling`` rows over the master's variables: a free variable's own
    term, and for each part in the row, each of its columns with what it uses of the
    row (its values dotted with the row's coefficients there), one numpy product per
    part for all rows and columns at once: a loop per row and part took 0.57-0.76 s on
    the masters of many-projects seeds 1-2 and urgent-heavy seed 1 (a quarter of the
    master's 2.1 s on many-projects 1), this 0.09-0.15 s. A row's terms keep the order of its
    variables: the free ones first, then each part's columns where the part first
    appears."""
    rows = [model.constraints[i] for i in coupling]
    if not rows:
        return
    lengths = np.fromiter((len(c.vars) for c in rows), dtype=np.int64, count=len(rows))
    row = np.repeat(np.arange(len(rows)), lengths)
    var = np.concatenate([c.vars for c in rows])
    coef = np.concatenate([c.coefs for c in rows])
    at = np.arange(len(var)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    mine = np.full(model.num_vars, -1, dtype=np.int64)
    for whole, own in free:
        mine[whole] = own
    is_free = mine[var] >= 0
    # Terms as (row, 0 for free / 1 for a part, position, column, master variable, coefficient).
    nil = np.zeros(int(is_free.sum()), dtype=np.int64)
    keys = [np.stack([row[is_free], nil, at[is_free], nil, mine[var[is_free]], coef[is_free]])]
    in_part = np.flatnonzero(~is_free)
    root_of = parts.roots[var[in_part]]
    order = in_part[np.argsort(root_of, kind="stable")]
    bounds = np.flatnonzero(np.diff(parts.roots[var[order]])) + 1
    for group in np.split(order, bounds):
        if not len(group):
            continue
        root = int(parts.roots[var[group[0]]])
        members = parts.members[root]
        table = np.array(columns[root], dtype=np.int64)
        # ``group`` is ascending, so row by row: sum each row's run of terms.
        use = table[:, np.searchsorted(members, var[group])] * coef[group]
        starts = np.flatnonzero(np.diff(row[group], prepend=-1))
        used = np.add.reduceat(use, starts, axis=1)
        col, run = np.nonzero(used)
        first = group[starts[run]]
        ident = np.asarray(choose[root], dtype=np.int64)[col]
        keys.append(np.stack([row[first], np.ones_like(col), at[first], col, ident, used[col, run]]))
    terms = np.concatenate(keys, axis=1)
    terms = terms[:, np.lexsort((terms[3], terms[2], terms[1], terms[0]))]
    cut = np.searchsorted(terms[0], np.arange(len(rows) + 1))
    for k, c in enumerate(rows):
        span = slice(cut[k], cut[k + 1])
        m.add_row(terms[4, span], terms[5, span], c.sense, c.rhs, c.name)
