"""The large gang the LP splits most, held in its best branch to guide the incumbent.

The LP spreads a large gang over fractions of several starts (a 512-GPU gang at 0.56 in
slice 0, 0.21 in slice 2, ...). Whichever start a plan gives it, 64 whole nodes must be
free then, and the searches cannot move it: the work it displaces spreads over dozens
of job groups. So the gang with the most GPUs split is branched on in the LP (one
branch per start the LP gives it, one where it gets none of them), each branch
re-solved from the last basis, and held in the branch whose LP is highest. That LP
guides the roundings, the columns and the searches, and the columns, masters and
searches keep the hold while the incumbent does. The plans accepted keep the model's
own bounds. The branches cover every integer plan (each start at least its rounded-up
share, or every start at most its rounded-down share), so the highest of their LPs is
a bound on the MIP, as at the root of a branch and bound.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from planner.mip.backends.base import LpSession
from planner.mip.formulation import Formulation
from planner.mip.model import LinearModel

#: A gang of at least this many GPUs is branched on where the LP splits it.
BIG_GANG = 64
#: At most this many gangs are held (docs/formulation-passes.md, *Fortieth pass*:
#: eight, one after another, lost on five families of six).
MAX_HELD = 1
#: A gang whose starts are this close to integers in sum is left as the LP has it.
FRACTIONAL = 0.05
#: A start the LP gives less than this of the gang is no branch of its own.
BRANCH_MIN = 0.01


@dataclass
class Guide:
    """The LP with the large gangs held: its point, duals and objective, and what
    is held."""

    values: npt.NDArray[np.float64]
    duals: npt.NDArray[np.float64]
    objective: float
    #: (class index, the branch held: ``(pool, start slice)``, or ``None`` for none of
    #: the starts the LP gave it)
    held: list[tuple[int, tuple[int, int] | None]] = field(default_factory=list)
    #: held class -> its start variables and their held (lower, upper) bounds
    bounds: dict[int, dict[int, tuple[int, int]]] = field(default_factory=dict)
    lps: int = 0
    seconds: float = 0.0
    #: The highest of the first gang's branches' LPs, where every branch was solved:
    #: a bound on every integer plan (the branches cover them all).
    bound: float | None = None


def _most_split(form: Formulation, values: npt.NDArray[np.float64], done: set[int]) -> int | None:
    """The class of large gangs (:data:`BIG_GANG`) the LP splits most, by GPUs times
    the starts' distance to integers; ``None`` when it splits none."""
    table = form.start_table()
    gpus = np.array([c.gpus for c in form.epoch.classes], dtype=np.int64)
    x = values[table.var]
    frac = np.minimum(x - np.floor(x + 1e-9), np.ceil(x - 1e-9) - x).clip(min=0.0)
    split = np.zeros(len(gpus))
    np.add.at(split, table.cls, frac)
    split[list(done)] = 0.0
    split[gpus < BIG_GANG] = 0.0
    best = int(np.argmax(split * gpus)) if len(split) else 0
    return best if len(split) and split[best] >= FRACTIONAL else None


def guide_by_gangs(
    form: Formulation,
    session: LpSession,
    values: npt.NDArray[np.float64],
    duals: npt.NDArray[np.float64],
    objective: float,
    deadline: float,
) -> Guide:
    """Hold up to :data:`MAX_HELD` large gangs the LP splits, each in the branch whose
    re-solved LP is highest, by ``deadline``. ``session`` holds the LP at ``values``
    and is left with the held branches' bounds."""
    started = time.perf_counter()
    m = form.model
    lower = np.asarray(m.lower, dtype=np.float64)
    upper = np.asarray(m.upper, dtype=np.float64)
    table = form.start_table()
    guide = Guide(values, duals, objective)
    done: set[int] = set()
    while len(guide.held) < MAX_HELD and time.perf_counter() < deadline:
        c = _most_split(form, guide.values, done)
        if c is None:
            break
        done.add(c)
        rows = np.flatnonzero(table.cls == c)
        idx = table.var[rows]
        x = guide.values[idx]
        was_lo, was_hi = lower[idx].copy(), upper[idx].copy()
        # One branch per start the LP gives the gang (at least its rounded-up share
        # there), and one where each of those starts has at most its rounded-down
        # share: every integer plan is in one of them.
        on = np.flatnonzero(x >= BRANCH_MIN)
        branches: list[tuple[tuple[int, int] | None, npt.NDArray[np.float64], npt.NDArray[np.float64]]] = []
        for j in on.tolist():
            lo = was_lo.copy()
            lo[j] = max(lo[j], math.ceil(x[j] - 1e-9))
            branches.append(((int(table.pool[rows[j]]), int(table.start[rows[j]])), lo, was_hi))
        hi = was_hi.copy()
        hi[on] = np.minimum(hi[on], np.floor(x[on] + 1e-9))
        branches.append((None, was_lo, hi))
        best: tuple[float, tuple[int, int] | None, npt.NDArray[np.float64], npt.NDArray[np.float64]] | None = None
        solved = empty = 0
        for where, lo, hi in branches:
            if time.perf_counter() >= deadline:
                break
            lower[idx], upper[idx] = lo, hi
            session.set_bounds(idx, lower, upper)
            guide.lps += 1
            if session.run(deadline - time.perf_counter()):
                solved += 1
                value = session.objective()
                if best is None or value > best[0]:
                    best = (value, where, lo, hi)
            elif session.infeasible():
                empty += 1  # no integer plan in it
        if best is not None and solved + empty == len(branches) and not guide.held:
            # Only the first gang's branches cover the integer plans: a later gang's
            # are branches within the first one's.
            guide.bound = best[0]
        if best is None or solved < len(branches):
            # Out of time, or a branch unsolved: the gang as the LP has it.
            lower[idx], upper[idx] = was_lo, was_hi
            session.set_bounds(idx, lower, upper)
            session.run(max(deadline - time.perf_counter(), 0.01))
            break
        _, where, lo, hi = best
        lower[idx], upper[idx] = lo, hi
        session.set_bounds(idx, lower, upper)
        if not session.run(max(deadline - time.perf_counter(), 0.01)):
            break
        guide.values, guide.duals, guide.objective = session.values(), session.duals(), session.objective()
        guide.held.append((c, where))
        guide.bounds[c] = {int(v): (int(a), int(b)) for v, a, b in zip(idx.tolist(), lo.tolist(), hi.tolist(), strict=True)}
    guide.seconds = time.perf_counter() - started
    return guide


def hold(model: LinearModel, guide: Guide) -> LinearModel:
    """``model`` with the held gangs' bounds (its rows and objective shared)."""
    held = model.with_bounds(list(model.lower), list(model.upper), {})
    for bounds in guide.bounds.values():
        for v, (lo, hi) in bounds.items():
            held.lower[v], held.upper[v] = lo, hi
    return held


def release(held: LinearModel, whole: LinearModel, guide: Guide, incumbent: npt.NDArray[np.int64]) -> int:
    """Give the model's own bounds back to each held gang the incumbent does not keep
    (a search around the incumbent could not move it back); how many."""
    let_go = [c for c, bounds in guide.bounds.items() if any(not lo <= incumbent[v] <= hi for v, (lo, hi) in bounds.items())]
    for c in let_go:
        for v in guide.bounds.pop(c):
            held.lower[v], held.upper[v] = whole.lower[v], whole.upper[v]
    return len(let_go)
