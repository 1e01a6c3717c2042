"""The budget rules of docs/budgets.md, one test (or a few) per rule."""

from __future__ import annotations

import pytest

from models import OrgUnit, Policy
from planner.budgets import Charge, UsageMeter, budget_rates, charge, headroom_gpu_h, revise
from planner.fairshare import standings, standings_at
from planner.ledger import Ledger, Usage
from scenarios import load_scenario

HOUR = 3600.0
WEEK_H = 7 * 24.0
POLICY = Policy(lookback="7d", epoch="1h", urgent_charge=2.0)
# Two equal projects on 64 H100-equivalents: a budget rate of 32 GPUs each.
PAIR = (OrgUnit(name="a", share=1), OrgUnit(name="b", share=1))


def hourly(project: str, first_h: int, hours: int, **amounts: float) -> list[Usage]:
    return [Usage(project, h * HOUR, (h + 1) * HOUR, **amounts) for h in range(first_h, first_h + hours)]


# Rule 1: budgets come from shares -----------------------------------------------------------


def test_budget_rates_are_effective_shares_of_capacity() -> None:
    """A project's budget rate is its effective share times capacity; rates sum to capacity."""
    org = load_scenario("tiny").org
    rates = budget_rates(org, 64.0)
    assert rates == pytest.approx({"research/nlp": 32.0, "research/vision": 16.0, "infra": 16.0})
    assert sum(rates.values()) == pytest.approx(64.0)


def test_revision_sets_budgets_from_its_effective_time() -> None:
    """A revised share changes the budget (the headroom) from its `at` on, not before."""
    tiny = load_scenario("tiny")
    revised = revise(tiny, {"infra": 3}, at=10 * HOUR)
    before = standings_at(revised, 10 * HOUR - 1)["infra"].headroom_gpu_h
    after = standings_at(revised, 10 * HOUR)["infra"].headroom_gpu_h
    assert before == pytest.approx(16 * WEEK_H)
    assert after == pytest.approx(32 * WEEK_H)  # infra is now 3 of 6 shares of 64
    assert tiny.budget_revisions == ()  # the what-if copy left the original alone


def test_budgets_use_nominal_capacity_during_a_drain() -> None:
    """With half the GPUs drained, owed halves but the budget (headroom) does not."""
    st = standings(PAIR, {"a": 64, "b": 64}, 32.0, None, 0.0, POLICY, budget_capacity=64.0)
    assert st["a"].owed_gpus == pytest.approx(16.0)
    assert st["a"].headroom_gpu_h == pytest.approx(32 * WEEK_H)


def test_headroom_is_window_budget_minus_recent_charges() -> None:
    """Headroom = budget rate x lookback - charged in [now + epoch - lookback, now)."""
    assert headroom_gpu_h(32.0, 1000.0, POLICY) == pytest.approx(32 * WEEK_H - 1000)
    assert headroom_gpu_h(32.0, 1e9, POLICY) == 0.0


# Rule 2: unused budget ---------------------------------------------------------------------


def test_unused_budget_raises_headroom_later_and_idle_gpus_go_to_others_free() -> None:
    """An idle project keeps its whole window budget; others' work beyond theirs is free."""
    now = 96 * HOUR
    with Ledger() as ledger:
        # a is idle for 4 days; b uses all 64 GPUs, charged for 3 days (to its budget),
        # then its work runs as unallocated work on a's idle GPUs.
        ledger.record(hourly("b", 0, 84, allocated_gpu_h=64.0, owed_gpu_h=64.0))
        before = standings(PAIR, {"a": 0, "b": 64}, 64.0, ledger, 84 * HOUR, POLICY)["b"]
        ledger.record(hourly("b", 84, 12, unallocated_gpu_h=64.0, owed_gpu_h=64.0))
        st = standings(PAIR, {"a": 64, "b": 64}, 64.0, ledger, now, POLICY)
    assert st["a"].headroom_gpu_h == pytest.approx(32 * WEEK_H)  # nothing used: all of it
    assert st["b"].headroom_gpu_h == 0.0  # 84 h x 64 = its 7-day budget of 32 x 168
    assert before.headroom_gpu_h == 0.0
    # Free work is not charged: it does not move b's ratio.
    assert st["b"].ratio == pytest.approx(84 * 64 / (96 * 64))


def test_idle_time_neither_helps_nor_hurts_the_ratio() -> None:
    """A project's ratio counts only time it was owed something: idle hours owe it nothing."""
    with Ledger() as ledger:
        ledger.record(hourly("a", 0, 24, allocated_gpu_h=16.0, owed_gpu_h=32.0))
        right_after = standings(PAIR, {"a": 32}, 64.0, ledger, 24 * HOUR, POLICY)["a"].ratio
        # Two idle days: no demand, nothing owed, nothing recorded for a.
        later = standings(PAIR, {"a": 32}, 64.0, ledger, 72 * HOUR, POLICY)["a"]
    assert right_after == later.ratio == pytest.approx(0.5)
    assert later.deficit_gpu_h == pytest.approx(24 * 16)


