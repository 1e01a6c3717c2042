"""The epoch planner: snapshot -> MIP -> time-slice :class:`~models.Plan`.

:func:`plan_epoch` is the one entry point. Its phases:

1. cut the epoch into slices and classify its jobs (:mod:`planner.mip.epoch`);
2. build the greedy plan (:mod:`planner.mip.greedy`): the fallback and the warm start;
3. build the backend-neutral MIP (:func:`planner.mip.formulation.apply`);
4. solve it with the chosen backend (:mod:`planner.mip.backends`); large epochs first
   solve the LP relaxation, round it, and let the backend improve the rounding in the
   neighbourhood of the LP optimum (:mod:`planner.mip.relax`);
5. read the answer back, place gangs on nodes and fill what is left
   (:func:`planner.mip.formulation.invert`, :mod:`planner.mip.assemble`);
6. say why each waiting job waits (:mod:`planner.mip.explain`).
"""

from __future__ import annotations

import math
import time

import numpy as np
import numpy.typing as npt

from models import Plan, Snapshot, SolverInfo, SolveStatus
from planner.mip.assemble import Board, Run, build_plan, place_runs
from planner.mip.backends import Backend, SolveResult, available_backends, get_backend
from planner.mip.epoch import Epoch, build_epoch
from planner.mip.explain import explain_job, pending_reasons
from planner.mip.formulation import Formulation, apply, hint_from_runs, invert, values_of_runs
from planner.mip.greedy import Greedy, greedy_plan, greedy_runs
from planner.mip.relax import Dive, Relaxation, dive, lp_available, neighbourhood

#: Models with more variables than this are solved LP-guided (:func:`_lp_guided`).
LP_GUIDED_VARS = 2000
#: Share of the time left that the first LP dive may take.
DIVE_SHARE = 0.5
#: Rounding thresholds (up, down) of the successive dives.
DIVE_SETTINGS = ((0.8, 0.4), (0.7, 0.35), (0.9, 0.45), (0.6, 0.3), (0.95, 0.5))
#: The neighbourhood search stops once its answer is within this fraction of the
#: planner's ``rel_gap`` of the whole model's bound: its answers lose some objective to
#: node placement (0.03-0.3% on the benchmark epochs), so a search that stops as soon as
#: the target is met leaves a placed plan short of it.
SEARCH_TARGET_SHARE = 0.5
#: ... or once it is within this fraction of ``rel_gap`` of its own (the neighbourhood's)
#: bound: nothing much better is left to find there.
SEARCH_GAP_SHARE = 0.125

Placed = tuple[list[Run], set[str], Board]


