"""The epoch planner: snapshot -> MIP -> time-slice :class:`~models.Plan`.

:func:`plan_epoch` is the one entry point. Its phases:

1. cut the epoch into slices and classify its jobs (:mod:`planner.mip.epoch`);
2. build the greedy plan (:mod:`planner.mip.greedy`): the fallback and the warm start;
3. build the backend-neutral MIP (:func:`planner.mip.formulation.apply`);
4. solve it with the chosen backend (:mod:`planner.mip.backends`); large epochs first
   solve the LP relaxation with the registry's LP-capable backend, round it, tighten
   its bound (a Lagrangian bound, :mod:`planner.mip.relax`), and let the chosen backend
   improve the incumbent in neighbourhoods where LP and incumbent disagree, until the
   gap or the time limit; ``solver.message`` ends with the phase that ended the search
   and why;
5. read the answer back, place gangs on nodes and fill what is left
   (:func:`planner.mip.formulation.invert`, :mod:`planner.mip.assemble`);
6. say why each waiting job waits (:mod:`planner.mip.explain`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import threading
import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from models import Plan, Snapshot, SolverInfo, SolveStatus
from planner.mip import lanes as lanes_module
from planner.mip.assemble import Board, Run, build_plan, place_runs
from planner.mip.backends import (
    Backend,
    SolveResult,
    available_backends,
    get_backend,
    lp_backend,
)
from planner.mip.backends.base import Concurrent, Laned, LpCapable, LpSession, Prestarting
from planner.mip.branching import Guide, guide_by_gangs, hold, release
from planner.mip.columns import (
    ColumnsBeside,
    Priced,
    forced_columns,
    priced_by_master,
    restricted_master,
    with_point_columns,
)
from planner.mip.decompose import DECOMPOSE_STARTS, estimated_starts, merge, split
from planner.mip.epoch import Epoch, build_epoch
from planner.mip.explain import explain_job, pending_reasons
from planner.mip.formulation import (
    Formulation,
    apply,
    charge_counts,
    hint_from_runs,
    invert,
    round_lp,
    values_of_runs,
    within_classes,
)
from planner.mip.greedy import Greedy, greedy_plan, greedy_runs
from planner.mip.lifted import add_cuts, lifted_work_cuts
from planner.mip.model import Constraint, LinearModel
from planner.mip.relax import (
    Lagrangian,
    Parts,
    PartsBeside,
    lagrangian_bound,
    solve_integer,
    split_parts,
    warm_parts,
)

#: A decomposed epoch has one part per this many start variables (estimated).
PART_STARTS = 150_000
#: Seconds of a decomposed epoch's time limit kept for merging the parts' plans.
MERGE_RESERVE = 1.0
#: Models with more variables than this are solved LP-guided (:func:`_lp_guided`).
LP_GUIDED_VARS = 2000
#: Under this time limit (seconds) smaller models are LP-guided too, and the backend
#: then searches the whole model from the best LP rounding for the time left
#: (:func:`_whole_search`). From the greedy plan, CP-SAT often had no answer in a
#: fraction of a second: in the what-if's quick stage (2 days of ai2-like, 6 runs on 2
#: workers) 74 of 288 plans were the greedy fallback at 0.3 s, 18 at 0.5 s; none is
#: from the rounding.
SHORT_LIMIT = 1.0
#: LP roundings tried (:func:`~planner.mip.formulation.round_lp`: fractional parts from
#: this up are rounded up; above 1, all down), best first. Placed and filled on 3 seeds
#: of every family (docs/formulation-passes.md, fifth pass), of 0.7, 0.6, 0.5 and all down:
#: 0.7 was best on 11 of 21, 0.6 on 7 (gang-heavy seed 2: 4.56% from the LP bound
#: against 5.03%), 0.5 on 2 (many-projects), all down on 1 (type-restricted seed 2:
#: 4.24% against 4.45%), so all down gave way to 0.6: the best of the three is better
#: on 7 snapshots and worse on that one. The first is tried at once, the others only
#: where no Lagrangian rounding follows: where 0.6 or 0.5 beat 0.7, the Lagrangian
#: rounding beat them too (870 runs of the seven families, within the logs' 0.015
#: points; exactly, offline, on 10 epochs of five), and each placement takes 0.1-0.3 s
#: of the searches' time (docs/formulation-passes.md, *Twenty-fourth pass*).
ROUNDINGS = (0.7, 0.6, 0.5)
#: The neighbourhood search stops once its answer is within this fraction of the
#: planner's ``rel_gap`` of the whole model's bound: its answers lose some objective to
#: node placement (0.03-0.3% on the benchmark epochs), so a search that stops as soon as
#: the target is met leaves a placed plan short of it.
SEARCH_TARGET_SHARE = 0.5
#: ... or once it is within this fraction of ``rel_gap`` of its own (the neighbourhood's)
#: bound: nothing much better is left to find there.
SEARCH_GAP_SHARE = 0.125
#: ... but at most this share of what the plan still lacks of ``rel_gap``, and at least
#: :data:`SEARCH_GAP_FLOOR`: near the target the gains a neighbourhood holds are smaller
#: than an eighth of ``rel_gap``, and a search stopped there stops at the incumbent
#: (docs/formulation-passes.md, *Forty-third pass*: 23 runs better, 11 worse of 216).
NEED_SHARE = 0.5
SEARCH_GAP_FLOOR = 1e-4
#: A focus search (:func:`_focus_neighbourhood`) is searched to within this of its own
#: bound: it is proved in 0.1-0.5 s where the other search of its pair runs to its time
#: limit, and the gains it holds (0.02-0.06% of the bound on maintenance seed 3) are
#: below the gap the others stop at, where it stopped at the incumbent
#: (docs/formulation-passes.md, *Forty-fourth pass*).
FOCUS_GAP = SEARCH_GAP_FLOOR
#: No neighbourhood search is started with less time than this left (seconds).
MIN_SEARCH = 1.0
#: Seconds kept for the plan's reasons and objects, per second the greedy plan took.
RESERVE_SHARE = 1.5
#: Seconds kept besides, as a margin (:func:`reserve_seconds`): at most this much, and
#: at most :data:`RESERVE_MARGIN_SHARE` of the limit. A fixed 0.3 s left a 0.5 s plan of
#: ai2-like about 0.1 s for its model and solver: CP-SAT found nothing and 20 of the
#: first day's 24 plans were the greedy fallback, returned after 0.2 s.
RESERVE_MARGIN = 0.3
RESERVE_MARGIN_SHARE = 0.1
#: Every other neighbourhood search frees one pool's decisions when at least this share
#: of the queued jobs may use at most two sub-pools (type-restricted: 81%, the other
#: families 8-26%). Measured offline on type-restricted seed 1, four 2 s searches: 2.86%
#: without, 2.25% with; on cold, where work moves between pools, 1.20% without, 1.80% with.
POOL_SEARCH_SHARE = 0.5
#: Share of the time left that the Lagrangian bound may take.
BOUND_SHARE = 0.25
#: Branchings per project of the Lagrangian bound's second pass, on the projects its
#: first (10 each) left open, where at least 40% of those branched closed (many small
#: projects: many-projects 43-45%, the other families 11-32%). Offline, 2 s: many-projects
#: 0.35, 0.16 and 0.08 points tighter on seeds 1-3; in the planner, two runs of 3 seeds
#: each: median 3.71% and 3.46% without, 3.05% and 3.11% with.
LAGRANGIAN_DEEPER = 40
#: An earlier answer of a neighbourhood search (``earlier_incumbents``) is placed only
#: when the model values it at most this share of the bound below the best placed plan.
#: On all families, 3 seeds each (docs/formulation-passes.md, fifth pass): the earlier answers
#: that won were at most 0.06% of the bound below it, once placed and filled; those
#: 0.1-1.3% below never won, and each placement took 0.1-0.3 s of the searches' time.
EARLIER_SLACK = 0.001
#: Seconds one neighbourhood search may take at most.
SEARCH_CAP = 2.0
#: Job decisions freed by the second neighbourhood; later ones grow by half after a
#: search that finished in under half its time, and shrink by a third otherwise.
NEXT_VARS = 1500

#: Neighbourhoods searched at once by a backend that declares ``concurrent`` (at most
#: its own count): measured with two, on 2 cores (docs/formulation-passes.md, eleventh pass).
SIDE_BY_SIDE = 2

#: Every other neighbourhood search makes room for the project the incumbent leaves
#: shortest of the LP (:func:`_focus_neighbourhood`) when that project's shortfall is
#: at least this share of the gap (bound minus incumbent). Measured on all families, 3
#: seeds each, in one run (docs/formulation-passes.md, third pass): gang-heavy 2.29%, 4.00% to 2.08%,
#: 3.81% (median, worst), type-restricted 2.45%, 3.14% to 2.25%, 2.48%; warm never
#: qualifies; without the share (every other search), warm lost 0.2 points. 0.3 until
#: the *Forty-fourth pass*: since the searches follow the masters, a focus search below
#: it gains more than the disagreement search in its place (0.02-0.06% of the bound each
#: on maintenance seed 3's last incumbent, whose shortest project held 23% of the gap).
FOCUS_SHARE = 0.1

#: Weight of a project's utility at stake in the score of each of its job groups
#: (:func:`_next_neighbourhood`).
STAKE_SHARE = 1.0

#: Share of the LP-guided search's time (from its start) at which the restricted
#: master (:mod:`planner.mip.columns`) runs at the latest, with the columns found by
#: then; earlier when every part has its columns. No search runs before it: until then
#: the planner's own process dives columns beside the parts process
#: (:meth:`~planner.mip.columns.ColumnsBeside.dive_here`).
MASTER_SHARE = 0.6
#: Seconds the restricted master's search may take at most.
MASTER_CAP = 1.5
#: The share of the LP bound the capped charged-slice coefficients must take off for
#: the planner to keep them (:func:`_cap_charges`). Where they take off less, they only
#: move the LP to another vertex of about the same value: on warm (72 seeds) that lost
#: 7 runs within 1%; where they take off more, the bound and the roundings gained.
CAP_GAIN = 2e-4
#: Rounds of lifted capped-work cuts (:func:`_lift_work`): each separates them at the
#: LP's point and solves the LP again from its basis. Kept, like the caps, only where
#: together they take at least :data:`CAP_GAIN` off the bound.
LIFT_ROUNDS = 3
#: For the master beside the first (:func:`_master_search`): columns with one more
#: start of a class the LP starts more of than the incumbent, on this many of its
#: pools (:func:`_one_more_start`), dived for at most :data:`FORCED_SECONDS`.
FORCED_POOLS = 3
FORCED_SECONDS = 1.0
#: Seconds at most for the columns the master's own LP prices (:func:`~planner.mip.columns.priced_by_master`).
MASTER_PRICING = 1.0
#: Seconds at most, after those, for the parts priced exactly at the master's prices
#: (``exact_until`` of :func:`~planner.mip.columns.priced_by_master`).
EXACT_PRICING = 2.5
#: The large gangs' branching ends by this share of the time.
GANG_SHARE = 0.1
#: A gang is held only where its branch's LP lies at least this far below the LP:
#: where the branches nearly tie, holding one lost (*Fortieth pass*).
GANG_DROP = 2e-4
Placed = tuple[list[Run], set[str], Board]


def plan_epoch(
    snapshot: Snapshot,
    *,
    backend: str | Backend = "cpsat",
    time_limit: float = 10.0,
    rel_gap: float = 0.01,
    previous: Plan | None = None,
    decompose: int | None = None,
    lanes: int | None = None,
) -> Plan:
    """Plan the epoch that starts at ``snapshot.now``.

    Parameters
    ----------
    snapshot
        The frozen state to plan from.
    backend
        ``"cpsat"`` (default), ``"pulp"``, or a :class:`Backend` object.
    time_limit
        Seconds for the whole call; model building and placement count against it.
    rel_gap
        Stop once the incumbent is within this fraction of the proven bound.
    previous
        The previous epoch's plan: jobs keep its nodes where they can.
    decompose
        Plan in this many parts of whole clusters (:mod:`planner.mip.decompose`); 0 or 1:
        never; ``None`` (default): when the model would have more than
        :data:`~planner.mip.decompose.DECOMPOSE_STARTS` start variables, into one part
        per :data:`PART_STARTS` of them (at most one per cluster).
    lanes
        How many parts of a decomposed epoch are planned at once, each in its own
        process (:mod:`planner.mip.lanes`); ``None`` (default): one per core; 1: one
        after another. Only for backends that declare ``lanes``.

    Returns
    -------
    Plan
        Never raises for solver trouble: with no incumbent or a solver error it returns
        the greedy plan with ``solver.fallback`` set. ``solver.objective`` is the
        objective of the plan returned (after placement and gap filling), ``bound`` the
        best proven bound and ``gap`` the relative difference.

    Raises
    ------
    KeyError
        When ``backend`` names no known backend.
    """
    t0 = time.perf_counter()
    solver = get_backend(backend) if isinstance(backend, str) else backend
    name = solver.name
    if decompose is None:
        n_starts = estimated_starts(snapshot)
        decompose = math.ceil(n_starts / PART_STARTS) if n_starts > DECOMPOSE_STARTS else 1
    if decompose > 1:
        return _decomposed(snapshot, solver, decompose, time_limit, rel_gap, previous, t0, lanes)
    if solver.capabilities.prestart and isinstance(solver, Prestarting):
        solver.warm()  # the backend's solver process starts while the model is built
    # 1-2. Geometry and the greedy plan.
    epoch = build_epoch(snapshot)
    greedy = greedy_runs(epoch, previous)
    # Reasons and the plan's objects (the LP-guided incumbent is placed already) take
    # less than the greedy's time: keep 1.5 times that of the limit for them, and a
    # margin (:func:`reserve_seconds`). (Three times, before the fill by gain per
    # quantum, which made the greedy slower, left 1-2 s of the 10 s limit unused on the
    # benchmark families.)
    deadline = t0 + time_limit - reserve_seconds(time.perf_counter() - t0, time_limit)
    # 3. The model.
    form = apply(epoch)
    if form.trivial:
        info = SolverInfo(
            backend=name,
            status=SolveStatus.TRIVIAL,
            seconds=time.perf_counter() - t0,
            message="nothing to decide; ended by the model: no job to start or preempt",
        )
        return greedy_plan(epoch, greedy, info)
    t_model = time.perf_counter()
    # 4. Solve.
    note = ""
    placed: Placed | None = None
    try:
        guided = form.model.num_vars > LP_GUIDED_VARS or time_limit < SHORT_LIMIT
        lp = lp_backend() if guided else None
        if lp is not None:
            result, note, placed, ended = _lp_guided(
                form, solver, lp, epoch, greedy, previous, deadline, rel_gap
            )
        else:
            if solver.capabilities.warm_start:
                form.model.hint = hint_from_runs(form, greedy.runs)
            left = max(deadline - time.perf_counter(), 0.01)
            result = solver.solve(form.model, time_limit=left, rel_gap=rel_gap)
            ended = f"{name} on the whole model: {_why(result, rel_gap)}"
    except Exception as exc:  # a backend must not take the planner down
        return _fallback(
            epoch, greedy, name, SolveStatus.ERROR, t0, repr(exc), "the backend raised an error"
        )
    if result.values is None:
        return _fallback(
            epoch, greedy, name, result.status, t0, result.message,
            f"{name} gave no answer ({result.status.value})",
        )
    t_solved = time.perf_counter()
    # 5. Back to the domain: placement and gap filling (already done for the LP-guided
    # incumbent, whose values are those of its placed runs).
    if placed is None:
        ends, starts = invert(form, result.values)
        placed = place_runs(
            epoch, ends, starts, previous, fill=True, counts=charge_counts(form, result.values)
        )
    runs, dropped, board = placed
    final = values_of_runs(form, runs)
    objective = float(form.model.value(final)) if final is not None else result.objective
    # The model charges whole slices as the plan does (charge_runs follows its counts),
    # so the plan's own charging is the objective.
    charged_objective = float(form.model.value(final)) if final is not None else None
    bound = result.bound
    status = result.status
    if bound is not None and objective is not None:
        bound = max(bound, objective)
        if status is SolveStatus.OPTIMAL and objective < bound - 1e-6:
            status = SolveStatus.FEASIBLE  # placement dropped a gang the solver had placed
    gap = (
        max(_below(bound, objective), 0.0)
        if bound is not None and objective is not None
        else None
    )
    t_placed = time.perf_counter()
    # 6. Reasons.
    pending = pending_reasons(epoch, runs, dropped, board)
    t_reasons = time.perf_counter()
    info = SolverInfo(
        backend=name,
        status=status,
        objective=objective,
        bound=bound,
        gap=gap,
        seconds=time.perf_counter() - t0,
        fallback=False,
        charged_objective=charged_objective,
        message=f"{form.model.num_vars} variables, {len(form.model.constraints)} constraints, "
        f"{len(epoch.classes)} job classes; solver {result.seconds:.2f}s ({result.message})"
        + note
        + (f"; {len(dropped)} gang(s) found no hole" if dropped else "")
        + f"; ended by {ended}",
    )
    plan = build_plan(epoch, runs, pending, info)
    # Each phase's duration, so a slow epoch says where its time went.
    t_end = time.perf_counter()
    phases = (
        f"; phases: model {t_model - t0:.2f}s, solve {t_solved - t_model:.2f}s, "
        f"place {t_placed - t_solved:.2f}s, reasons {t_reasons - t_placed:.2f}s, "
        f"plan {t_end - t_reasons:.2f}s"
    )
    solver_info = info.model_copy(
        update={"seconds": t_end - t0, "message": info.message + phases}
    )
    return plan.model_copy(update={"solver": solver_info})


def _below(bound: float, value: float) -> float:
    """How far ``value`` lies below ``bound``, as a share of the bound (of 1 where the
    bound is smaller): the measure of every gap and every bound's fall this module
    reports or compares."""
    return (bound - value) / max(abs(bound), 1.0)


def reserve_seconds(greedy_s: float, time_limit: float) -> float:
    """Seconds of ``time_limit`` kept after the solve for placement, reasons and the
    plan's objects, when the geometry and the greedy plan took ``greedy_s``: a share of
    that (the steps after the solve take less) and a margin that shrinks with short
    limits, so that a short plan still leaves its solver most of its time."""
    return RESERVE_SHARE * greedy_s + min(RESERVE_MARGIN, RESERVE_MARGIN_SHARE * time_limit)


@dataclass
class _Best:
    """The best placed incumbent of the LP-guided search so far."""

    values: npt.NDArray[np.int64] | None = None
    objective: float | None = None
    placed: Placed | None = None
    message: str = "LP rounding"
    #: Seconds the slowest placement took: what placing one more answer costs.
    place_s: float = 0.0
    #: The formulation with the model's own bounds, where the searches hold a gang (plans are checked against it).
    unheld: Formulation | None = None
    #: Every plan placed so far, in the model's variables: each part's piece of one is a column of the master.
    plans: list[npt.NDArray[np.int64]] = dataclasses.field(default_factory=list)

    def unproven(self, since: float) -> SolveResult:
        """This plan as the answer with no bound (the search did not end), timed from
        ``since``."""
        assert self.values is not None and self.objective is not None
        seconds = time.perf_counter() - since
        return SolveResult(SolveStatus.FEASIBLE, self.values, self.objective, None, seconds, self.message)

    def gap(self, bound: float) -> float:
        if self.objective is None:
            return math.inf
        return max(_below(bound, self.objective), 0.0)

    def offer(
        self,
        form: Formulation,
        epoch: Epoch,
        previous: Plan | None,
        values: npt.NDArray[np.int64],
        message: str,
    ) -> bool:
        """Place a model answer, keep it when its placed objective beats the best."""
        started = time.perf_counter()
        ends, starts = invert(form, values)
        trial = place_runs(
            epoch, ends, starts, previous, fill=True, counts=charge_counts(form, values)
        )
        self.place_s = max(self.place_s, time.perf_counter() - started)
        # A plan is checked against the model's own bounds, not the gangs held.
        placed_values = values_of_runs(self.unheld or form, trial[0])
        if placed_values is None:
            return False
        self.plans.append(placed_values)
        obj = float(form.model.value(placed_values))
        if self.objective is not None and obj <= self.objective:
            return False
        self.values, self.objective, self.placed, self.message = placed_values, obj, trial, message
        return True


def _lp_guided(
    form: Formulation,
    solver: Backend,
    lp: LpCapable,
    epoch: Epoch,
    greedy: Greedy,
    previous: Plan | None,
    deadline: float,
    rel_gap: float,
) -> tuple[SolveResult, str, Placed | None, str]:
    """LP rounding, then the backend in neighbourhoods of the incumbent, to the deadline.

    The LP relaxation's optimum (solved by ``lp``, the registry's LP-capable backend) is
    a proven bound. Its roundings (:data:`ROUNDINGS`, :func:`round_lp`), placed and
    gap-filled, are incumbents; the best is kept. With a share of the time left, the
    Lagrangian bound (:func:`~planner.mip.relax.lagrangian_bound`) tightens the bound,
    and its projects' integer choices, rounded, are one more incumbent; the parts it left
    open are solved exactly from then on, beside the searches, in a process that gives
    way to them (:class:`~planner.mip.relax.PartsBeside`), and tighten the bound at the
    end. On a large model, with a backend that searches two models at once, the
    restricted master (:func:`_master_search`) comes next: it recombines whole choices
    of each project (columns, dived in the parts process from the LP's start and in
    this process after the Lagrangian bound). Then, while the
    incumbent is not within ``rel_gap`` of the bound and time is left, ``solver``
    searches neighbourhoods of it: the job classes and running jobs where the LP optimum
    and the incumbent disagree most, counting their projects' utility at stake
    (:func:`_next_neighbourhood`). The greedy plan is the first incumbent, so the
    answer is never worse than it.
    Returns the result, a note for the message, the placed runs of the incumbent, and
    which phase ended the search and why.

    A backend that raises once a plan better than the greedy one is placed leaves that
    plan as the answer (no bound: the search did not end), the error named in the
    message; before that, the error reaches :func:`plan_epoch`, whose fallback is the
    greedy plan flagged.
    """
    t_start = time.perf_counter()
    best = _Best()
    start = values_of_runs(form, greedy.runs)
    if start is not None:
        best.values, best.objective = start, float(form.model.value(start))
        best.placed, best.message = (greedy.runs, set(), greedy.board), "greedy plan"
        best.plans.append(start)
    try:
        return _search_from_lp(form, solver, lp, epoch, previous, deadline, rel_gap, best, start, t_start)
    except Exception as exc:
        if best.placed is None or best.values is None or best.objective is None or best.placed[0] is greedy.runs:
            raise
        return best.unproven(t_start), "", best.placed, f"an error ({exc!r}); the best plan placed before it ({best.message}) is kept"


def _search_from_lp(
    form: Formulation,
    solver: Backend,
    lp: LpCapable,
    epoch: Epoch,
    previous: Plan | None,
    deadline: float,
    rel_gap: float,
    best: _Best,
    start: npt.NDArray[np.int64] | None,
    t_start: float,
) -> tuple[SolveResult, str, Placed | None, str]:
    """The body of :func:`_lp_guided`, from its incumbent ``best`` (the greedy plan's
    values ``start``, or none) on; ``best`` holds the best placed plan as it goes."""
    ended = ""
    # 1. The LP relaxation: its optimum is the bound; it may take the whole time limit
    # (its bound is worth having even with no time left to round it).
    session = lp.open_lp(form.model)
    lp_ok = session.run(deadline - time.perf_counter())
    if not lp_ok:
        left = max(deadline - time.perf_counter(), 0.01)
        if left < MIN_SEARCH and best.values is not None and best.objective is not None:
            # The LP took the time: a backend started now on the whole model would only
            # overrun the limit (building its model alone takes longer); keep the greedy.
            why = f"LP: no LP optimum from {lp.name} within the time limit; the greedy plan is kept"
            return best.unproven(t_start), "", best.placed, why
        if solver.capabilities.warm_start and start is not None:
            form.model.hint = {i: int(v) for i, v in enumerate(start)}
        whole = solver.solve(form.model, time_limit=left, rel_gap=rel_gap)
        why = f"{solver.name} on the whole model, no LP optimum from {lp.name}: {_why(whole, rel_gap)}"
        if whole.values is not None or best.values is None or best.objective is None:
            return whole, "", None, why
        # No answer from the backend either: the greedy plan, unflagged, with no bound.
        return best.unproven(t_start), "", best.placed, why + "; the greedy plan is kept"
    bound = session.objective()
    lp_values = session.values()
    duals = session.duals()
    lp_notes = ""
    if form.charge_caps:
        bound, lp_values, duals, lp_notes = _cap_charges(form, session, bound, lp_values, duals, deadline)
    if form.work_rows:
        bound, lp_values, duals, lift_note = _lift_work(form, session, bound, lp_values, duals, deadline)
        lp_notes += lift_note
    # The large gang the LP splits most, held in the branch whose LP is highest: that
    # LP guides the roundings, columns and searches, and the columns, masters and
    # searches keep the hold while the incumbent does. The bound's side (Lagrangian
    # bound, its exact parts) and the plans accepted keep the model's own bounds. The
    # branches cover every integer plan, so the highest of their LPs is a bound too.
    guide_values, guide_duals = lp_values, duals
    unheld = form.model
    lp_bound = bound
    guide: Guide | None = None
    if form.model.num_vars > LP_GUIDED_VARS:
        guide, bound, held_note = _hold_gang(
            form, session, bound, lp_values, duals, time.perf_counter() + GANG_SHARE * (deadline - time.perf_counter())
        )
        lp_notes += held_note
        if guide is not None:
            guide_values, guide_duals = guide.values, guide.duals
            best.unheld = form
            form = dataclasses.replace(form, model=hold(unheld, guide))
    lp_s = time.perf_counter() - t_start
    # Columns for the restricted master, found in the parts process until the master,
    # on the core the Lagrangian bound leaves idle. Not in a lane of a decomposed epoch
    # (a backend that searches one model at a time): the other lanes hold the other
    # cores (scale, 2 seeds: 22.6 s to 27.1 s, the gap 0.46% to 0.48%, with columns).
    master_at = t_start + MASTER_SHARE * (deadline - t_start)
    columns: ColumnsBeside | None = None
    coupling = form.coupling_rows()
    parts: Parts | None = None  # split once, for the columns and the Lagrangian bound
    side_by_side = isinstance(solver, Concurrent) and solver.capabilities.concurrent > 1
    if side_by_side and form.model.num_vars > LP_GUIDED_VARS and master_at - time.perf_counter() > MIN_SEARCH:
        parts = split_parts(form.model, coupling)
        columns = ColumnsBeside(
            form.model, coupling, parts, guide_duals, guide_values, form.decisions(), lp, master_at
        )
    # 2. Roundings of the LP optimum, each placed and filled (the fill takes what
    # rounding down left free, by gain per quantum); the best becomes the incumbent.
    # The first now; the others only where no Lagrangian rounding follows (ROUNDINGS).
    rounded: list[str] = []

    def round_with(ups: tuple[float, ...]) -> None:
        for up in ups:
            if best.gap(bound) <= rel_gap:
                break
            if rounded and time.perf_counter() + best.place_s + MIN_SEARCH > deadline:
                break
            label = f"LP rounded up from {up:.2f}" if up <= 1 else "LP rounded down"
            best.offer(form, epoch, previous, round_lp(form, guide_values, up), label)
            rounded.append(f"{label.removeprefix('LP ')}: gap {best.gap(bound):.2%}")

    round_with(ROUNDINGS[:1])
    # 3. A tighter bound: the LP's duals price the rows shared between projects, and
    # each project's own problem is branched (relax.lagrangian_bound).
    left = deadline - time.perf_counter()
    lag: Lagrangian | None = None
    beside: PartsBeside | None = None
    lag_note = lag_rounded = ""
    if best.gap(bound) > rel_gap and left > 2 * MIN_SEARCH:
        if lp.capabilities.integer_parts:
            # Its open parts are solved exactly beside the searches, in a process of
            # their own that gives way to them and is stopped at the deadline: it
            # starts on the core this bound leaves idle.
            warm_parts()
        lag = lagrangian_bound(
            unheld,
            coupling,
            lp_values,
            duals,
            time.perf_counter() + BOUND_SHARE * left,
            lp,
            deeper=LAGRANGIAN_DEEPER,
            parts=parts,
        )
        lag_note = (
            f"; Lagrangian bound {_below(lp_bound, lag.bound):.2%} below the LP's "
            f"({lag.branched} of {lag.parts} fractional projects branched, {lag.closed} "
            f"solved) in {lag.seconds:.2f}s"
        )
        bound = min(bound, lag.bound)
        if lp.capabilities.integer_parts and lag.open_parts:
            # Its open parts are solved exactly from now on, beside the searches.
            beside = PartsBeside(unheld, lag, deadline, lp, after=None if columns is None else columns.done)
        if lag.closed and best.gap(bound) > rel_gap:
            # Each solved project's choice under the LP's prices, rounded and placed.
            best.offer(form, epoch, previous, round_lp(form, lag.values, ROUNDINGS[0]), "Lagrangian rounding")
            lag_rounded = f"; Lagrangian rounding: gap {best.gap(bound):.2%}"
    if not lag_rounded:
        round_with(ROUNDINGS[1:])
    note = f"; LP ({lp.name}) in {lp_s:.2f}s{lp_notes}; roundings: {'; '.join(rounded)}{lag_note}{lag_rounded}"
    if best.gap(bound) <= rel_gap:
        ended = f"LP rounding: gap {best.gap(bound):.2%} within the target {rel_gap:.2%}"
    caps = solver.capabilities
    # Where most queued jobs may use at most two pools, every other search frees one
    # pool's decisions (see _next_neighbourhood).
    queued = sum(len(c.jobs) for c in epoch.classes)
    narrow = sum(len(c.jobs) for c in epoch.classes if len(c.pools) <= 2)
    restricted = queued > 0 and narrow >= POOL_SEARCH_SHARE * queued
    searches: list[str] = []
    freed: dict[int, int] = {}  # group index -> times freed in a finished search
    focused: dict[str, int] = {}  # project -> times a focus neighbourhood made room for it
    size = 0
    round_ = 0
    if not ended and form.model.num_vars <= LP_GUIDED_VARS:
        # A small model under a short limit (plan_epoch): searched whole instead.
        bound, ended = _whole_search(form, solver, epoch, previous, best, bound, deadline, rel_gap)
    concurrent = min(caps.concurrent, SIDE_BY_SIDE) if isinstance(solver, Concurrent) else 0
    while not ended:
        left = deadline - time.perf_counter()
        if left < MIN_SEARCH:
            ended = (
                f"{'neighbourhood search ' + str(round_) if round_ else 'LP rounding'}: "
                f"{left:.2f}s left, below the {MIN_SEARCH:.1f}s a search needs; gap {best.gap(bound):.2%}"
            )
            break
        assert best.values is not None
        if guide is not None and guide.bounds and release(form.model, unheld, guide, best.values):
            note += "; the held gang let go: the incumbent moved it"
        if columns is not None:
            # No search before the master: until it, this process dives columns too.
            columns.dive_here(master_at)
            searches.append(
                _master_search(
                    form, solver, columns, guide_values, lp, epoch, previous, best, bound, deadline, rel_gap,
                    point=guide_values if lag is None else lag.values,
                )
            )
            columns = None
            round_ += 1
            if best.gap(bound) <= rel_gap:
                ended = f"restricted master: gap {best.gap(bound):.2%} within the target {rel_gap:.2%}"
            continue
        # A backend that searches two models at once (one worker each) gets two
        # neighbourhoods side by side, the second chosen as if the first had been
        # searched (its groups count as freed once more).
        picks: list[Pick] = []
        seen = dict(freed)
        for _ in range(max(concurrent, 1)):
            picks.append(
                _pick_neighbourhood(form, guide_values, lag, best, bound, seen, focused, size, round_, restricted)
            )
            round_ += 1
            for g in picks[-1].chosen:
                seen[g] = seen.get(g, 0) + 1
        searched = []
        for pick in picks:
            sub = pick.model
            if caps.stop_at_bound:
                sub.stop_at = _stop_at(bound, rel_gap)
            small, keep, full = sub.restrict(sub.lower, sub.upper)
            if not caps.takes_hint:
                small.hint = {}
            searched.append((small, keep, full))
        # Each search may take half the time left, at most SEARCH_CAP: several short
        # searches over different neighbourhoods gain more than one long one (measured
        # on cold: four 2-second searches from 2.37% to 1.23%).
        budget = left - 0.5 if left < 3 * MIN_SEARCH else min(max((left - 0.5) / 2, MIN_SEARCH), SEARCH_CAP)
        started = time.perf_counter()
        smalls = [small for small, _, _ in searched]
        gap_share = _search_gap(best.gap(bound), rel_gap)
        gaps = [FOCUS_GAP if pick.focus else gap_share for pick in picks]
        if len(smalls) > 1:
            assert isinstance(solver, Concurrent)
            founds = solver.solve_many(smalls, time_limit=budget, rel_gap=gaps)
        else:
            founds = [solver.solve(smalls[0], time_limit=budget, rel_gap=gaps[0])]
        spent = time.perf_counter() - started
        before = best.values
        failed = None
        whys = []
        for n, ((small, keep, full), found, pick) in enumerate(zip(searched, founds, picks, strict=True)):
            why = _why_search(found, small, gaps[n])
            whys.append(why)
            answers = [] if found.values is None else [found.values, *found.earlier]
            # The second of a pair was searched from the same incumbent as the first:
            # its changes go onto what the first left (best), and alone when that loses.
            onto = best.values if n and best.values is not before else None
            tried, skipped = _offer_answers(form, epoch, previous, best, bound, deadline, full, keep, answers, found.message, onto)
            searches.append(
                f"{round_ - len(picks) + n + 1}: {small.num_vars} variables ({pick.kind}) in "
                + (f"{found.seconds:.2f}s (side by side)" if len(picks) > 1 else f"{spent:.2f}s")
                + f", {why}"
                + (f", {tried} answers placed" if tried > 1 else "")
                + (f", {skipped} earlier too far below to place" if skipped else "")
                + f", gap {best.gap(bound):.2%}"
            )
            for g in pick.chosen:
                freed[g] = freed.get(g, 0) + 1
            if found.values is None:
                note += f"; {small.num_vars} variables searched by {solver.name} without an answer ({found.status.value}: {found.message})"
                if found.status is SolveStatus.ERROR:
                    failed = found
        why = "; ".join(dict.fromkeys(whys))
        if failed is not None:
            ended = f"neighbourhood search {round_}: {solver.name} failed ({failed.message}); gap {best.gap(bound):.2%}"
            break
        if best.gap(bound) <= rel_gap:
            ended = f"neighbourhood search {round_}: {why}; gap {best.gap(bound):.2%} within the target {rel_gap:.2%}"
            break
        # Size the next neighbourhood by how this one went: one searched to its end
        # well within its time can be larger, one cut off by the time limit smaller.
        grown = size or NEXT_VARS
        size = int(grown * 1.5) if spent < 0.5 * budget else max(int(grown / 1.5), 200)
        if time.perf_counter() + MIN_SEARCH > deadline:
            ended = f"neighbourhood search {round_}: {why}; time limit, gap {best.gap(bound):.2%} above the target {rel_gap:.2%}"
    if columns is not None:
        columns.stop()
    if beside is not None:
        if best.gap(bound) > rel_gap:
            # Too little time for another search: the open parts solved beside the
            # searches, and in what is left, tighten the bound.
            bound, said = _tighten(beside, bound, deadline)
            note += said
            ended += (
                f"; then the Lagrangian parts solved exactly beside the searches and in the time left: "
                f"gap {best.gap(bound):.2%}"
            )
        else:
            beside.stop()
    if searches:
        note += f"; searches by {solver.name}: " + "; ".join(searches)
    if best.values is None or best.objective is None:
        seconds = time.perf_counter() - t_start
        return (
            SolveResult(SolveStatus.NO_SOLUTION, None, None, None, seconds, "no incumbent"),
            note,
            None,
            ended,
        )
    bound = max(bound, best.objective)
    status = SolveStatus.OPTIMAL if bound - best.objective <= 1e-6 else SolveStatus.FEASIBLE
    seconds = time.perf_counter() - t_start
    return (
        SolveResult(status, best.values, best.objective, bound, seconds, best.message),
        note,
        best.placed,
        ended,
    )


def _cap_charges(
    form: Formulation,
    session: LpSession,
    bound: float,
    values: npt.NDArray[np.float64],
    duals: npt.NDArray[np.float64],
    deadline: float,
) -> tuple[float, npt.NDArray[np.float64], npt.NDArray[np.float64], str]:
    """The LP again, from its last basis, with the capped ``charged_slices``
    coefficients (:attr:`~planner.mip.formulation.Formulation.charge_caps`). Where they
    lower its bound by at least :data:`CAP_GAIN`, the model takes them too and the new
    optimum guides the rest; elsewhere the first optimum stays, and the session and
    model keep their coefficients. Returns the bound, the LP point, its duals and a
    note for the message."""
    rows, idx, loose, capped = (np.array(t, dtype=np.int64) for t in zip(*form.charge_caps, strict=True))
    session.set_coefs(rows, idx, capped)
    if session.run(deadline - time.perf_counter()):
        lower = session.objective()
        fall = _below(bound, lower)
        if fall >= CAP_GAIN:
            form.cap_charges()
            return lower, session.values(), session.duals(), f"; charged-slice caps: the LP {fall:.3%} lower, kept"
        note = f"; charged-slice caps: the LP {max(fall, 0.0):.3%} lower, not kept"
    else:
        note = "; charged-slice caps: the LP not solved again in time, not kept"
    session.set_coefs(rows, idx, loose)
    return bound, values, duals, note


def _lift_work(
    form: Formulation,
    session: LpSession,
    bound: float,
    values: npt.NDArray[np.float64],
    duals: npt.NDArray[np.float64],
    deadline: float,
) -> tuple[float, npt.NDArray[np.float64], npt.NDArray[np.float64], str]:
    """The LP again, from its last basis, with the capped-work rows lifted where
    they cut its optimum off (:func:`~planner.mip.lifted.lifted_work_cuts`), for up
    to :data:`LIFT_ROUNDS` rounds. Where together they lower its bound by at least
    :data:`CAP_GAIN`, the model takes them too and the new optimum guides the rest;
    elsewhere the session drops them and the optimum before them stays. Returns the
    bound, the LP point, its duals and a note for the message."""
    first = len(form.model.constraints)
    cuts: list[Constraint] = []
    point, lower, new_duals = values, bound, duals
    rounds = 0
    for _ in range(LIFT_ROUNDS):
        if deadline - time.perf_counter() < MIN_SEARCH:
            break
        found = lifted_work_cuts(form, point)
        if not found:
            break
        session.add_rows(found)
        cuts += found
        rounds += 1
        if not session.run(deadline - time.perf_counter()):
            session.drop_rows(first)
            return bound, values, duals, "; lifted work cuts: the LP not solved again in time, not kept"
        point, lower, new_duals = session.values(), session.objective(), session.duals()
    if not cuts:
        return bound, values, duals, ""
    fall = _below(bound, lower)
    where = f"{len(cuts)} in {rounds} round{'s' if rounds > 1 else ''}, the LP {max(fall, 0.0):.3%} lower"
    if fall >= CAP_GAIN:
        add_cuts(form.model, cuts)
        return lower, point, new_duals, f"; lifted work cuts: {where}, kept"
    session.drop_rows(first)
    return bound, values, duals, f"; lifted work cuts: {where}, not kept"


def _one_more_start(
    form: Formulation, lp_values: npt.NDArray[np.float64], incumbent: npt.NDArray[np.int64]
) -> list[tuple[int, int]]:
    """For each job class the LP starts more of than the incumbent (with a member
    left to start), its first-slice start on each of the :data:`FORCED_POOLS` pools
    where the LP starts most of it, at one more than the incumbent's."""
    table = form.start_table()
    out: list[tuple[int, int]] = []
    for rows in form.class_starts():
        cls = form.epoch.classes[int(table.cls[rows[0]])]
        lp_starts = float(lp_values[table.var[rows]].sum())
        started = int(incumbent[table.var[rows]].sum())
        if lp_starts <= started + 0.05 or started >= len(cls.jobs):
            continue
        mass: dict[int, float] = {}
        first: dict[int, int] = {}
        for i in rows.tolist():
            pool, var = int(table.pool[i]), int(table.var[i])
            mass[pool] = mass.get(pool, 0.0) + float(lp_values[var])
            if table.start[i] == 0:
                first[pool] = var
        for pool in sorted(mass, key=lambda p: (-mass[p], p))[:FORCED_POOLS]:
            if pool in first:
                out.append((first[pool], int(incumbent[first[pool]]) + 1))
    return out


