"""OR-Tools CP-SAT backend (the default)."""

from __future__ import annotations

import atexit
import dataclasses
import importlib.util
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

from models import SolveStatus
from planner.mip.backends.base import Capabilities, SolveResult, each_gap
from planner.mip.backends.isolate import Isolated, SolverDied, Unavailable
from planner.mip.model import LinearModel

#: Record earlier incumbents only for models this small (reading one costs a Python call
#: per variable, inside the search).
KEEP_VARS = 5000
#: How many of the latest incumbents are kept.
KEEP_LAST = 4


def _watcher(xs: list[Any], keep: bool, stop_at: int | None) -> Any:
    """A solution callback that keeps the values of the last :data:`KEEP_LAST` incumbents
    (when ``keep``) and stops the search at the first incumbent reaching ``stop_at``."""
    from ortools.sat.python import cp_model

    class Watcher(cp_model.CpSolverSolutionCallback):
        def __init__(self) -> None:
            super().__init__()
            self.found: list[npt.NDArray[np.int64]] = []

        def on_solution_callback(self) -> None:
            if keep:
                self.found.append(
                    np.fromiter((self.value(x) for x in xs), dtype=np.int64, count=len(xs))
                )
                del self.found[:-KEEP_LAST]
            if stop_at is not None and self.objective_value >= stop_at:
                self.stop_search()

    return Watcher()


class CpSatBackend:
    """Solve with CP-SAT; the model is already integer, so it is passed as is.

    Parameters
    ----------
    workers
        CP-SAT search workers. The default of 2 matches the 2-core machines the planner
        is sized for; CP-SAT with one worker loses its LP-based portfolio.
    subsolvers
        The workers' strategies, when there are as many workers as names. The epoch
        model is a MIP with a tight LP, so both workers run with the LP: ``max_lp``
        (every cut CP-SAT knows, the strongest LP) next to ``default_lp``. Measured on
        the 3,000-job neighbourhood searches: within 0.125% of their optimum in under a
        second, where CP-SAT's own 2-worker portfolio was still 0.3-0.5% away after 3 s.
    isolate
        Solve in a separate, long-lived process (:mod:`planner.mip.backends.isolate`):
        OR-Tools 9.15 can abort the process from inside CP-SAT's presolve
        (google/or-tools#5288), and the planner must survive that.
    """

    name = "cpsat"
    #: The hint is a complete or partial start; earlier incumbents come from a solution
    #: callback that also stops the search at ``stop_at``. CP-SAT exposes no LP.
    capabilities = Capabilities(
        warm_start=True, hints=True, earlier_incumbents=True, stop_at_bound=True, prestart=True,
        lanes=True,
    )

    def __init__(
        self,
        workers: int = 2,
        subsolvers: tuple[str, ...] = ("max_lp", "default_lp"),
        isolate: bool = True,
    ) -> None:
        self.workers = workers
        self.subsolvers = subsolvers
        self.isolate = isolate
        # One search worker per model in solve_many: as many models at once as workers.
        self.capabilities = dataclasses.replace(
            CpSatBackend.capabilities, concurrent=workers if workers > 1 else 0
        )

    def is_available(self) -> bool:
        """Whether OR-Tools is installed (found, not imported)."""
        return importlib.util.find_spec("ortools") is not None

    def solve(self, model: LinearModel, *, time_limit: float, rel_gap: float) -> SolveResult:
        """Solve ``model`` with CP-SAT, in the solver process when ``isolate`` is set.

        A solver process that dies or hangs gives an ``error`` result; the planner then
        keeps what it has (its LP-dive incumbent, or the greedy plan).
        """
        return self._run([(model, self.workers, self.subsolvers, rel_gap)], time_limit)[0]

    def solve_many(
        self, models: list[LinearModel], *, time_limit: float, rel_gap: float | Sequence[float]
    ) -> list[SolveResult]:
        """Solve ``models`` at once, each with one ``max_lp`` worker on its own thread
        (CP-SAT releases the GIL while it searches), in the solver process when
        ``isolate`` is set. On the planner's neighbourhood searches one ``max_lp``
        worker found 96% of what the deployed pair of workers found in the same time
        (30 neighbourhoods of 8 families, 2 s each), so two neighbourhoods searched side
        by side gain about twice what one gains with both workers. ``rel_gap`` is one
        gap for all, or one per model."""
        gaps = each_gap(rel_gap, len(models))
        return self._run([(m, 1, (SOLO,), gap) for m, gap in zip(models, gaps, strict=True)], time_limit)

    def _run(
        self, searches: list[tuple[LinearModel, int, tuple[str, ...], float]], time_limit: float
    ) -> list[SolveResult]:
        """:func:`_solve_many` of ``(model, workers, subsolvers, rel_gap)`` searches, in the solver
        process when ``isolate`` is set (here when none can start); a process that dies
        or hangs gives each model an ``error`` result."""
        # The solver process counts its time to this deadline: handing it a model of
        # thousands of variables took 0.1-0.3 s on 2 cores, which the search's limit
        # did not include (plans of a 10 s limit took up to 10.15 s).
        deadline = time.monotonic() + time_limit
        args = [(model, time_limit, gap, workers, subsolvers, deadline) for model, workers, subsolvers, gap in searches]
        if not self.isolate:
            return _solve_many(args)
        t0 = time.perf_counter()
        try:
            results: list[SolveResult] = SOLVER_PROCESS.call(_solve_many, (args,), timeout=time_limit)
        except Unavailable:
            return _solve_many(args)
        except SolverDied as exc:
            seconds = time.perf_counter() - t0
            return [SolveResult(SolveStatus.ERROR, None, None, None, seconds, f"CP-SAT: {exc}")] * len(args)
        return results

    def for_lane(self) -> CpSatBackend:
        """One ``max_lp`` worker, solving in the lane's process: a lane has one core, and
        the LP-heavy worker is the half of the pair that closes the epoch model's gap."""
        return CpSatBackend(workers=1, subsolvers=(SOLO,), isolate=False)

    def warm(self) -> None:
        """Start the solver process and its OR-Tools import ahead of the first solve."""
        if self.isolate:
            SOLVER_PROCESS.warm()


