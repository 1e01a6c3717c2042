"""The LP relaxation of a :class:`LinearModel`, solved by an LP-capable backend.

It gives the large epochs two things: a proven upper bound on the objective, and the
values that :func:`neighbourhood` uses to fix most integer variables before the MIP
backend searches the few the LP left fractional ("LP-guided fixing"). The LP itself is
solved by whichever registered backend declares ``lp_relaxation``
(:func:`planner.mip.backends.lp_backend`); this module sees only its
:class:`~planner.mip.backends.base.LpSession`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.mip.backends import lp_backend
from planner.mip.backends.base import LpCapable
from planner.mip.model import LinearModel


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
class Dive:
    """The LP optimum's bound and the values where the dive stopped."""

    bound: float
    values: npt.NDArray[np.float64]
    rounds: int
    fractional: int
    seconds: float
    #: The first LP's values (the LP optimum itself).
    lp_values: npt.NDArray[np.float64] | None = None


def dive(
    model: LinearModel,
    decisions: npt.NDArray[np.int64],
    deadline: float,
    up: float = 0.8,
    down: float = 0.4,
    keep: bool = True,
    lp: LpCapable | None = None,
    lp_deadline: float | None = None,
) -> Dive | None:
    """LP diving: round the ``decisions`` the LP leaves fractional, re-solving as it goes.

    Each round fixes fractional decisions with a fractional part of at least ``up`` to
    at least their ceiling, and those of at most ``down`` to at most their floor (the
    largest one alone when none qualifies), then re-solves the LP from its last basis.
    A round-up that makes the LP infeasible is turned into a round-down. Stops when
    every decision is integral or at ``deadline``; returns the first LP's bound and the
    last LP values (``None`` without an LP-capable backend or without an LP optimum).
    Rounding the rest down keeps every ``<=`` row of this model. The first LP may run
    until ``lp_deadline`` (default ``deadline``): its bound is worth having even when no
    time is left to round.
    """
    lp = lp or lp_backend()
    if lp is None:
        return None
    t0 = time.perf_counter()
    h = lp.open_lp(model)
    if not h.run(max(lp_deadline or deadline, deadline) - time.perf_counter()):
        return None
    bound = h.objective()
    values = h.values()
    first = values
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
            h.set_bounds(grow, lower, upper)
        cand = decisions[fractional]
        parts = part[fractional]
        raise_ = cand[parts >= up]
        lower_ = cand[parts <= down]
        if len(raise_) == 0 and len(lower_) == 0:
            raise_ = cand[[int(np.argmax(parts))]]
        old_lower = lower[raise_].copy()
        lower[raise_] = np.ceil(values[raise_] - 1e-9)
        upper[lower_] = np.floor(values[lower_] + 1e-9)
        h.set_bounds(raise_, lower, upper)
        h.set_bounds(lower_, lower, upper)
        started = time.perf_counter()
        ok = h.run(deadline - started)
        last_run = time.perf_counter() - started
        if not ok:
            lower[raise_] = old_lower
            upper[raise_] = np.floor(values[raise_] + 1e-9)
            h.set_bounds(raise_, lower, upper)
            if not h.run(deadline - time.perf_counter()):
                break
        values = h.values()
    return Dive(bound, values, rounds, left, time.perf_counter() - t0, first)


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
