"""The epoch planner: snapshot -> MIP -> time-slice :class:`~models.Plan`.

:func:`plan_epoch` is the one entry point. Its phases, each timed in the plan's solver
message:

1. cut the epoch into slices and classify its jobs (:mod:`planner.mip.epoch`);
2. build the greedy plan (:mod:`planner.mip.greedy`): the fallback and the warm start;
3. build the backend-neutral MIP (:func:`planner.mip.formulation.apply`);
4. solve it with the chosen backend (:mod:`planner.mip.backends`);
5. read the answer back, place gangs on nodes and fill what is left
   (:func:`planner.mip.formulation.invert`, :mod:`planner.mip.assemble`);
6. say why each waiting job waits (:mod:`planner.mip.explain`).
"""

from __future__ import annotations

import time

from models import Plan, Snapshot, SolverInfo, SolveStatus
from planner.mip.assemble import build_plan, place_runs
from planner.mip.backends import Backend, SolveResult, available_backends, get_backend
from planner.mip.epoch import Epoch, build_epoch
from planner.mip.explain import explain_job, pending_reasons
from planner.mip.formulation import Formulation, apply, hint_from_runs, invert
from planner.mip.greedy import Greedy, greedy_plan, greedy_runs
from planner.mip.relax import lp_available, neighbourhood, solve_relaxation


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
        Seconds for the whole call; model building counts against it.
    rel_gap
        Stop once the incumbent is within this fraction of the proven bound.
    previous
        The previous epoch's plan: jobs keep its nodes where they can.

    Returns
    -------
    Plan
        Never raises for solver trouble: with no incumbent or a solver error it returns
        the greedy plan with ``solver.fallback`` set.

    Raises
    ------
    KeyError
        When ``backend`` names no known backend.
    """
    t0 = time.perf_counter()
    solver = get_backend(backend) if isinstance(backend, str) else backend
    # 1-2. Geometry and the greedy plan.
    epoch = build_epoch(snapshot)
    greedy = greedy_runs(epoch, previous)
    # 3. The model.
    form = apply(epoch)
    name = solver.name
    if form.trivial:
        return greedy_plan(
            epoch,
            greedy,
            SolverInfo(
                backend=name,
                status=SolveStatus.TRIVIAL,
                seconds=time.perf_counter() - t0,
                message="nothing to decide",
            ),
        )
    form.model.hint = hint_from_runs(form, greedy.runs)
    # 4. Solve, within what is left of the time limit. Large epochs solve the LP
    # relaxation first, fix what it decided and let the MIP backend repair the rest.
    note = ""
    try:
        if form.model.num_vars > LP_GUIDED_VARS and lp_available():
            result, note = _lp_guided(form, solver, t0, time_limit, rel_gap)
        else:
            left = max(time_limit - (time.perf_counter() - t0), 0.01)
            result = solver.solve(form.model, time_limit=left, rel_gap=rel_gap)
    except Exception as exc:  # a backend must not take the planner down
        return _fallback(epoch, greedy, name, SolveStatus.ERROR, t0, repr(exc))
    if result.values is None:
        return _fallback(epoch, greedy, name, result.status, t0, result.message)
    # 5. Back to the domain: placement and gap filling.
    ends, starts = invert(form, result.values)
    runs, dropped, board = place_runs(epoch, ends, starts, previous, fill=True)
    # 6. Reasons.
    pending = pending_reasons(epoch, runs, dropped, board)
    info = SolverInfo(
        backend=name,
        status=result.status,
        objective=result.objective,
        bound=result.bound,
        gap=result.gap,
        seconds=time.perf_counter() - t0,
        fallback=False,
        message=f"{form.model.num_vars} variables, {len(form.model.constraints)} constraints, "
        f"{len(epoch.classes)} job classes; solver {result.seconds:.2f}s ({result.message})"
        + note,
    )
    return build_plan(epoch, runs, pending, info)


#: Models with more variables than this are solved LP-guided (:func:`_lp_guided`).
LP_GUIDED_VARS = 4000


def _lp_guided(
    form: Formulation, solver: Backend, t0: float, time_limit: float, rel_gap: float
) -> tuple[SolveResult, str]:
    """LP relaxation, then the MIP over the variables it left fractional (and their kin).

    The bound reported is the LP's, a proven bound of the whole model.
    """
    left = max(time_limit - (time.perf_counter() - t0), 0.01)
    relax = solve_relaxation(form.model, left * 0.5)
    if relax is None:
        left = max(time_limit - (time.perf_counter() - t0), 0.01)
        return solver.solve(form.model, time_limit=left, rel_gap=rel_gap), ""
    sub = neighbourhood(form.model, relax, form.groups(), form.loose())
    small, keep, full = sub.restrict(sub.lower, sub.upper)
    left = max(time_limit - (time.perf_counter() - t0), 0.01)
    # The sub-problem's own gap is measured against its own bound; aim a little lower so
    # the gap to the LP bound meets rel_gap.
    result = solver.solve(small, time_limit=left, rel_gap=rel_gap / 2)
    note = f"; LP-guided: LP {relax.seconds:.2f}s, {small.num_vars} variables left free"
    if result.values is None or result.objective is None:
        return result, note
    full[keep] = result.values
    result = SolveResult(
        result.status, full, float(form.model.value(full)), None, result.seconds, result.message
    )
    assert result.objective is not None
    bound = max(relax.bound, result.objective)
    gap = (bound - result.objective) / max(abs(bound), 1.0)
    status = SolveStatus.OPTIMAL if gap <= 1e-9 else SolveStatus.FEASIBLE
    return (
        SolveResult(status, result.values, result.objective, bound, result.seconds, result.message),
        note,
    )


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