def _master_search(
    form: Formulation,
    solver: Backend,
    columns: ColumnsBeside,
    lp_values: npt.NDArray[np.float64],
    lp: LpCapable,
    epoch: Epoch,
    previous: Plan | None,
    best: _Best,
    bound: float,
    deadline: float,
    rel_gap: float,
    point: npt.NDArray[np.float64],
) -> str:
    """The restricted master over the columns found so far and the incumbent's own
    (:func:`~planner.mip.columns.restricted_master`), searched by ``solver`` for at most
    :data:`MASTER_CAP`; its answer placed and kept when better. A backend that searches
    two models at once gets a second master beside it, over those columns and the ones
    that start one more job of a class the incumbent starts less of than the LP
    (:func:`_one_more_start`, dived under the columns' prices): each master
    finds plans the other misses. Where ``lp`` solves integer programs, the second
    master (the larger) is its MIP's, from the incumbent, in this process
    (:func:`_lp_beside`), while ``solver`` searches the first: HiGHS and CP-SAT find
    different plans of the same master, HiGHS the better on most. ``point`` (the
    Lagrangian bound's, or the LP's) gives every part where it is integral one more column
    (:func:`~planner.mip.columns.with_point_columns`). Returns the search's line for
    the message."""
    assert best.values is not None
    columns.stop()
    dived = columns.result()
    # Each part's integral piece of ``point`` (the LP's or the Lagrangian bound's) too.
    dived, from_point = with_point_columns(dived, point)
    # And each part's piece of every plan placed so far: each keeps every row of the
    # model, so its pieces fit beside one another as placed (docs/formulation-passes.md,
    # *Forty-fifth pass*).
    from_plans = 0
    for plan in best.plans:
        dived, added = with_point_columns(dived, plan.astype(np.float64))
        from_plans += added
    if not dived.columns:
        return "restricted master: no columns found in time"
    caps = solver.capabilities
    pricing_from = time.perf_counter()
    priced = Priced(dived, 0)
    after = FORCED_SECONDS + MASTER_CAP + 0.5
    if deadline - pricing_from >= MASTER_PRICING + after:
        exact = deadline - pricing_from >= MASTER_PRICING + EXACT_PRICING + after
        priced = priced_by_master(
            form.model, columns.coupling, dived, best.values, form.decisions(), lp, pricing_from + MASTER_PRICING,
            exact_until=pricing_from + MASTER_PRICING + EXACT_PRICING if exact else None,
        )
        dived = priced.columns
    pricing_s = time.perf_counter() - pricing_from
    # The second master only where its columns leave the first its whole time.
    pair = (
        isinstance(solver, Concurrent)
        and caps.concurrent > 1
        and deadline - time.perf_counter() >= FORCED_SECONDS + MASTER_CAP + 0.5
    )
    forcing = time.perf_counter()
    sets = [dived]
    if pair:
        wanted = _one_more_start(form, lp_values, best.values)
        more = forced_columns(
            form.model, dived, columns.prices, wanted, form.decisions(), lp, forcing + FORCED_SECONDS
        )
        if more.count > dived.count:
            sets.append(more)
    forced_s = time.perf_counter() - forcing
    masters = [restricted_master(form.model, columns.coupling, found, best.values) for found in sets]
    by_lp = len(masters) > 1 and lp.capabilities.integer_parts
    # The second master's start for the LP backend's MIP (before a hint-less backend drops it).
    larger = masters[-1].model
    start = np.array([larger.hint.get(i, 0) for i in range(larger.num_vars)], dtype=np.int64) if by_lp else None
    for master in masters:
        if not caps.takes_hint:
            master.model.hint = {}
        if caps.stop_at_bound:
            master.model.stop_at = _stop_at(bound, rel_gap)
    left = deadline - time.perf_counter()
    limit = max(min(MASTER_CAP, left - 0.5), 0.1)
    gap_share = SEARCH_GAP_SHARE * rel_gap
    started = time.perf_counter()
    if start is not None:
        # Each solver finds what the other misses (docs/formulation-passes.md,
        # *Thirty-eighth pass*); the LP backend's MIP, here, finds more on most masters,
        # so it takes the one with more columns (*Forty-fifth pass*).
        assert isinstance(solver, Concurrent)
        on_larger, on_first = _lp_beside(solver, lp, larger, start, masters[0].model, limit, gap_share)
        answers = [on_first, on_larger]
    elif len(masters) > 1:
        assert isinstance(solver, Concurrent)
        answers = solver.solve_many([m.model for m in masters], time_limit=limit, rel_gap=gap_share)
    else:
        answers = [solver.solve(masters[0].model, time_limit=limit, rel_gap=gap_share)]
    spent = time.perf_counter() - started
    for master, answer in zip(masters, answers, strict=True):
        if answer.values is not None:
            best.offer(form, epoch, previous, master.values(answer.values), "restricted master")
    # Then their earlier answers (CP-SAT keeps its last few), near the best placed plan
    # as the model counts them (_worth_placing): placement and fill lose unevenly what
    # the model counts, so an earlier answer may place better than the last
    # (docs/formulation-passes.md, *Forty-second pass*).
    earlier = 0
    for master, answer in zip(masters, answers, strict=True):
        for values in answer.earlier:
            if time.perf_counter() + best.place_s > deadline:
                break
            whole = master.values(values)
            if _worth_placing(float(form.model.value(whole)), best.objective, bound):
                earlier += 1
                best.offer(form, epoch, previous, whole, "restricted master, an earlier answer")
    whys = "; ".join(
        dict.fromkeys(_why_search(answer, master.model, gap_share) for master, answer in zip(masters, answers, strict=True))
    )
    beside = ""
    if len(sets) > 1:
        beside = (
            f", beside it {masters[1].model.num_vars} with {sets[1].count - dived.count} columns "
            f"that start one more job ({forced_s:.2f}s)"
            + (f", searched by {lp.name}'s MIP" if by_lp else "")
        )
    return (
        f"restricted master: {dived.count} columns ({from_point} from the bound's point, "
        f"{from_plans} from the plans placed, "
        f"{priced.dived + priced.exact} priced by its LP in {pricing_s:.2f}s"
        + (f", {priced.exact} of them exact from {priced.solved} parts" if priced.solved else "")
        + ") of "
        f"{len(dived.columns)} of {len(dived.parts.rows)} parts "
        f"in {dived.seconds:.2f}s, {masters[0].model.num_vars} variables{beside} in {spent:.2f}s, "
        f"{whys}"
        + (f", {earlier} earlier {'answer' if earlier == 1 else 'answers'} placed" if earlier else "")
        + f", gap {best.gap(bound):.2%}"
    )


