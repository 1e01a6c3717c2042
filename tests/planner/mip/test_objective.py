"""The objective's coefficients that do not need a model to check."""

from __future__ import annotations

import pytest

from planner.mip.objective import preempt_slices


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
