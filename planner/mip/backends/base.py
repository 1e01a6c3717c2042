"""The backend protocol and the solver-neutral result."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from models import SolveStatus
from planner.mip.model import LinearModel


@dataclass(frozen=True)
class SolveResult:
    """What every backend returns: one status, the values (when an incumbent exists).

    ``bound`` is the best proven upper bound of the (maximized) objective, when the
    solver reports one. ``earlier`` holds a few incumbents found before ``values``,
    newest first, from backends that report them (the LP-guided search places each, as
    a slightly worse model answer can lose less to node placement).
    """

    status: SolveStatus
    values: npt.NDArray[np.int64] | None
    objective: float | None
    bound: float | None
    seconds: float
    message: str = ""
    earlier: tuple[npt.NDArray[np.int64], ...] = ()

    @property
    def gap(self) -> float | None:
        """Relative gap ``(bound - objective) / max(|bound|, 1)``, when both are known."""
        if self.objective is None or self.bound is None:
            return None
        return max(self.bound - self.objective, 0.0) / max(abs(self.bound), 1.0)


class Backend(Protocol):
    """A MIP solver fed from a :class:`LinearModel`."""

    name: str

    def is_available(self) -> bool:
        """Whether the solver is installed (cheap: never imports the solver)."""
        ...

    def solve(self, model: LinearModel, *, time_limit: float, rel_gap: float) -> SolveResult:
        """Maximize ``model`` within ``time_limit`` seconds, stopping at ``rel_gap``."""
        ...


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    """Silence the solver's own banner, which it writes straight to file descriptor 1."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no real stdout (some embedders): nothing to silence
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
