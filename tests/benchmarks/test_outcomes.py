"""``benchmarks/outcomes.py``: the verdict that says whether ``mip`` is at least as good
as ``fairshare`` beyond noise."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest


@pytest.fixture
def outcomes(benchmark_script: Callable[[str], ModuleType]) -> ModuleType:
    return benchmark_script("outcomes")


def paired(better: int, worse: int, ties: int = 0) -> tuple[list[float | None], list[float | None]]:
    """fairshare and mip preemption counts (lower is better) with that many replicates
    where mip is better, worse and even."""
    fair: list[float | None] = [10.0] * (better + worse + ties)
    mip: list[float | None] = [9.0] * better + [11.0] * worse + [10.0] * ties
    return fair, mip


def test_a_loss_in_most_of_many_replicates_is_no(outcomes: ModuleType) -> None:
    """With 30 replicates, mip better in 10 and worse in 20 is a loss beyond noise."""
    assert outcomes.verdict("preemptions", *paired(10, 20)) == "NO"


def test_a_loss_the_sign_test_does_not_separate_is_noise(outcomes: ModuleType) -> None:
    """Better in 11 of 30 replicates, worse in 19: worse in the median, but not beyond noise."""
    assert outcomes.verdict("preemptions", *paired(11, 19)) == "noise"


def test_worse_in_every_one_of_few_replicates_is_no(outcomes: ModuleType) -> None:
    """Four replicates cannot pass the sign test; worse in all four is still NO."""
    assert outcomes.verdict("preemptions", *paired(0, 4)) == "NO"


def test_ties_do_not_hide_a_one_sided_loss(outcomes: ModuleType) -> None:
    """Worse in 8 replicates, even in 22, never better: NO, although the median is even."""
    assert outcomes.verdict("batch_p50_s", *paired(0, 8, ties=22)) == "NO"


def test_at_least_as_good_in_the_median_is_yes(outcomes: ModuleType) -> None:
    """Better in 18 of 30 replicates: yes (higher-is-better metrics count the other way)."""
    fair, mip = paired(18, 12)
    assert outcomes.verdict("preemptions", fair, mip) == "yes"
    assert outcomes.verdict("occupancy", mip, fair) == "yes"


def test_sign_test_p_is_the_binomial_tail(outcomes: ModuleType) -> None:
    """P(X <= 1) for X ~ Binomial(3, 1/2) is 4/8; all ties give 1."""
    assert outcomes.sign_test_p(1, 2) == 0.5
    assert outcomes.sign_test_p(0, 0) == 1.0
