"""The LP relaxation of a :class:`LinearModel`, solved with HiGHS (``highspy``).

It gives the large epochs two things: a proven upper bound on the objective, and the
values that :func:`neighbourhood` uses to fix most integer variables before the MIP
backend searches the few the LP left fractional ("LP-guided fixing").
"""

from __future__ import annotations

import importlib.util
import math
import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.mip.backends.base import quiet_stdout
from planner.mip.model import LinearModel


@dataclass(frozen=True)
class Relaxation:
    """The LP optimum: values (floats) and objective, an upper bound of the MIP's."""

    values: npt.NDArray[np.float64]
    bound: float
    seconds: float


def lp_available() -> bool:
    """Whether HiGHS is installed (without importing it)."""
    return importlib.util.find_spec("highspy") is not None


def solve_relaxation(model: LinearModel, time_limit: float) -> Relaxation | None:
    """Solve the LP relaxation; ``None`` when HiGHS is missing or finds no optimum."""
    if not lp_available():
        return None
    import highspy

    t0 = time.perf_counter()
    n = model.num_vars
    cost = np.zeros(n)
    for v, coef in model.objective.items():
        cost[v] = -coef  # HiGHS minimizes
    lower = np.asarray(model.lower, dtype=np.float64)
    upper = np.asarray(model.upper, dtype=np.float64)
    starts = [0]
    index: list[npt.NDArray[np.int64]] = []
    value: list[npt.NDArray[np.int64]] = []
    row_lo = np.empty(len(model.constraints))
    row_hi = np.empty(len(model.constraints))
    for i, c in enumerate(model.constraints):
        index.append(c.vars)
        value.append(c.coefs)
        starts.append(starts[-1] + len(c.vars))
        row_lo[i] = c.rhs if c.sense in (">=", "==") else -highspy.kHighsInf
        row_hi[i] = c.rhs if c.sense in ("<=", "==") else highspy.kHighsInf
    a_index = np.concatenate(index).astype(np.int32) if index else np.zeros(0, np.int32)
    a_value = np.concatenate(value).astype(np.float64) if value else np.zeros(0)
    with quiet_stdout():
        h = highspy.Highs()  # type: ignore[no-untyped-call]
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", max(time_limit, 0.01))
    h.setOptionValue("threads", 1)
    lp = highspy.HighsLp()
    lp.num_col_ = n
    lp.num_row_ = len(model.constraints)
    lp.col_cost_ = cost
    lp.col_lower_ = lower
    lp.col_upper_ = upper
    lp.row_lower_ = row_lo
    lp.row_upper_ = row_hi
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.asarray(starts, dtype=np.int32)
    lp.a_matrix_.index_ = a_index
    lp.a_matrix_.value_ = a_value
    h.passModel(lp)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    values = np.asarray(h.getSolution().col_value, dtype=np.float64)
    bound = -float(h.getInfo().objective_function_value) + model.objective_offset
    return Relaxation(values, bound, time.perf_counter() - t0)


def neighbourhood(
    model: LinearModel,
    relax: Relaxation,
    groups: list[list[int]],
    loose: list[int],
    radius: int = 1,
    incumbent: npt.NDArray[np.int64] | None = None,
) -> LinearModel:
    """A copy of ``model`` with most variables fixed at their LP values.

    A variable the LP set to an integer is fixed there, unless it shares a group (the
    variables of one job class, or one project's utility) with a fractional one: a whole
    group stays free around its LP values (``floor - radius .. ceil + radius``), so the MIP can move
    a job between pools and start slices to repair the rounding. The ranges are widened
    to contain ``incumbent``, which becomes the warm start.
    """
    vals = relax.values
    frac = np.abs(vals - np.round(vals)) > 1e-6
    free = frac.copy()
    for g in groups:
        if any(frac[v] for v in g):
            free[g] = True
    out = LinearModel(
        names=model.names,
        lower=list(model.lower),
        upper=list(model.upper),
        constraints=model.constraints,
        objective=model.objective,
        objective_offset=model.objective_offset,
        hint={},
    )
    loose_set = set(loose)
    for v in range(model.num_vars):
        x = float(vals[v])
        if v in loose_set:
            pass
        elif free[v]:
            out.lower[v] = max(model.lower[v], math.floor(x + 1e-6) - radius)
            out.upper[v] = min(model.upper[v], math.ceil(x - 1e-6) + radius)
        else:
            fixed = min(max(round(x), model.lower[v]), model.upper[v])
            out.lower[v] = out.upper[v] = fixed
        if incumbent is not None:
            inc = int(incumbent[v])
            out.lower[v] = min(out.lower[v], inc)
            out.upper[v] = max(out.upper[v], inc)
            out.hint[v] = inc
        else:
            out.hint[v] = min(max(math.floor(x + 1e-6), out.lower[v]), out.upper[v])
    return out