def plan_epoch(
    snapshot: Snapshot,
    *,
    backend: str | Backend = "cpsat",
    time_limit: float = 10.0,
    rel_gap: float = 0.01,
    previous: Plan | None = None,
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
    warm = getattr(solver, "warm", None)
    if callable(warm):
        warm()  # a backend's solver process starts while the model is built
    # 1-2. Geometry and the greedy plan.
    epoch = build_epoch(snapshot)
    greedy = greedy_runs(epoch, previous)
    # Placement, gap filling, reasons and the plan's objects take a few times the
    # greedy's time: keep that much of the limit for them.
    reserve = 8.0 * (time.perf_counter() - t0) + 0.3
    deadline = t0 + time_limit - reserve
    # 3. The model.
    form = apply(epoch)
    if form.trivial:
        info = SolverInfo(
            backend=name,
            status=SolveStatus.TRIVIAL,
            seconds=time.perf_counter() - t0,
            message="nothing to decide",
        )
        return greedy_plan(epoch, greedy, info)
    t_model = time.perf_counter()
    # 4. Solve.
    note = ""
    placed: Placed | None = None
    try:
        if form.model.num_vars > LP_GUIDED_VARS and lp_available():
            result, note, placed = _lp_guided(form, solver, epoch, previous, deadline, rel_gap)
        else:
            form.model.hint = hint_from_runs(form, greedy.runs)
            left = max(deadline - time.perf_counter(), 0.01)
            result = solver.solve(form.model, time_limit=left, rel_gap=rel_gap)
    except Exception as exc:  # a backend must not take the planner down
        return _fallback(epoch, greedy, name, SolveStatus.ERROR, t0, repr(exc))
    if result.values is None:
        return _fallback(epoch, greedy, name, result.status, t0, result.message)
    t_solved = time.perf_counter()
    # 5. Back to the domain: placement and gap filling (already done for the LP dive's
    # incumbent, whose values are those of its placed runs).
    if placed is None:
        ends, starts = invert(form, result.values)
        placed = place_runs(epoch, ends, starts, previous, fill=True)
    runs, dropped, board = placed
    final = values_of_runs(form, runs)
    objective = float(form.model.value(final)) if final is not None else result.objective
    as_charged = values_of_runs(form, runs, as_charged=True)
    charged_objective = float(form.model.value(as_charged)) if as_charged is not None else None
    bound = result.bound
    status = result.status
    if bound is not None and objective is not None:
        bound = max(bound, objective)
        if status is SolveStatus.OPTIMAL and objective < bound - 1e-6:
            status = SolveStatus.FEASIBLE  # placement dropped a gang the solver had placed
    gap = (
        max(bound - objective, 0.0) / max(abs(bound), 1.0)
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
        + (f"; {len(dropped)} gang(s) found no hole" if dropped else ""),
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


def _lp_guided(
    form: Formulation,
    solver: Backend,
    epoch: Epoch,
    previous: Plan | None,
    deadline: float,
    rel_gap: float,
) -> tuple[SolveResult, str, Placed | None]:
    """LP diving, then the backend in the neighbourhood of the dive's solution.

    The LP relaxation's optimum is a proven bound. Diving (:func:`planner.mip.relax.dive`)
    rounds the job decisions it leaves fractional, re-solving the LP; rounded down, placed
    and gap-filled, its result is a feasible incumbent. While a whole dive fits in the
    time left, further dives with other rounding thresholds try to beat it.
    When that is not within ``rel_gap`` of the bound and time is left, the backend
    searches the variables the dive left fractional (with their job class) around it.
    Returns the result, a note for the message, and the placed runs of the incumbent
    when it is the dive's.
    """
    t_start = time.perf_counter()
    decisions = np.array(sorted([*form.x.values(), *form.z.values()]), dtype=np.int64)
    placed: Placed | None = None
    best: npt.NDArray[np.int64] | None = None
    best_obj: float | None = None
    last: Dive | None = None
    bound = math.inf
    dives: list[str] = []
    place_s = 0.0  # the longest placement seen: what placing one more answer costs
    # Several dives (different rounding thresholds) while time allows; the best wins.
    for i, (up, down) in enumerate(DIVE_SETTINGS):
        now = time.perf_counter()
        left = deadline - now
        if i and (last is None or last.fractional or left < 2.0 * last.seconds + 0.2):
            break
        if best_obj is not None and (bound - best_obj) / max(abs(bound), 1.0) <= rel_gap:
            break
        share = DIVE_SHARE if i == 0 else 1.0
        result = dive(form.model, decisions, now + share * left, up, down)
        if result is None:
            break
        last = result
        bound = min(bound, result.bound)
        floor = np.floor(result.values + 1e-6).astype(np.int64)
        started = time.perf_counter()
        ends, starts = invert(form, floor)
        trial = place_runs(epoch, ends, starts, previous, fill=True)
        place_s = max(place_s, time.perf_counter() - started)
        values = values_of_runs(form, trial[0])
        obj = float(form.model.value(values)) if values is not None else None
        dives.append(
            f"{result.rounds} rounds in {result.seconds:.2f}s"
            + (f", gap {(bound - obj) / max(abs(bound), 1.0):.2%}" if obj is not None else "")
        )
        if obj is not None and (best_obj is None or obj > best_obj):
            best, best_obj, placed = values, obj, trial
    if last is None:
        left = max(deadline - time.perf_counter(), 0.01)
        return solver.solve(form.model, time_limit=left, rel_gap=rel_gap), "", None
    result = last
    note = f"; LP dives: {'; '.join(dives)}"
    message = "LP dive"
    left = deadline - time.perf_counter()
    if (best_obj is None or (bound - best_obj) / max(abs(bound), 1.0) > rel_gap) and left > 1.5:
        relax = Relaxation(result.values, bound, result.seconds)
        sub = neighbourhood(form.model, relax, form.groups(), form.loose(), incumbent=best)
        sub.stop_at = math.ceil(bound - SEARCH_TARGET_SHARE * rel_gap * max(abs(bound), 1.0))
        small, keep, full = sub.restrict(sub.lower, sub.upper)
        found = solver.solve(small, time_limit=left - 0.5, rel_gap=SEARCH_GAP_SHARE * rel_gap)
        note += f"; {small.num_vars} variables searched by {solver.name}"
        if found.values is None:
            note += f" without an answer ({found.status.value}: {found.message})"
        answers = [] if found.values is None else [found.values, *found.earlier]
        tried = 0
        for answer in answers:
            # The last answer is always placed; earlier ones while time is left.
            if tried and time.perf_counter() + place_s > deadline:
                break
            tried += 1
            # Compare placed plans: placement can lose some of what the model gained,
            # and an earlier, slightly worse answer may lose less.
            cand = full.copy()
            cand[keep] = answer
            ends, starts = invert(form, cand)
            trial = place_runs(epoch, ends, starts, previous, fill=True)
            values = values_of_runs(form, trial[0])
            obj = float(form.model.value(values)) if values is not None else None
            if obj is not None and (best_obj is None or obj > best_obj):
                best, best_obj, message, placed = values, obj, found.message, trial
        if tried > 1:
            note += f" ({tried} answers placed)"
    if best is None or best_obj is None:
        seconds = time.perf_counter() - t_start
        return (
            SolveResult(SolveStatus.NO_SOLUTION, None, None, None, seconds, "no incumbent"),
            note,
            None,
        )
    bound = max(bound, best_obj)
    status = SolveStatus.OPTIMAL if bound - best_obj <= 1e-6 else SolveStatus.FEASIBLE
    seconds = time.perf_counter() - t_start
    return SolveResult(status, best, best_obj, bound, seconds, message), note, placed


def _fallback(
    epoch: Epoch, greedy: Greedy, backend: str, status: SolveStatus, t0: float, message: str
) -> Plan:
    info = SolverInfo(
        backend=backend,
        status=status,
        seconds=time.perf_counter() - t0,
        fallback=True,
        message=f"greedy fallback: {message}",
    )
    return greedy_plan(epoch, greedy, info)


__all__ = [
    "available_backends",
    "explain_job",
    "get_backend",
    "plan_epoch",
]
