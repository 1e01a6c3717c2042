"""PuLP backend: HiGHS when installed, else CBC."""

from __future__ import annotations

import importlib.util
import time
from typing import Any

import numpy as np
import numpy.typing as npt

from models import SolveStatus
from planner.mip.backends.base import Capabilities, LpSession, SolveResult, quiet_stdout
from planner.mip.backends.highs_lp import HighsLp, highs_available
from planner.mip.model import LinearModel


class PulpBackend:
    """Solve with PuLP's HiGHS or CBC interface.

    Parameters
    ----------
    solver
        ``"highs"``, ``"cbc"`` or ``"auto"`` (HiGHS when available, else CBC).
    """

    name = "pulp"

    def __init__(self, solver: str = "auto") -> None:
        self.solver = solver
        # PuLP hands the MIP no start, reports no earlier incumbents and cannot stop at
        # an objective value; with HiGHS installed it solves LP relaxations, and solves
        # them as integers too (the Lagrangian bound's open parts).
        lp = solver != "cbc" and highs_available()
        self.capabilities = Capabilities(lp_relaxation=lp, integer_parts=lp)

    def is_available(self) -> bool:
        """Whether PuLP is installed (found, not imported)."""
        return importlib.util.find_spec("pulp") is not None

    def open_lp(
        self, model: LinearModel, objective: npt.NDArray[np.float64] | None = None
    ) -> LpSession:
        """The LP relaxation of ``model`` in HiGHS (requires ``capabilities.lp_relaxation``);
        ``objective`` replaces the model's when given."""
        if not self.capabilities.lp_relaxation:
            raise RuntimeError("this PuLP backend has no LP solver (HiGHS is missing)")
        return HighsLp(model, objective)

    def _make_solver(self, time_limit: float, rel_gap: float) -> Any:
        import pulp

        want = self.solver
        if want in ("auto", "highs") and importlib.util.find_spec("highspy") is not None:
            return pulp.HiGHS(msg=False, timeLimit=time_limit, gapRel=rel_gap, threads=1)
        return pulp.PULP_CBC_CMD(msg=False, timeLimit=max(time_limit, 1.0), gapRel=rel_gap)

    def solve(self, model: LinearModel, *, time_limit: float, rel_gap: float) -> SolveResult:
        """Build the PuLP problem from ``model``, solve it and map the answer back."""
        import pulp

        t0 = time.perf_counter()
        prob = pulp.LpProblem("epoch", pulp.LpMaximize)
        # PuLP 3.3 deprecates building variables apart from their problem.
        make = getattr(prob, "add_variable", None)
        xs = [
            make(f"x{i}", lo, hi, cat=pulp.LpInteger)
            if make is not None
            else pulp.LpVariable(f"x{i}", lowBound=lo, upBound=hi, cat=pulp.LpInteger)
            for i, (lo, hi) in enumerate(zip(model.lower, model.upper, strict=True))
        ]
        prob += (
            pulp.lpSum(c * xs[v] for v, c in model.objective.items()) + model.objective_offset,
            "objective",
        )
        for k, c in enumerate(model.constraints):
            expr = pulp.lpSum(int(a) * xs[int(v)] for v, a in zip(c.vars, c.coefs, strict=True))
            if c.sense == "<=":
                prob += (expr <= c.rhs, f"c{k}")
            elif c.sense == ">=":
                prob += (expr >= c.rhs, f"c{k}")
            else:
                prob += (expr == c.rhs, f"c{k}")
        remaining = max(time_limit - (time.perf_counter() - t0), 0.01)
        try:
            with quiet_stdout():
                prob.solve(self._make_solver(remaining, rel_gap))
        except Exception as exc:  # solver binaries fail in many ways; report, never raise
            return SolveResult(SolveStatus.ERROR, None, None, None, time.perf_counter() - t0, str(exc))
        seconds = time.perf_counter() - t0
        sol = prob.sol_status
        if prob.status == pulp.LpStatusInfeasible or sol == pulp.LpSolutionInfeasible:
            return SolveResult(SolveStatus.INFEASIBLE, None, None, None, seconds, "infeasible")
        if sol not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
            return SolveResult(
                SolveStatus.NO_SOLUTION, None, None, None, seconds, pulp.LpStatus[prob.status]
            )
        raw = [x.varValue for x in xs]
        if any(v is None for v in raw):
            return SolveResult(SolveStatus.NO_SOLUTION, None, None, None, seconds, "no values")
        values = np.array([round(float(v)) for v in raw], dtype=np.int64)
        objective = float(model.value(values))
        bound = _highs_bound(prob, objective, model.objective_offset)
        if sol == pulp.LpSolutionOptimal and (bound is None or bound <= objective + 1e-6):
            return SolveResult(SolveStatus.OPTIMAL, values, objective, objective, seconds, "optimal")
        return SolveResult(SolveStatus.FEASIBLE, values, objective, bound, seconds, "feasible")


def _highs_bound(prob: Any, objective: float, offset: int) -> float | None:
    """HiGHS's proven bound in the model's terms (CBC's is not exposed through PuLP).

    PuLP hands HiGHS the objective without its constant, negated for a maximization;
    HiGHS's own objective value tells which, and the bound is mapped the same way.
    """
    solver_model = getattr(prob, "solverModel", None)
    if solver_model is None or not hasattr(solver_model, "getInfo"):
        return None
    try:
        info = solver_model.getInfo()
        raw_bound = float(info.mip_dual_bound)
        raw_obj = float(info.objective_function_value)
    except Exception:  # an older highspy without the fields
        return None
    if abs(raw_bound) >= 1e300:
        return None
    for sign in (-1.0, 1.0):
        if abs(sign * raw_obj + offset - objective) <= 1e-6 * max(1.0, abs(objective)):
            return max(sign * raw_bound + offset, objective)
    return None