def _lp_beside(
    solver: Concurrent,
    lp: LpCapable,
    mine: LinearModel,
    start: npt.NDArray[np.int64],
    theirs: LinearModel,
    limit: float,
    rel_gap: float,
) -> list[SolveResult]:
    """``mine`` solved as integers by ``lp``'s own MIP from ``start`` here, while
    ``solver`` searches ``theirs`` beside it, both within ``limit``; their answers in
    that order."""
    out: list[SolveResult] = []
    thread = threading.Thread(
        target=lambda: out.extend(solver.solve_many([theirs], time_limit=limit, rel_gap=rel_gap)), daemon=True
    )
    started = time.perf_counter()
    thread.start()
    left = max(limit - (time.perf_counter() - started), 0.01)
    answer = solve_integer(lp, mine, mine.objective_vector(), left, start=start)
    seconds = time.perf_counter() - started
    here = SolveResult(SolveStatus.NO_SOLUTION, None, None, None, seconds, f"{lp.name}: no integer point")
    if answer is not None and answer.values is not None:
        values = np.round(answer.values).astype(np.int64)
        status = SolveStatus.OPTIMAL if answer.exact else SolveStatus.FEASIBLE
        here = SolveResult(status, values, float(mine.value(values)), answer.bound, seconds, lp.name)
    thread.join(max(limit - (time.perf_counter() - started), 0.0) + 30.0)
    there = out[0] if out else SolveResult(SolveStatus.ERROR, None, None, None, seconds, "no answer")
    return [here, there]