#: The worker of a one-worker search (a lane, or one of the models of ``solve_many``).
SOLO = "max_lp"


def _solve_many(args: list[tuple[Any, ...]]) -> list[SolveResult]:
    """:func:`_solve` of each argument tuple, on threads of their own."""
    if len(args) == 1:
        return [_solve(*args[0])]
    with ThreadPoolExecutor(len(args)) as pool:
        return list(pool.map(lambda a: _solve(*a), args))


def import_ortools() -> bool:
    """The solver process's first task: load OR-Tools while the parent builds the model."""
    from ortools.sat.python import cp_model  # noqa: F401

    return True


#: The process-wide solver process of every isolated CP-SAT backend.
SOLVER_PROCESS = Isolated(startup=import_ortools)
atexit.register(SOLVER_PROCESS.close)


def time_left(time_limit: float, deadline: float | None, now: float) -> float:
    """The search time a solve started at ``now`` (``time.monotonic``) may take: its
    limit, and no more than reaches ``deadline`` (the caller's, when given)."""
    left = time_limit if deadline is None else min(time_limit, deadline - now)
    return max(left, 0.0)


def _solve(
    model: LinearModel,
    time_limit: float,
    rel_gap: float,
    workers: int,
    subsolvers: tuple[str, ...],
    deadline: float | None = None,
) -> SolveResult:
    """Build the CP-SAT model from ``model``, solve it and map the answer back (here),
    within ``time_limit`` and by ``deadline`` (``time.monotonic``, shared by processes)."""
    from ortools.sat.python import cp_model

    time_limit = time_left(time_limit, deadline, time.monotonic())
    t0 = time.perf_counter()
    cp = cp_model.CpModel()
    xs = [
        cp.new_int_var(lo, hi, name)
        for name, lo, hi in zip(model.names, model.lower, model.upper, strict=True)
    ]
    for c in model.constraints:
        expr = cp_model.LinearExpr.weighted_sum([xs[v] for v in c.vars.tolist()], c.coefs.tolist())
        if c.sense == "<=":
            cp.add(expr <= c.rhs)
        elif c.sense == ">=":
            cp.add(expr >= c.rhs)
        else:
            cp.add(expr == c.rhs)
    obj_vars = list(model.objective)
    cp.maximize(
        cp_model.LinearExpr.weighted_sum(
            [xs[v] for v in obj_vars], [model.objective[v] for v in obj_vars]
        )
        + model.objective_offset
    )
    for v, val in model.hint.items():
        cp.add_hint(xs[v], val)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(time_limit - (time.perf_counter() - t0), 0.01)
    solver.parameters.relative_gap_limit = rel_gap
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = 1
    if len(subsolvers) == workers:
        solver.parameters.subsolvers.extend(subsolvers)
    keep = len(xs) <= KEEP_VARS
    keeper = _watcher(xs, keep, model.stop_at) if keep or model.stop_at is not None else None
    code = solver.solve(cp, keeper)
    seconds = time.perf_counter() - t0
    status = {
        cp_model.OPTIMAL: SolveStatus.OPTIMAL,
        cp_model.FEASIBLE: SolveStatus.FEASIBLE,
        cp_model.INFEASIBLE: SolveStatus.INFEASIBLE,
        cp_model.MODEL_INVALID: SolveStatus.ERROR,
    }.get(code, SolveStatus.NO_SOLUTION)
    if status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE):
        values = np.fromiter((solver.value(x) for x in xs), dtype=np.int64, count=len(xs))
        objective = float(solver.objective_value)
        bound = float(solver.best_objective_bound)
        # CP-SAT stops at the gap limit with OPTIMAL; say FEASIBLE unless it is proven.
        if status is SolveStatus.OPTIMAL and bound > objective + 1e-6:
            status = SolveStatus.FEASIBLE
        earlier = tuple(
            v for v in reversed(keeper.found if keeper else []) if not np.array_equal(v, values)
        )
        return SolveResult(
            status, values, objective, bound, seconds, solver.status_name(code), earlier
        )
    return SolveResult(status, None, None, None, seconds, solver.status_name(code))
