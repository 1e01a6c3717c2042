"""Solver backends behind one :class:`Backend` protocol, in an explicit registry.

Each backend turns a :class:`~planner.mip.model.LinearModel` into its solver's own
objects, solves it and maps the answer onto :class:`SolveResult`; no solver handle
leaves its module.
"""

from __future__ import annotations

from planner.mip.backends.base import Backend, Capabilities, Laned, LpCapable, SolveResult
from planner.mip.backends.cpsat import CpSatBackend
from planner.mip.backends.pulp import PulpBackend

BACKENDS: dict[str, Backend] = {
    "cpsat": CpSatBackend(),
    "pulp": PulpBackend(),
}


def get_backend(name: str) -> Backend:
    """The backend registered under ``name``; raises ``KeyError`` naming the known ones."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise KeyError(f"unknown backend {name!r} (known: {', '.join(BACKENDS)})") from None


def available_backends() -> list[str]:
    """Names of the backends whose solver is installed."""
    return [name for name, b in BACKENDS.items() if b.is_available()]


def lp_backend() -> LpCapable | None:
    """The first registered, installed backend that declares ``lp_relaxation``."""
    for b in BACKENDS.values():
        if b.capabilities.lp_relaxation and isinstance(b, LpCapable) and b.is_available():
            return b
    return None


__all__ = [
    "BACKENDS",
    "Backend",
    "Capabilities",
    "Laned",
    "LpCapable",
    "SolveResult",
    "available_backends",
    "get_backend",
    "lp_backend",
]