def _hold_gang(
    form: Formulation,
    session: LpSession,
    bound: float,
    values: npt.NDArray[np.float64],
    duals: npt.NDArray[np.float64],
    deadline: float,
) -> tuple[Guide | None, float, str]:
    """The large gang the LP splits most, in its best LP branch
    (:func:`~planner.mip.branching.guide_by_gangs`), where that branch's LP lies at
    least :data:`GANG_DROP` below the LP; else ``None``: where the branches nearly tie,
    holding one lost (*Fortieth pass*). The bound, lowered to the highest of the
    branches' LPs where every branch was solved (they cover every integer plan). And
    the message's entry."""
    guide = guide_by_gangs(form, session, values, duals, bound, deadline)
    tighter = bound if guide.bound is None else min(bound, guide.bound)
    note = ""
    if tighter < bound:
        note = f"; the large gang's branches: the bound {_below(bound, tighter):.3%} lower"
    if not guide.held:
        return None, tighter, note
    said = []
    for c, where in guide.held:
        cls = form.epoch.classes[c]
        at = "off the starts the LP gave it" if where is None else f"in pool {where[0]} from slice {where[1]}"
        said.append(f"the {cls.gpus}-GPU gang of {cls.project} {at}")
    drop = max(_below(bound, guide.objective), 0.0)
    kept = drop >= GANG_DROP
    note = (
        f"; large gang {'held' if kept else 'not held'}: {', '.join(said)} ({guide.lps} LPs in "
        f"{guide.seconds:.2f}s, the LP {drop:.3%} lower{'' if kept else f', under {GANG_DROP:.2%}'})"
    ) + note
    return (guide if kept else None), tighter, note


