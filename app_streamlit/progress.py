"""Progress of a what-if's runs: simulated hours done per run, elapsed time, an estimate.

Plain Python, fed by the sweep's callbacks (``on_hours``, ``on_point``); the page only
draws :meth:`RunProgress.lines` and :meth:`RunProgress.headline`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field


def duration_words(seconds: float) -> str:
    """``45 s``, ``3 min 20 s``, ``1 h 05 min``."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


@dataclass
class RunState:
    """One run: its simulated hours so far and when it started and finished."""

    label: str
    total_h: float
    done_h: float = 0.0
    started: float | None = None
    finished: float | None = None
    failed: str | None = None


@dataclass
class RunProgress:
    """What a what-if's runs have done so far.

    ``seconds_per_hour``: a prior for the estimate before any run has told its simulated
    hours or finished (wall seconds per simulated hour of one run, from earlier runs of
    the same scheduler on this machine), or ``None`` when there is none.
    ``parallel``: how many runs go at once (the Dask workers).
    """

    runs: dict[Hashable, RunState]
    parallel: int = 1
    seconds_per_hour: float | None = None
    clock: Callable[[], float] = time.monotonic
    started: float = field(default=0.0)

    @classmethod
    def of(
        cls,
        points: Sequence[tuple[Hashable, str]],
        total_h: float,
        parallel: int = 1,
        seconds_per_hour: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> RunProgress:
        """Progress of ``points`` (key, label), each simulating ``total_h`` hours."""
        runs = {key: RunState(label, total_h) for key, label in points}
        return cls(runs, max(1, parallel), seconds_per_hour, clock, clock())

    def hours(self, key: Hashable, done_h: float, total_h: float) -> None:
        """A running run's simulated hours (from the simulator's progress callback)."""
        run = self.runs[key]
        if run.started is None:
            run.started = self.clock()
        run.done_h, run.total_h = done_h, total_h

    def finish(self, key: Hashable, error: str | None = None) -> None:
        """A run has finished (or failed with ``error``)."""
        run = self.runs[key]
        run.finished = self.clock()
        run.done_h = run.total_h
        run.failed = error

    @property
    def elapsed(self) -> float:
        return self.clock() - self.started

    def fraction(self) -> float:
        """Simulated hours done over all hours to simulate, 0-1."""
        total = sum(r.total_h for r in self.runs.values())
        return sum(r.done_h for r in self.runs.values()) / total if total else 1.0

    def estimate_left(self) -> float | None:
        """Wall seconds still to go, or ``None`` when nothing tells yet.

        From the rate so far once any simulated hour is known; before that, from
        ``seconds_per_hour`` and the runs left, ``parallel`` at a time.
        """
        done = self.fraction()
        if done >= 1.0:
            return 0.0
        if done > 0 and self.elapsed > 0:
            return self.elapsed * (1.0 - done) / done
        if self.seconds_per_hour is None:
            return None
        hours_left = sum(r.total_h - r.done_h for r in self.runs.values())
        return max(0.0, hours_left * self.seconds_per_hour / self.parallel - self.elapsed)

    def headline(self) -> str:
        """``3 of 6 runs done · 512 of 1,008 simulated h · 1 min 10 s elapsed · about 1 min left``."""
        done = sum(1 for r in self.runs.values() if r.finished is not None)
        hours = sum(r.done_h for r in self.runs.values())
        total = sum(r.total_h for r in self.runs.values())
        parts = [
            f"{done} of {len(self.runs)} runs done",
            f"{hours:,.0f} of {total:,.0f} simulated h",
            f"{duration_words(self.elapsed)} elapsed",
        ]
        left = self.estimate_left()
        parts.append("estimate after the first run" if left is None else f"about {duration_words(left)} left")
        return " · ".join(parts)

    def lines(self) -> list[str]:
        """One line per run: its simulated hours and its time."""
        now = self.clock()
        out = []
        for run in self.runs.values():
            if run.failed is not None:
                state = f"failed: {run.failed}"
            elif run.finished is not None:
                took = run.finished - (run.started or self.started)
                state = f"done, {run.total_h:,.0f} simulated h (finished after {duration_words(took)})"
            elif run.started is not None:
                state = (
                    f"{run.done_h:,.0f} of {run.total_h:,.0f} simulated h, "
                    f"running for {duration_words(now - run.started)}"
                )
            else:
                state = f"waiting or running ({run.total_h:,.0f} h to simulate)"
            out.append(f"{run.label}: {state}")
        return out
