"""Plain-words state lines (planner.reasons): one test per kind of line."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from models import PendingReason
from planner import reasons
from planner.reasons import WaitFacts

T = datetime(2026, 12, 1, 14, 5, tzinfo=UTC).timestamp()


def test_fair_share_line_names_the_standing_and_the_jobs_ahead() -> None:
    """A fair-share wait says how far ahead of its share the project is and who goes first."""
    line = reasons.waiting(
        PendingReason.FAIR_SHARE_RANK, WaitFacts(project="research/nlp", ratio=1.3, jobs_ahead=3)
    )
    assert line == (
        "waiting: project research/nlp is at 130 % of its share this week; "
        "3 jobs of projects further below go first"
    )


def test_fair_share_line_with_one_job_ahead_and_a_short_lookback() -> None:
    """One job ahead is singular, and a lookback other than a week is named."""
    line = reasons.waiting(
        PendingReason.FAIR_SHARE_RANK,
        WaitFacts(project="cv", ratio=0.5, jobs_ahead=1, lookback_s=3 * 86400),
    )
    assert line == "waiting: project cv is at 50 % of its share over the last 3d; 1 job of a project further below goes first"


@pytest.mark.parametrize("reason", list(PendingReason))
def test_every_reason_has_a_waiting_line_without_numbers(reason: PendingReason) -> None:
    """Each pending reason maps to a sentence, also when no numbers are known."""
    line = reasons.waiting(reason)
    assert line.startswith("waiting")
    assert reasons.REASON_SENTENCES[reason] in line


def test_gang_hole_line_says_how_many_gpus_are_free() -> None:
    """A gang waiting for a hole says what it needs and what is free, but in the wrong shape."""
    line = reasons.waiting(
        PendingReason.NO_GANG_HOLE, WaitFacts(gpus=64, free_gpus=40, pools=("alpha/H100",))
    )
    assert line == (
        "waiting for a gang hole: needs 64 GPUs on whole nodes; 40 are free (alpha/H100), "
        "but not in its shape"
    )


def test_contracts_line_says_when_the_first_contract_ends() -> None:
    """Waiting for contracts gives the time the first one ends."""
    line = reasons.waiting(PendingReason.CONTRACTS, WaitFacts(contracts_end=T), now=T - 60, tz=UTC)
    assert line.startswith("waiting for contracts to end: ")
    assert line.endswith("the first ends at 14:05")


def test_budget_line_names_the_project_and_its_headroom() -> None:
    """A budget-exhausted wait names the project and what it has left."""
    line = reasons.waiting(
        PendingReason.BUDGET_EXHAUSTED, WaitFacts(project="research/nlp", headroom_gpu_h=0.0)
    )
    assert line == (
        "waiting: budget exhausted: project research/nlp has used its budget (headroom 0.0 "
        "GPU-h); it may run only on idle GPUs, unallocated"
    )


def test_maintenance_line_counts_drained_nodes() -> None:
    """A maintenance wait counts the drained nodes."""
    line = reasons.waiting(PendingReason.MAINTENANCE, WaitFacts(drained_nodes=2))
    assert line == (
        "waiting for maintenance: the only nodes it fits on are down for maintenance, or go "
        "down before its minimum runtime would end (2 nodes drained)"
    )


def test_priority_line_counts_the_jobs_of_its_own_project() -> None:
    """A priority wait counts the project's own jobs that go first."""
    line = reasons.waiting(PendingReason.PRIORITY, WaitFacts(project="cv", ahead_in_project=2))
    assert line == "waiting: 2 jobs of project cv with higher priority or urgency go first"


def test_pool_capacity_line_lists_the_pools() -> None:
    """A capacity wait lists the pools the job may use."""
    line = reasons.waiting(PendingReason.POOL_CAPACITY, WaitFacts(pools=("a/H100", "b/B200")))
    assert line == "waiting: the cluster is full: every GPU it may use is taken (a/H100, b/B200)"


def test_waiting_for_plan_gives_the_submit_time() -> None:
    """A job that arrived after the last plan says so, with its submit time."""
    assert reasons.waiting_for_plan(T, now=T, tz=UTC) == "waiting to be planned (submitted 14:05)"


def test_running_under_contract_until_a_time() -> None:
    """A job inside its minimum runtime shows when its contract ends."""
    assert reasons.running_under_contract(T, now=T - 3600, tz=UTC) == "running under contract until 14:05"


def test_time_on_another_day_carries_the_date() -> None:
    """A time that is not today is shown with its date."""
    assert reasons.running_under_contract(T, now=T - 86400, tz=UTC) == (
        "running under contract until 2026-12-01 14:05"
    )


def test_running_preemptible_funded_and_free() -> None:
    """Preemptible running work says whether it is past its contract or free work."""
    assert reasons.running_preemptible() == "running preemptible (past its minimum runtime)"
    assert reasons.running_preemptible(charged=False) == "running preemptible (unallocated, on idle GPUs)"


def test_preempted_line_says_when_and_who_took_the_nodes() -> None:
    """A preemption line gives the time and the jobs that took its nodes."""
    line = reasons.preempted(T, reasons.because_fair_share([("j7", "research/cv")]), now=T, tz=UTC)
    assert line == (
        "preempted at 14:05 because its minimum runtime had ended and its nodes went to "
        "j7 (research/cv), ranked ahead by fair share"
    )


def test_preempted_for_maintenance_names_the_nodes() -> None:
    """A preemption for maintenance names the drained node."""
    line = reasons.preempted(T, reasons.because_maintenance(["alpha-h100-000"]), now=T, tz=UTC)
    assert line == "preempted at 14:05 because node alpha-h100-000 is drained for maintenance"


def test_many_takers_are_cut_to_three() -> None:
    """More than three takers are summarised, so the line stays short."""
    text = reasons.because_fair_share([(f"j{i}", "p") for i in range(5)], charged=False)
    assert text == (
        "it ran unallocated (free work) and its nodes went to j0 (p), j1 (p), j2 (p) and 2 "
        "more, ranked ahead by fair share"
    )


@pytest.mark.parametrize(
    ("seconds", "text"), [(12, "12s"), (720, "12m"), (3 * 3600 + 300, "3h05m"), (2 * 86400 + 4 * 3600, "2d04h")]
)
def test_wait_text(seconds: float, text: str) -> None:
    """Waits read as seconds, minutes, hours and minutes, or days and hours."""
    assert reasons.wait_text(seconds) == text


def test_running_picks_contract_or_preemptible_by_the_clock() -> None:
    """A running job is under contract before its contract ends and preemptible after."""
    assert reasons.running(T, T - 60, tz=UTC) == "running under contract until 14:05"
    assert reasons.running(T, T + 60, charged=False, tz=UTC) == "running preemptible (unallocated, on idle GPUs)"
    assert reasons.running(float("inf"), T).startswith("running under contract (its minimum runtime is not known")