# Rule 3: spending early --------------------------------------------------------------------


def test_spending_early_uses_up_headroom_until_it_leaves_the_window() -> None:
    """Charging a week's budget in 3.5 days leaves no headroom until those charges slide out."""
    with Ledger() as ledger:
        ledger.record(hourly("a", 0, 84, allocated_gpu_h=64.0, owed_gpu_h=32.0))

        def headroom(now_h: float) -> float:
            return standings(PAIR, {"a": 64}, 64.0, ledger, now_h * HOUR, POLICY)["a"].headroom_gpu_h

        assert headroom(84) == 0.0
        # The window for the epoch at now is [now + 1h - 168h, now): at 209h it holds
        # hours 42..84 of the spending, 42 x 64 GPU-hours.
        assert headroom(209) == pytest.approx(32 * WEEK_H - 42 * 64)
        assert headroom(251) == pytest.approx(32 * WEEK_H)
        # While spending ahead of what it was owed, it ranks behind (ratio above 1).
        assert standings(PAIR, {}, 64.0, ledger, 84 * HOUR, POLICY)["a"].ratio == pytest.approx(2.0)


# Rule 4: exchange rates ---------------------------------------------------------------------


def test_gpu_type_rate_converts_delivery_and_charge_to_h100_equivalents() -> None:
    """An hour on 8 B200 GPUs (rate 2) delivers and charges 16 H100-equivalent hours."""
    assert charge(8, 2.0, HOUR, urgent=False, allocated=True, policy=POLICY) == Charge(16.0, 16.0, 0.0)
    assert charge(8, 1.0, HOUR, urgent=False, allocated=True, policy=POLICY) == Charge(8.0, 8.0, 0.0)


def test_one_budget_across_gpu_types() -> None:
    """Time on any GPU type draws on the same H100-equivalent budget, at the type's rate."""
    meter = UsageMeter(POLICY)
    meter.add("a", 8, 2.0, HOUR)  # B200
    meter.add("a", 8, 1.0, HOUR)  # H100
    with Ledger() as ledger:
        ledger.record(meter.flush(0.0, HOUR))
        st = standings(PAIR, {}, 64.0, ledger, HOUR, POLICY)
    assert st["a"].headroom_gpu_h == pytest.approx(32 * WEEK_H - 24.0)


# Rule 5: urgent work -----------------------------------------------------------------------


def test_urgent_work_is_charged_at_the_premium() -> None:
    """Funded urgent work costs urgent_charge times what it delivers; free work costs nothing."""
    assert charge(4, 1.0, HOUR, urgent=True, allocated=True, policy=POLICY) == Charge(4.0, 8.0, 0.0)
    assert charge(4, 1.0, HOUR, urgent=True, allocated=False, policy=POLICY) == Charge(0.0, 0.0, 4.0)


def test_marking_everything_urgent_only_burns_budget() -> None:
    """Same owed, same delivery: the all-urgent project ranks behind and has less headroom."""
    meter = UsageMeter(POLICY)
    for _hour in range(24):
        meter.add("a", 16, 1.0, HOUR, urgent=False)
        meter.add("b", 16, 1.0, HOUR, urgent=True)
    meter.owe({"a": 32.0, "b": 32.0}, 24 * HOUR)
    with Ledger() as ledger:
        ledger.record(meter.flush(0.0, 24 * HOUR))
        st = standings(PAIR, {"a": 32, "b": 32}, 64.0, ledger, 24 * HOUR, POLICY)
    assert st["a"].ratio == pytest.approx(0.5)
    assert st["b"].ratio == pytest.approx(1.0)  # charged double for the same GPUs
    assert sorted(st, key=lambda p: st[p].ratio) == ["a", "b"]
    assert st["b"].headroom_gpu_h == pytest.approx(st["a"].headroom_gpu_h - 24 * 16)


# The meter the simulator uses ----------------------------------------------------------------


def test_usage_meter_flushes_one_record_per_project_and_resets() -> None:
    """flush() returns one record per project with usage or owed time, then starts over."""
    meter = UsageMeter(POLICY)
    meter.add("a", 8, 1.0, HOUR / 2)
    meter.add("a", 2, 1.0, HOUR, allocated=False)
    meter.owe({"a": 10.0, "b": 0.0}, HOUR)
    assert meter.flush(0.0, HOUR) == [Usage("a", 0.0, HOUR, 4.0, 4.0, 2.0, 10.0)]
    assert meter.flush(HOUR, 2 * HOUR) == []


def test_charge_rejects_negative_amounts() -> None:
    """Negative GPUs or time, or a non-positive rate, is a ValueError."""
    with pytest.raises(ValueError, match="charge needs"):
        charge(-1, 1.0, HOUR, urgent=False, allocated=True, policy=POLICY)
    with pytest.raises(ValueError, match="charge needs"):
        charge(1, 0.0, HOUR, urgent=False, allocated=True, policy=POLICY)
