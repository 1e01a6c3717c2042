"""The live status models: histogram arithmetic and validation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from models import Histogram, LiveStatus


def test_histogram_counts_each_sample_in_its_bucket() -> None:
    """A sample lands in the first bucket whose bound is at or above it; sums add up."""
    h = Histogram(bounds=(1.0, 10.0)).observe(1.0).observe(5.0).observe(50.0)
    assert h.counts == (1, 1, 1)
    assert h.cumulative() == [(1.0, 1), (10.0, 2), (float("inf"), 3)]
    assert (h.count, h.sum) == (3, 56.0)


def test_histogram_needs_one_count_more_than_bounds() -> None:
    """Counts that do not match the bounds are refused."""
    with pytest.raises(ValidationError, match="counts needs 3 entries"):
        Histogram(bounds=(1.0, 2.0), counts=(1, 2))


def test_live_status_refuses_unknown_keys() -> None:
    """A status with an unknown key is refused (files are contracts)."""
    with pytest.raises(ValidationError, match="extra"):
        LiveStatus.model_validate({"at": 0, "wall": 0, "surprise": 1})
