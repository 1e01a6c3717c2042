"""The LP relaxation of a :class:`LinearModel`, solved by an LP-capable backend.

It gives the large epochs two things: a proven upper bound on the objective, and the
values that the planner rounds into its first incumbents and compares with each
incumbent to choose the next neighbourhood (:mod:`planner.mip`). The LP itself is
solved by whichever registered backend declares ``lp_relaxation``
(:func:`planner.mip.backends.lp_backend`); this module sees only its
:class:`~planner.mip.backends.base.LpSession`.
"""

from __future__ import annotations

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
