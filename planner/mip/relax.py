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
from typing import Any

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


def _highs_lp(model: LinearModel, time_limit: float) -> Any:
    """A HiGHS object holding the LP relaxation of ``model`` (not yet solved)."""
    import highspy

    n = model.num_vars
    cost = np.zeros(n)
    for v, coef in model.objective.items():
        cost[v] = -coef  # HiGHS minimizes
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
    lp.col_lower_ = np.asarray(model.lower, dtype=np.float64)
    lp.col_upper_ = np.asarray(model.upper, dtype=np.float64)
    lp.row_lower_ = row_lo
    lp.row_upper_ = row_hi
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.asarray(starts, dtype=np.int32)
    lp.a_matrix_.index_ = a_index
    lp.a_matrix_.value_ = a_value
    h.passModel(lp)
    return h


def _optimal(h: Any) -> bool:
    import highspy

    return bool(h.getModelStatus() == highspy.HighsModelStatus.kOptimal)


def solve_relaxation(model: LinearModel, time_limit: float) -> Relaxation | None:
    """Solve the LP relaxation; ``None`` when HiGHS is missing or finds no optimum."""
    if not lp_available():
        return None
    t0 = time.perf_counter()
    h = _highs_lp(model, time_limit)
    h.run()
    if not _optimal(h):
        return None
    values = np.asarray(h.getSolution().col_value, dtype=np.float64)
    bound = -float(h.getInfo().objective_function_value) + model.objective_offset
    return Relaxation(values, bound, time.perf_counter() - t0)


@dataclass(frozen=True)
class Dive:
    """The LP optimum's bound and the values where the dive stopped."""

    bound: float
    values: npt.NDArray[np.float64]
    rounds: int
    fractional: int
    seconds: float


def dive(
    model: LinearModel,
    decisions: npt.NDArray[np.int64],
    deadline: float,
    up: float = 0.8,
    down: float = 0.4,
    keep: bool = True,
) -> Dive | None:
    """LP diving: round the ``decisions`` the LP leaves fractional, re-solving as it goes.

    Each round fixes fractional decisions with a fractional part of at least ``up`` to
    at least their ceiling, and those of at most ``down`` to at most their floor (the
    largest one alone when none qualifies), then re-solves the LP from its last basis.
    A round-up that makes the LP infeasible is turned into a round-down. Stops when
    every decision is integral or at ``deadline``; returns the first LP's bound and the
    last LP values (``None`` without HiGHS or without an LP optimum). Rounding the rest
    down keeps every ``<=`` row of this model.
    """
    if not lp_available():
        return None
    t0 = time.perf_counter()
    h = _highs_lp(model, max(deadline - t0, 0.01))
    h.run()
    if not _optimal(h):
        return None
    bound = -float(h.getInfo().objective_function_value) + model.objective_offset
    values = np.asarray(h.getSolution().col_value, dtype=np.float64)
    rounds = 0
    left = 0
    upper = np.asarray(model.upper, dtype=np.float64)
    lower = np.asarray(model.lower, dtype=np.float64)
    last_run = time.perf_counter() - t0
    # Stop when the next re-solve (about as long as the last) would pass the deadline.
    while time.perf_counter() + last_run < deadline:
        d = values[decisions]
        part = d - np.floor(d + 1e-9)
        fractional = (part > 1e-6) & (part < 1 - 1e-6)
        left = int(fractional.sum())
        if not left:
            break
        rounds += 1
        if keep:
            # Decisions the LP already made integral keep at least their value, so each
            # round has fewer to settle (the dive converges instead of churning).
            settled = decisions[~fractional]
            grow = settled[lower[settled] < np.round(values[settled])]
            lower[grow] = np.round(values[grow])
            _set_bounds(h, grow, lower, upper)
        cand = decisions[fractional]
        parts = part[fractional]
        raise_ = cand[parts >= up]
        lower_ = cand[parts <= down]
        if len(raise_) == 0 and len(lower_) == 0:
            raise_ = cand[[int(np.argmax(parts))]]
        old_lower = lower[raise_].copy()
        lower[raise_] = np.ceil(values[raise_] - 1e-9)
        upper[lower_] = np.floor(values[lower_] + 1e-9)
        _set_bounds(h, raise_, lower, upper)
        _set_bounds(h, lower_, lower, upper)
        # HiGHS's clock runs across calls: the limit is the time since it was made.
        h.setOptionValue("time_limit", max(deadline - t0, 0.01))
        started = time.perf_counter()
        h.run()
        last_run = time.perf_counter() - started
        if not _optimal(h):
            lower[raise_] = old_lower
            upper[raise_] = np.floor(values[raise_] + 1e-9)
            _set_bounds(h, raise_, lower, upper)
            h.run()
            if not _optimal(h):
                break
        values = np.asarray(h.getSolution().col_value, dtype=np.float64)
    return Dive(bound, values, rounds, left, time.perf_counter() - t0)


def _set_bounds(
    h: Any,
    idx: npt.NDArray[np.int64],
    lower: npt.NDArray[np.float64],
    upper: npt.NDArray[np.float64],
) -> None:
    if len(idx):
        cols = np.asarray(idx, dtype=np.int32)
        h.changeColsBounds(len(cols), cols, lower[cols], upper[cols])


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
