import pytest

from models import Job, drain_guard, keeps_running, spare_seconds


@pytest.mark.parametrize(("resumable", "min_runtime", "charged", "progress", "kept"), [
    (False, 900.0, True, 0.0, True),      # charged non-resumable funded work: always
    (False, 900.0, False, 1200.0, True),  # uncharged, more than a slice of progress
    (False, 900.0, False, 600.0, False),  # uncharged, just started: little to lose
    (True, 900.0, False, 7200.0, False),  # resumable: a restart loses the overhead only
    (False, 0.0, False, 7200.0, False),   # unallocated: free work, always preemptible
])
def test_the_plan_keeps_funded_non_resumable_work_with_progress_to_lose(
    resumable: bool, min_runtime: float, charged: bool, progress: float, kept: bool
) -> None:
    """Funded non-resumable work runs to completion once charged, or once it has run
    uncharged for more than a slice (15 min)."""
    job = Job(id="r", project="a", gpus=8, duration=14400.0, min_runtime=min_runtime,
              resumable=resumable)
    assert keeps_running(job, charged, progress, slice_len=900.0) is kept


def test_spare_time_is_a_slice_but_at_least_a_quarter_hour() -> None:
    """Short slices (75 s) would spare a job for almost nothing."""
    assert (spare_seconds(75.0), spare_seconds(1800.0)) == (900.0, 1800.0)


@pytest.mark.parametrize(("resumable", "min_runtime", "charged", "remaining", "guard"), [
    (False, 900.0, True, 10800.0, 10800.0),  # runs out: a drain would lose all 3 h
    (False, 900.0, False, 10800.0, 10800.0),  # uncharged funded work runs out too
    (False, 1800.0, True, 600.0, 1800.0),    # the contract outlasts what is left
    (False, 1800.0, True, None, 1800.0),     # unknown duration: the contract alone
    (True, 1800.0, True, 10800.0, 1800.0),   # resumable: a drain costs a restart only
    (True, 1800.0, False, 10800.0, 0.0),     # uncharged resumable: preemptible any time
    (False, 0.0, False, 10800.0, 0.0),       # unallocated: free work, preemptible
])
def test_a_start_keeps_clear_of_maintenance_for_its_contract_or_what_a_drain_would_lose(
    resumable: bool, min_runtime: float, charged: bool, remaining: float | None, guard: float
) -> None:
    """Funded non-resumable work keeps clear of a window for its declared remaining
    time; other work for its contract when charged."""
    job = Job(id="r", project="a", gpus=8, duration=14400.0, min_runtime=min_runtime,
              resumable=resumable)
    assert drain_guard(job, charged, remaining) == guard
