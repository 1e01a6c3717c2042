"""The backend protocol and the solver-neutral result."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from models import SolveStatus
from planner.mip.model import Constraint, LinearModel


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


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do beyond :meth:`Backend.solve`, declared, never probed.

    The planner reads these to decide what to ask for; a backend that does not declare a
    capability is never asked to use it.
    """

    #: Takes ``LinearModel.hint`` as a complete starting solution (a MIP start).
    warm_start: bool = False
    #: Takes a partial ``hint`` (values for some variables) to guide its search.
    hints: bool = False
    #: Solves the LP relaxation, incrementally (:class:`LpCapable`): the LP-guided path
    #: asks the registry for such a backend.
    lp_relaxation: bool = False
    #: Its LP sessions also solve their model with every variable integer
    #: (:meth:`LpSession.run_integer`): the Lagrangian bound then solves its parts
    #: exactly instead of branching on their LPs (``planner.mip.relax``).
    integer_parts: bool = False
    #: Returns a few incumbents found before its last one (``SolveResult.earlier``).
    earlier_incumbents: bool = False
    #: Stops at its first incumbent reaching ``LinearModel.stop_at``.
    stop_at_bound: bool = False
    #: Can start its solver ahead of the first solve (:class:`Prestarting`).
    prestart: bool = False
    #: Gives a one-worker copy of itself for a lane (:class:`Laned`): a decomposed
    #: epoch then plans its parts side by side, one process per core.
    lanes: bool = False
    #: How many models :meth:`Concurrent.solve_many` searches at once, one search worker
    #: each on its own core (0: the backend has no ``solve_many``). The planner then
    #: searches that many neighbourhoods side by side, at most ``planner.mip.SIDE_BY_SIDE``.
    concurrent: int = 0

    @property
    def takes_hint(self) -> bool:
        """Whether a ``hint`` helps at all: as a MIP start or as a partial guide."""
        return self.warm_start or self.hints

    def names(self) -> list[str]:
        """The declared capabilities, by field name."""
        return [k for k, v in self.__dict__.items() if v]


class Backend(Protocol):
    """A MIP solver fed from a :class:`LinearModel`."""

    name: str
    capabilities: Capabilities

    def is_available(self) -> bool:
        """Whether the solver is installed (cheap: never imports the solver)."""
        ...

    def solve(self, model: LinearModel, *, time_limit: float, rel_gap: float) -> SolveResult:
        """Maximize ``model`` within ``time_limit`` seconds, stopping at ``rel_gap``."""
        ...


@runtime_checkable
class Prestarting(Protocol):
    """A backend that can start its solver (process, imports) ahead of the first solve."""

    def warm(self) -> None:
        """Start the solver without waiting for it."""
        ...


@runtime_checkable
class Concurrent(Protocol):
    """A backend that searches several models at once (declares ``capabilities.concurrent``)."""

    def solve_many(
        self, models: list[LinearModel], *, time_limit: float, rel_gap: float | Sequence[float]
    ) -> list[SolveResult]:
        """Maximize each of ``models`` (at most ``capabilities.concurrent``), all at once,
        within ``time_limit`` seconds, each to ``rel_gap`` (one for all, or one per
        model); the results in the models' order."""
        ...


def each_gap(rel_gap: float | Sequence[float], count: int) -> list[float]:
    """The gap of each of ``count`` models in :meth:`Concurrent.solve_many`: ``rel_gap``
    for all, or one per model as given."""
    if isinstance(rel_gap, (int, float)):
        return [float(rel_gap)] * count
    gaps = list(rel_gap)
    if len(gaps) != count:
        raise ValueError(f"{len(gaps)} gaps for {count} models")
    return gaps


@runtime_checkable
class Laned(Protocol):
    """A backend that can plan in lanes (declares ``capabilities.lanes``)."""

    name: str
    capabilities: Capabilities

    def for_lane(self) -> Backend:
        """A picklable copy for one lane: one search worker, solving in the lane's own
        process (the lane is the isolation)."""
        ...


class LpSession(Protocol):
    """One LP relaxation held by a solver, re-solved as variable bounds change."""

    def run(self, time_limit: float) -> bool:
        """(Re-)solve from the last basis within ``time_limit`` seconds; whether optimal."""
        ...

    def infeasible(self) -> bool:
        """Whether the last :meth:`run` proved the LP infeasible (not merely unsolved:
        out of time, or a numerical failure, reads ``False``)."""
        ...

    def values(self) -> npt.NDArray[np.float64]:
        """The last optimum's variable values."""
        ...

    def objective(self) -> float:
        """The last optimum's objective (maximized, offset included)."""
        ...

    def duals(self) -> npt.NDArray[np.float64]:
        """The last optimum's row duals for the maximized objective (``<=`` rows >= 0,
        ``>=`` rows <= 0)."""
        ...

    def set_bounds(
        self,
        idx: npt.NDArray[np.int64],
        lower: npt.NDArray[np.float64],
        upper: npt.NDArray[np.float64],
    ) -> None:
        """Set the bounds of variables ``idx`` to ``lower[idx]``, ``upper[idx]``."""
        ...

    def set_objective(self, objective: npt.NDArray[np.float64]) -> None:
        """Maximize ``objective`` (one coefficient per variable; the offset stays) from
        now on, keeping the last basis to start from."""
        ...

    def set_coefs(
        self, rows: npt.NDArray[np.int64], idx: npt.NDArray[np.int64], coefs: npt.NDArray[np.int64]
    ) -> None:
        """Make ``coefs[i]`` the coefficient of variable ``idx[i]`` in row ``rows[i]``,
        keeping the last basis to start from."""
        ...

    def add_rows(self, rows: Sequence[Constraint]) -> None:
        """Append ``rows`` (over the session's variables) after its last row, keeping
        the last basis to start from."""
        ...

    def drop_rows(self, first: int) -> None:
        """Remove the rows from index ``first`` on (those :meth:`add_rows` appended)."""
        ...

    def run_integer(
        self, time_limit: float, start: npt.NDArray[np.int64] | None = None
    ) -> IntegerAnswer | None:
        """Solve the session's model with every variable integer, within ``time_limit``
        (only for backends that declare ``integer_parts``), from the integer point
        ``start`` when given (it must keep every row); ``None`` when not even a bound
        came out of it."""
        ...


@dataclass(frozen=True)
class IntegerAnswer:
    """What :meth:`LpSession.run_integer` proved: an upper bound of the integer optimum
    (maximized, offset included), whether it is that optimum, and the best integer
    point found (``None`` when none was)."""

    bound: float
    exact: bool
    values: npt.NDArray[np.float64] | None


@runtime_checkable
class LpCapable(Protocol):
    """A backend that solves LP relaxations (declares ``capabilities.lp_relaxation``)."""

    name: str
    capabilities: Capabilities

    def is_available(self) -> bool:
        """Whether the solver is installed."""
        ...

    def open_lp(
        self, model: LinearModel, objective: npt.NDArray[np.float64] | None = None
    ) -> LpSession:
        """The LP relaxation of ``model``, not yet solved; ``objective``, when given,
        replaces the model's (one float per variable, maximized, the offset kept)."""
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
