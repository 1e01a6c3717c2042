"""The sweep's spec: everything :func:`scenarios.sweep.run_sweep` is asked to do, as one
object, instead of the same dozen arguments repeated through every layer."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models import Scenario
from scenarios.sweep.grid import SweepBase
from scenarios.sweep.runner import HoursCallback, Runner

if TYPE_CHECKING:
    from distributed import Client


@dataclass(frozen=True)
class SweepConfig:
    """What to sweep, where to run it and what to report while it runs.

    The fields are the arguments of :func:`scenarios.sweep.sweep` (``docs/sweeps.md``,
    *Arguments*), plus three for callers that show their own progress or need more than
    the summary row (the what-if app):

    ``keep``
        Keep each point's whole runner result in :attr:`SweepReport.results` (in
        memory only; the result store keeps rows).
    ``on_point``
        ``on_point(row, result)``, called in the calling thread as each point finishes.
    ``on_hours``
        ``on_hours(point_key, hours_done, hours_total)``, called in the calling thread
        as a running point's simulated time advances (when the runner can tell it).
    """

    base: Scenario | str | Path | SweepBase
    grid: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    policies: Sequence[str] = ("fairshare",)
    seeds: Sequence[int] | None = None
    days: float | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    out: str | Path | None = None
    workers: int = 0
    scheduler: str | None = None
    client: Client | None = None
    progress: bool = False
    runner: Runner | None = None
    keep: bool = False
    on_point: Callable[[dict[str, Any], Any], None] | None = None
    on_hours: HoursCallback | None = None

    def replace(self, **changes: Any) -> SweepConfig:
        """A copy with some fields changed."""
        return replace(self, **changes)