def _tighten(beside: PartsBeside, bound: float, deadline: float) -> tuple[float, str]:
    """The bound with the open parts :class:`~planner.mip.relax.PartsBeside` solved
    exactly by ``deadline`` (beside the searches, then in the time left), and a note
    for the message."""
    lag = beside.result(deadline)
    before = len(beside.given.open_parts)
    tighter = min(bound, lag.bound)
    said = (
        f"; {before - len(lag.open_parts)} of {before} open Lagrangian parts solved exactly "
        f"in {time.perf_counter() - beside.started:.2f}s beside the searches, the bound "
        f"{_below(bound, tighter):.2%} lower"
    )
    return tighter, said


def _guide(
    lp_values: npt.NDArray[np.float64],
    lag: Lagrangian | None,
    round_: int,
    focus: bool = False,
    restricted: bool = False,
) -> npt.NDArray[np.float64]:
    """The point search ``round_`` measures the incumbent against: the LP optimum, or
    the Lagrangian point, each project's part at its integer optimum under the LP's
    prices where it was solved. The LP spreads a project's work over fractions of many
    jobs; the solved projects' choices are whole jobs (docs/formulation-passes.md,
    fifteenth and sixteenth passes).

    Every other pair is guided by the Lagrangian point: its first search
    (``round_ % 4 == 2``), and its second when that is a ``focus`` search, except where
    most jobs may use at most two pools (``restricted``: there it lost, 33 seeds worse
    and 16 better).
    """
    if lag is None or not lag.closed:
        return lp_values
    if round_ % 4 == 2 or (round_ % 4 == 3 and focus and not restricted):
        return lag.values
    return lp_values


