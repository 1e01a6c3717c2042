"""Pending reasons name what kept each waiting job out."""

from __future__ import annotations

from models import PendingReason, Plan
from planner.mip import explain_job, plan_epoch

from .conftest import SnapBuilder


def reason(plan: Plan, job: str) -> PendingReason:
    (p,) = [p for p in plan.pending if p.job == job]
    return p.reason


def test_contracts_reason() -> None:
    """A job blocked by a running job inside its minimum runtime waits for contracts."""
    plan = plan_epoch(
        SnapBuilder()
        .pool()
        .project("a", ratio=0.0)
        .project("b", ratio=3.0)
        .running("r1", ("c-h100-000",), "b", ran=600.0, resumable=True)
        .queued("a1", "a")
        .build()
    )
    assert reason(plan, "a1") is PendingReason.CONTRACTS


def test_maintenance_reason() -> None:
    """A gang that only fits with the drained nodes waits for maintenance."""
    plan = plan_epoch(
        SnapBuilder().pool(nodes=2, drain=(0.0, 7200.0), drained=1).project("a").queued("a1", gpus=16).build()
    )
    assert reason(plan, "a1") is PendingReason.MAINTENANCE


def test_budget_reason() -> None:
    """A funded job of a project with no headroom, losing to funded work, waits for budget."""
    plan = plan_epoch(
        SnapBuilder()
        .pool()
        .project("a", headroom=0.0)
        .project("b", headroom=100.0)
        .queued("a1", "a")
        .queued("b1", "b")
        .build()
    )
    assert reason(plan, "a1") is PendingReason.BUDGET_EXHAUSTED


def test_no_gang_hole_reason() -> None:
    """Enough free GPUs spread over nodes, but no whole node for an 8-GPU gang."""
    plan = plan_epoch(
        SnapBuilder()
        .pool(nodes=2)
        .project("a")
        .project("b")
        .running("r1", ("c-h100-000",), "b", gpus=4, ran=600.0)
        .running("r2", ("c-h100-001",), "b", gpus=4, ran=600.0)
        .queued("a1", "a", gpus=8)
        .build()
    )
    assert reason(plan, "a1") is PendingReason.NO_GANG_HOLE


def test_priority_reason() -> None:
    """A job losing to a higher-priority job of its own project waits for priority."""
    plan = plan_epoch(
        SnapBuilder().pool().project("a").queued("a1", priority=0).queued("a2", priority=2).build()
    )
    assert reason(plan, "a1") is PendingReason.PRIORITY


def test_explain_placed_and_pending() -> None:
    """explain_job says where a placed job runs and why a waiting one waits."""
    snapshot = SnapBuilder().pool().project("a").queued("a1", priority=0).queued("a2", priority=2).build()
    plan = plan_epoch(snapshot)
    placed = explain_job(plan, snapshot, "a2")
    assert "placed: c/H100 on c-h100-000" in placed
    waiting = explain_job(plan, snapshot, "a1")
    assert "pending: priority" in waiting


def test_explain_says_why_a_job_is_preempted() -> None:
    """A preempted job's explanation names its ended contract and who takes its node."""
    snapshot = (
        SnapBuilder()
        .pool()
        .project("a", ratio=0.0)
        .project("b", ratio=3.0)
        .running("r1", ("c-h100-000",), "b", ran=7200.0, resumable=True)
        .queued("a1", "a")
        .build()
    )
    text = explain_job(plan_epoch(snapshot), snapshot, "r1")
    assert "action: preempt at 00h00m" in text
    assert "why preempted: its minimum runtime ended at" in text
    assert "a1 (a)" in text


def test_holders_seen_from_one_project() -> None:
    """_Holders.of splits a pool-slice's runs into the project's own (urgent, priority,
    GPUs) and the others' GPUs, and shows the other projects at or above its fair-share
    weight (ratio 0.2 is above 0.5; ratio 2.0 below); with no other holder, none."""
    from planner.mip.assemble import Run
    from planner.mip.epoch import build_epoch
    from planner.mip.explain import _Holders

    snapshot = (
        SnapBuilder()
        .pool(nodes=3)
        .project("a", ratio=0.5)
        .project("b", ratio=2.0)
        .project("c", ratio=0.2)
        .running("ra", ("c-h100-000",), "a", gpus=8, priority=1)
        .running("rb", ("c-h100-001",), "b", gpus=4)
        .running("rc", ("c-h100-002",), "c", gpus=2)
        .build()
    )
    epoch = build_epoch(snapshot)
    runs = [Run(r.state, r.pool, 0, 1, r.state.nodes, True) for r in epoch.running]
    seen = _Holders.of(epoch, runs, "a")
    assert seen == _Holders(own=[(False, 1, 8)], others_gpus=6, ahead="c")
    assert _Holders.of(epoch, runs[:1], "a").ahead is None
