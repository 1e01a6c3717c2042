"""The objective's coefficients that do not need a model to check."""

from __future__ import annotations

import pytest

from planner.mip.epoch import build_epoch
from planner.mip.objective import marginal_slope, preempt_slices, segment_ends

from .conftest import SnapBuilder


@pytest.mark.parametrize(
    ("slice_len", "lost", "expected"),
    [
        (900.0, 120.0, 4 + 120 / 900),  # the default slices: 4 slices plus the overhead
        (900.0, 36000.0, 8.0),  # much progress lost: capped at 8 slices
        (1800.0, 0.0, 4.0),  # longer slices: still 4 of them
        (75.0, 120.0, 48 + 120 / 75),  # 75 s slices: an hour of work, not 5 minutes
        (75.0, 36000.0, 96.0),  # capped at two hours
    ],
)
def test_a_preemption_costs_four_slices_and_at_least_an_hour(slice_len, lost, expected):
    assert preempt_slices(slice_len, lost) == pytest.approx(expected)


def test_segments_end_at_half_once_and_twice_the_owed_quanta() -> None:
    """Owed 8 GPUs of a one-hour epoch in 15-minute slices: 320 quanta, so the segments
    end at 160, 320 and 640 charged quanta, and the slope steps down at each end."""
    b = SnapBuilder().pool(nodes=2).project("a", owed=8)
    epoch = build_epoch(b.queued("a1", "a").build())
    assert epoch.target_q["a"] == 320
    assert segment_ends(epoch, "a") == [160, 320, 640]
    slopes = [marginal_slope(epoch, "a", q) for q in (159, 160, 319, 320, 639, 640)]
    assert slopes == [800, 400, 400, 100, 100, 25]