class Pick(NamedTuple):
    """A neighbourhood to search (:func:`_pick_neighbourhood`)."""

    model: LinearModel
    #: The job groups it frees (none for a focus search, which frees by project and pool).
    chosen: list[int]
    #: What it is, in words, for the message.
    kind: str
    #: Whether it makes room for a project (:func:`_focus_neighbourhood`).
    focus: bool


def _pick_neighbourhood(
    form: Formulation,
    lp_values: npt.NDArray[np.float64],
    lag: Lagrangian | None,
    best: _Best,
    bound: float,
    freed: dict[int, int],
    focused: dict[str, int],
    size: int,
    round_: int,
    restricted: bool,
) -> Pick:
    """The neighbourhood of search ``round_`` (counting from 0), the job groups it frees,
    what it is, in words, and whether it is a focus search.

    Every other search makes room for the project shortest of :func:`_guide`'s point
    when its shortfall is a large share of the gap (:func:`_focus_neighbourhood`); where
    most jobs may use at most two pools (``restricted``), the other odd searches and
    every fourth free one pool's decisions; the rest free the job groups where that
    point and the incumbent disagree most (:func:`_next_neighbourhood`). The point is
    the LP optimum, or the Lagrangian point in every other pair's first search and in
    its second when that is a focus search (not where ``restricted``).
    """
    assert best.values is not None
    gap_q = max(bound - (best.objective or 0.0), 1.0)
    if round_ % 2 == 1:
        target = _guide(lp_values, lag, round_, focus=True, restricted=restricted)
        focus = _focus_neighbourhood(form, target, best.values, focused)
        if focus is not None and focus[3] >= FOCUS_SHARE * gap_q:
            sub, project, pool, short = focus
            focused[project] = focused.get(project, 0) + 1
            by = "" if target is lp_values else " (short of the Lagrangian point)"
            return Pick(sub, [], f"room for {project} in sub-pool {pool}{by}, {short / gap_q:.0%} of the gap", True)
    by_pool = restricted and round_ % 4 in (1, 2, 3)
    guide = _guide(lp_values, lag, round_, restricted=restricted)
    sub, chosen = _next_neighbourhood(
        form, guide, best.values, size or NEXT_VARS, freed, round_, by_pool=by_pool
    )
    against = "LP" if guide is lp_values else "Lagrangian point"
    kind = f"{len(chosen)} job groups where {against} and incumbent disagree" + (
        " in one pool" if by_pool else ""
    )
    return Pick(sub, chosen, kind, False)


