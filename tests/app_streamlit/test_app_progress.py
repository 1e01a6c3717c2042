"""Progress of a what-if's runs: simulated hours, elapsed time and the estimate."""

from __future__ import annotations

import pytest

from app_streamlit.progress import RunProgress, duration_words


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_estimate_follows_the_simulated_hours_done() -> None:
    """Half the simulated hours done in 60 s leaves about 60 s."""
    clock = Clock()
    progress = RunProgress.of([("a", "current"), ("b", "edited")], total_h=24, clock=clock)
    clock.now += 60
    progress.hours("a", 24, 24)
    assert progress.fraction() == pytest.approx(0.5)
    assert progress.estimate_left() == pytest.approx(60.0)
    assert "1 min 00 s elapsed" in progress.headline() and "about 1 min 00 s left" in progress.headline()


def test_before_any_hour_the_estimate_comes_from_earlier_runs() -> None:
    """With no hour told yet, earlier seconds per simulated hour and the parallel runs give the estimate."""
    clock = Clock()
    progress = RunProgress.of([("a", "x"), ("b", "y")], total_h=10, parallel=2, seconds_per_hour=3.0, clock=clock)
    assert progress.estimate_left() == pytest.approx(30.0)
    assert RunProgress.of([("a", "x")], total_h=10, clock=clock).estimate_left() is None


def test_each_run_has_a_line_with_its_hours() -> None:
    """A running run shows its simulated hours; a finished one says done; a failed one its error."""
    clock = Clock()
    progress = RunProgress.of([("a", "current"), ("b", "edited"), ("c", "other")], total_h=168, clock=clock)
    progress.hours("a", 42, 168)
    progress.finish("b")
    progress.finish("c", "boom")
    lines = progress.lines()
    assert lines[0].startswith("current: 42 of 168 simulated h")
    assert lines[1].startswith("edited: done, 168 simulated h")
    assert lines[2] == "other: failed: boom"
    assert "2 of 3 runs done" in progress.headline()


@pytest.mark.parametrize(("seconds", "text"), [(5, "5 s"), (200, "3 min 20 s"), (3900, "1 h 05 min")])
def test_durations_read_like_a_clock(seconds: float, text: str) -> None:
    """Elapsed times and estimates print in s, min and h."""
    assert duration_words(seconds) == text