def _offer_answers(
    form: Formulation,
    epoch: Epoch,
    previous: Plan | None,
    best: _Best,
    bound: float,
    deadline: float,
    full: npt.NDArray[np.int64],
    keep: npt.NDArray[np.int64],
    answers: list[npt.NDArray[np.int64]],
    message: str,
    onto: npt.NDArray[np.int64] | None = None,
) -> tuple[int, int]:
    """Place a search's answers (its last first) and keep the best; returns how many
    were placed and how many earlier ones were too far below to place.

    ``full`` is the incumbent the search started from, ``keep`` the variables it was
    free to change. The last answer is always placed; earlier ones while time is left,
    and only those the model values near the best placed plan (:data:`EARLIER_SLACK`):
    placement can lose some of what the model gained, and an earlier, slightly worse
    answer may lose less. With ``onto`` (a better incumbent found meanwhile, by the
    other search of a pair), the last answer's changes are placed on top of it, and
    alone only when that loses; earlier answers are not tried, and nothing is placed
    past the deadline.
    """
    if onto is not None:
        if not answers or time.perf_counter() + best.place_s > deadline:
            return 0, 0
        alone = full.copy()
        alone[keep] = answers[0]
        changed = alone != full
        both = onto.copy()
        both[changed] = alone[changed]
        if best.offer(form, epoch, previous, within_classes(form, both, onto), message) or (
            time.perf_counter() + best.place_s > deadline
        ):
            return 1, 0
        best.offer(form, epoch, previous, alone, message)
        return 2, 0
    tried = skipped = 0
    for answer in answers:
        if tried and time.perf_counter() + best.place_s > deadline:
            break
        cand = full.copy()
        cand[keep] = answer
        if tried and not _worth_placing(float(form.model.value(cand)), best.objective, bound):
            skipped += 1
            continue
        tried += 1
        best.offer(form, epoch, previous, cand, message)
    return tried, skipped


def _whole_search(
    form: Formulation,
    solver: Backend,
    epoch: Epoch,
    previous: Plan | None,
    best: _Best,
    bound: float,
    deadline: float,
    rel_gap: float,
) -> tuple[float, str]:
    """The backend on the whole model for the time left, from the best placed incumbent
    (the hint) and stopping once its answer is near the LP bound; its answer, placed,
    replaces the incumbent when better. Returns the bound (the LP's, or the backend's
    own where that is tighter) and why the search ended."""
    caps = solver.capabilities
    hint = (
        {i: int(v) for i, v in enumerate(best.values)}
        if best.values is not None and caps.takes_hint
        else {}
    )
    whole = form.model.with_bounds(form.model.lower, form.model.upper, hint)
    if caps.stop_at_bound:
        whole.stop_at = _stop_at(bound, rel_gap)
    started = time.perf_counter()
    found = solver.solve(whole, time_limit=max(deadline - started, 0.01), rel_gap=rel_gap)
    spent = time.perf_counter() - started
    if found.values is not None:
        best.offer(form, epoch, previous, found.values, found.message)
        if found.bound is not None:
            bound = min(bound, found.bound)
    why = "optimal" if found.status is SolveStatus.OPTIMAL else _why_search(found, whole, rel_gap)
    return bound, f"{solver.name} on the whole model from the LP rounding in {spent:.2f}s: {why}; gap {best.gap(bound):.2%}"


def _stop_at(bound: float, rel_gap: float) -> int:
    """The objective at which a search may stop: :data:`SEARCH_TARGET_SHARE` of the
    planner's ``rel_gap`` below the whole model's ``bound`` (placement loses a little of
    what the model gained, so a search stopped at the target itself leaves the placed
    plan short of it)."""
    return math.ceil(bound - SEARCH_TARGET_SHARE * rel_gap * max(abs(bound), 1.0))


def _search_gap(gap: float, rel_gap: float) -> float:
    """The neighbourhood searches' own gap: :data:`SEARCH_GAP_SHARE` of ``rel_gap``, at
    most :data:`NEED_SHARE` of what the plan (``gap`` from the bound) lacks of it."""
    return min(SEARCH_GAP_SHARE * rel_gap, max(NEED_SHARE * (gap - rel_gap), SEARCH_GAP_FLOOR))


def _worth_placing(value: float, best: float | None, bound: float) -> bool:
    """Whether an earlier answer of a search, of model objective ``value``, is worth
    placing next to the best placed plan so far (objective ``best``): only when it is
    at most :data:`EARLIER_SLACK` of the bound below it: in the benchmark runs that set
    it, none further below won once placed and filled."""
    return best is None or value >= best - EARLIER_SLACK * max(abs(bound), 1.0)


def _why_search(found: SolveResult, model: LinearModel, rel_gap: float) -> str:
    """Why one neighbourhood search stopped."""
    if found.values is None:
        return f"no answer ({found.status.value})"
    if found.status is SolveStatus.OPTIMAL:
        return "optimal in its neighbourhood"
    if model.stop_at is not None and found.objective is not None and found.objective >= model.stop_at:
        return "reached the stop-at objective"
    gap = found.gap
    if gap is not None and gap <= rel_gap:
        return f"within {gap:.2%} of its own bound"
    return "its time limit"


def _next_neighbourhood(
    form: Formulation,
    lp_values: npt.NDArray[np.float64],
    incumbent: npt.NDArray[np.int64],
    size: int,
    freed: dict[int, int],
    seed: int,
    by_pool: bool = False,
) -> tuple[LinearModel, list[int]]:
    """A neighbourhood of ``incumbent`` where it disagrees most with the LP optimum.

    Each job group (a class's starts, a running job's slices) scores the objective at
    stake where the two differ, ``sum |lp - incumbent| * |objective coefficient|``,
    halved for each earlier search that already freed it, with a little noise so
    that ties and near-ties vary between rounds. The best groups are freed, about
    ``size`` variables in all, each variable within one of both its LP and incumbent
    values; the auxiliary variables are always free, everything else is fixed at the
    incumbent, which is the warm start.
    """
    m = form.model
    rng = np.random.default_rng(seed)
    groups = form.groups()
    coef = np.abs(m.objective_vector())
    diff = np.abs(lp_values - incumbent)
    # The utility at stake in each project (its utility variables weighted by their
    # slopes, where LP and incumbent differ): a project the incumbent leaves short of
    # its share, or one it runs past it, has all its groups scored up, so the search
    # can move work between such projects (the objective of a start itself holds only
    # its bonuses, not the utility it buys).
    stake = {
        project: float(np.dot(diff[vs], coef[vs])) for project, vs in form.project_vars().items()
    }
    owners = form.group_projects()
    at_stake = STAKE_SHARE * np.array([stake.get(owner, 0.0) for owner in owners])

    if by_pool:
        # One pool's decisions only: the pool with most at stake, where work can move
        # only inside the pool (jobs allowed one GPU type), so that a project short of
        # its share there and the projects that would make room are freed together.
        pools = form.var_pools()
        names = sorted({int(p) for p in pools if p >= 0})
        flat = np.fromiter(itertools.chain.from_iterable(groups), dtype=np.int64)
        owner_of = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
        by: dict[int, float] = {}
        for p in names:
            here = pools[flat] == p
            counts = np.bincount(owner_of[here], minlength=len(groups))
            by[p] = sum(_group_scores(flat[here], counts, diff, coef, at_stake).tolist())
        noise = rng.uniform(0.8, 1.2, size=len(names))
        pick = names[int(np.argmax([by[p] * w for p, w in zip(names, noise, strict=True)]))]
        groups = [[v for v in g if pools[v] == pick] for g in groups]
    flat = np.fromiter(itertools.chain.from_iterable(groups), dtype=np.int64)
    counts = np.fromiter((len(g) for g in groups), dtype=np.int64, count=len(groups))
    scores = _group_scores(flat, counts, diff, coef, at_stake)
    scores *= 0.5 ** np.array([freed.get(i, 0) for i in range(len(groups))], dtype=float)
    scores *= rng.uniform(0.8, 1.2, size=len(groups))
    lower = [int(v) for v in incumbent]
    upper = list(lower)
    chosen: list[int] = []
    total = 0
    for i in np.argsort(-scores):
        if total >= size or scores[i] <= 0:
            break
        chosen.append(int(i))
        for v in groups[i]:
            lower[v], upper[v] = _around(m, v, lp_values, incumbent)
            total += 1
    return _sub_model(form, lower, upper, incumbent), chosen


def _group_scores(
    flat: npt.NDArray[np.int64],
    counts: npt.NDArray[np.int64],
    diff: npt.NDArray[np.float64],
    coef: npt.NDArray[np.float64],
    at_stake: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """Each group's score in :func:`_next_neighbourhood`: the groups' variables listed
    one group after the other (``flat``, ``counts`` of each group).

    A group's score is ``sum(diff * coef) + 0.001 * max(coef)`` over its variables plus
    its project's utility at stake, in full where LP and incumbent differ by more than
    1e-6 somewhere in the group and a quarter otherwise; an empty group scores 0. The
    groups where they differ at all are summed one by one, as they always were; the
    others' sum is 0, so their scores are computed all at once, to the same bits.
    """
    n = len(counts)
    heads = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    some = counts > 0
    top_coef = np.zeros(n)
    top_diff = np.zeros(n)
    if len(flat):
        top_coef[some] = np.maximum(np.maximum.reduceat(coef[flat], heads[some]), 0.0)
        top_diff[some] = np.maximum(np.maximum.reduceat(diff[flat], heads[some]), 0.0)
    scores = 1e-3 * top_coef + at_stake * 0.25
    scores[~some] = 0.0
    for i in np.flatnonzero(top_diff > 0).tolist():
        g = flat[heads[i] : heads[i] + counts[i]]
        base = float(np.dot(diff[g], coef[g]) + 1e-3 * coef[g].max(initial=0.0))
        scores[i] = base + float(at_stake[i]) * (1.0 if top_diff[i] > 1e-6 else 0.25)
    return scores


def _around(
    m: LinearModel, v: int, lp_values: npt.NDArray[np.float64], incumbent: npt.NDArray[np.int64]
) -> tuple[int, int]:
    """Bounds of a freed decision in a neighbourhood: within one of both its LP value
    and its incumbent value (and the model's own bounds)."""
    lo = min(math.floor(lp_values[v] + 1e-6), int(incumbent[v])) - 1
    hi = max(math.ceil(lp_values[v] - 1e-6), int(incumbent[v])) + 1
    return max(m.lower[v], lo), min(m.upper[v], hi)


def _sub_model(
    form: Formulation, lower: list[int], upper: list[int], incumbent: npt.NDArray[np.int64]
) -> LinearModel:
    """The neighbourhood with these bounds (the auxiliary variables free), hinted with
    the incumbent."""
    m = form.model
    for v in form.loose():
        lower[v], upper[v] = m.lower[v], m.upper[v]
    return m.with_bounds(lower, upper, dict(enumerate(np.asarray(incumbent).astype(np.int64).tolist())))


def _focus_neighbourhood(
    form: Formulation,
    lp_values: npt.NDArray[np.float64],
    incumbent: npt.NDArray[np.int64],
    focused: dict[str, int],
) -> tuple[LinearModel, str, int, float] | None:
    """A neighbourhood that makes room for the project the incumbent leaves shortest.

    ``lp_values`` is the point measured against: the LP optimum, or in a guided pair the
    Lagrangian point (:func:`_guide`). The project whose utility that point values most
    above the incumbent's
    (``sum slope * (u_lp - u_incumbent)``, halved for each earlier time it was the focus)
    gets all its starts freed, each over its whole range; in the pool where that point
    starts most of its work, every decision that runs or that the point starts (running
    jobs' slices, starts with a value in either) is freed within one of both values, so
    that the search can stop or move the work that must make room (a 512-GPU gang needs
    64 whole nodes, many other groups' worth). The auxiliary variables are free,
    everything else is fixed at the incumbent. Returns the model, the project and the
    pool; ``None`` when no project is short.
    """
    m = form.model
    epoch = form.epoch
    coef = m.objective_vector()
    short = {
        project: float(np.dot(coef[vs], lp_values[vs] - incumbent[vs]))
        for project, vs in form.project_vars().items()
    }
    ranked = sorted(short, key=lambda p: (-short[p] * 0.5 ** focused.get(p, 0), p))
    if not ranked or short[ranked[0]] <= 0:
        return None
    project = ranked[0]
    table = form.start_table()
    own_class = np.array([c.project == project for c in epoch.classes], dtype=bool)
    own = own_class[table.cls] if len(table.var) else np.zeros(0, dtype=bool)
    mass: dict[int, float] = {}
    # In x's order, as the sums always were.
    for i in np.flatnonzero(own & (lp_values[table.var] > 1e-6)).tolist():
        cls, p, var = epoch.classes[int(table.cls[i])], int(table.pool[i]), int(table.var[i])
        mass[p] = mass.get(p, 0.0) + float(lp_values[var]) * cls.gpus * cls.length(int(table.start[i]), epoch.slices)
    if not mass:
        return None
    pool = max(sorted(mass), key=lambda p: mass[p])
    lower = [int(v) for v in incumbent]
    upper = list(lower)
    for var in table.var[own].tolist():
        lower[var], upper[var] = m.lower[var], m.upper[var]
    near = ~own & (table.pool == pool) & ((incumbent[table.var] > 0) | (lp_values[table.var] > 1e-6))
    for var in table.var[near].tolist():
        lower[var], upper[var] = _around(m, var, lp_values, incumbent)
    for (j, _), var in form.z.items():
        if epoch.running[j].pool == pool or epoch.running[j].state.job.project == project:
            lower[var], upper[var] = m.lower[var], m.upper[var]
    return _sub_model(form, lower, upper, incumbent), project, pool, short[project]


def _decomposed(
    snapshot: Snapshot,
    solver: Backend,
    parts: int,
    time_limit: float,
    rel_gap: float,
    previous: Plan | None,
    t0: float,
    lanes: int | None,
) -> Plan:
    """Plan the parts of :func:`~planner.mip.decompose.split` and merge them: side by
    side in lanes (:mod:`planner.mip.lanes`) when the backend can and there is more
    than one core, else one by one.

    One by one, each part's time limit is its share (by job count) of the time left,
    less a reserve for merging; a part a lane could not plan is planned so here.
    """
    n_lanes = min(parts, lanes if lanes is not None else lanes_module.cores())
    laned = solver if n_lanes > 1 and solver.capabilities.lanes and isinstance(solver, Laned) else None
    if laned is not None:
        lanes_module.warm(n_lanes)  # their imports overlap the split
    subs = split(snapshot, parts)
    deadline = time.monotonic() + time_limit - MERGE_RESERVE - (time.perf_counter() - t0)
    found: list[Plan | str] = [""] * len(subs)
    note = ""
    if laned is not None:
        found = lanes_module.plan_in_lanes(subs, laned, n_lanes, deadline, rel_gap, previous)
        note = f", planned in {min(n_lanes, len(subs))} lanes (one process per core)"
        failed = [f for f in found if isinstance(f, str)]
        if failed:
            note += f"; {len(failed)} part(s) planned after: {min(failed)}"
    jobs_left = sum(len(s.jobs) for s, f in zip(subs, found, strict=True) if isinstance(f, str))
    plans: list[Plan] = []
    for sub, got in zip(subs, found, strict=True):
        if isinstance(got, Plan):
            plans.append(got)
            continue
        # One lane: the part's share of this process's time left.
        limit = lanes_module.part_limit(time.monotonic(), deadline, (), len(sub.jobs), jobs_left)
        jobs_left -= len(sub.jobs)
        plans.append(lanes_module.plan_part(sub, solver, max(limit, 0.5), rel_gap, previous))
    return merge(snapshot, plans, solver.name, time.perf_counter() - t0, note)


def _why(result: SolveResult, rel_gap: float) -> str:
    """Why a backend's search stopped, from its result."""
    if result.status is SolveStatus.OPTIMAL:
        return "proved optimal"
    if result.values is None:
        return f"no answer ({result.status.value}: {result.message})"
    gap = result.gap
    if gap is not None and gap <= rel_gap:
        return f"gap {gap:.2%} within the target {rel_gap:.2%}"
    return f"time limit, gap {gap:.2%}" if gap is not None else "time limit"


def _fallback(
    epoch: Epoch,
    greedy: Greedy,
    backend: str,
    status: SolveStatus,
    t0: float,
    message: str,
    ended: str,
) -> Plan:
    info = SolverInfo(
        backend=backend,
        status=status,
        seconds=time.perf_counter() - t0,
        fallback=True,
        message=f"greedy fallback: {message}; ended by {ended}: the greedy plan is returned",
    )
    return greedy_plan(epoch, greedy, info)


__all__ = [
    "available_backends",
    "explain_job",
    "get_backend",
    "plan_epoch",
]
