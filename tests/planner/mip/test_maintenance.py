"""Drained nodes: no new work, running work moves off as contracts allow, free times."""

from __future__ import annotations

import pytest

from models import PendingReason
from planner.mip import plan_epoch
from planner.mip.epoch import build_epoch
from planner.mip.formulation import apply

from .conftest import SnapBuilder


def slices_of(plan, job):  # type: ignore[no-untyped-def]
    return [k for k, s in enumerate(plan.slices) for a in s.assignments if a.job == job]


def test_resumable_job_moves_off_at_drain_and_node_frees_then() -> None:
    """A resumable job past its contract leaves a node drained from 30 min; it is free then."""
    plan = plan_epoch(
        SnapBuilder()
        .pool(nodes=1, drain=(1800.0, 9000.0), drained=1)
        .project("a")
        .running("r1", ("c-h100-000",), ran=7200.0, resumable=True)
        .build()
    )
    assert slices_of(plan, "r1") == [0, 1]
    assert ("r1", "preempt", 1800.0) in {(a.job, a.action, a.at) for a in plan.actions}
    (free,) = plan.drained_nodes
    assert (free.node, free.free_at) == ("c-h100-000", 1800.0)


def test_contract_delays_the_move_off() -> None:
    """A job 10 min into a 1 h contract stays on a node drained from 15 min until it ends."""
    plan = plan_epoch(
        SnapBuilder()
        .pool(nodes=1, drain=(900.0, 9000.0), drained=1)
        .project("a")
        .running("r1", ("c-h100-000",), ran=600.0, resumable=True)
        .build()
    )
    # Contract ends at 50 min: it runs slices 0-3 (the last one holds 45-60 min).
    assert slices_of(plan, "r1") == [0, 1, 2, 3]
    (free,) = plan.drained_nodes
    assert free.free_at == 3600.0


def test_non_resumable_job_runs_to_completion_on_drained_node() -> None:
    """A funded non-resumable job is never preempted: the node frees when it completes."""
    plan = plan_epoch(
        SnapBuilder()
        .pool(nodes=1, drain=(0.0, 9000.0), drained=1)
        .project("a")
        .running("r1", ("c-h100-000",), ran=7200.0, resumable=False, duration=12600.0)
        .build()
    )
    assert slices_of(plan, "r1") == [0, 1, 2, 3]
    (free,) = plan.drained_nodes
    assert free.free_at == 5400.0  # 1.5 h of work left


def test_no_new_work_on_drained_nodes() -> None:
    """A queued job never starts on a node drained during its run."""
    plan = plan_epoch(
        SnapBuilder().pool(nodes=2, drain=(2700.0, 9000.0), drained=1).project("a").queued("a1").queued("a2").build()
    )
    for s in plan.slices:
        for a in s.assignments:
            assert a.nodes == ("c-h100-000",)
    assert {p.job for p in plan.pending} == {"a2"}


def test_no_contract_is_planned_into_a_window_after_the_epoch() -> None:
    """Node 001's next window opens at 4,000 s, after the epoch. Two 8-GPU jobs with 2 h
    contracts: a start there in any slice would still be protected then, so the plan
    runs one job, on node 000. A resumable job's 15 min contract may use node 001 in the
    first slices (a start at 0 s ends its contract at 900 s)."""
    base = SnapBuilder().pool(nodes=2, drained=1, next_drain=4000.0).project("a", owed=16)
    plan = plan_epoch(base.queued("q1", min_runtime=7200.0).queued("q2", min_runtime=7200.0)
                      .build())
    placed = {a.job: a.nodes for s in plan.slices for a in s.assignments}
    assert list(placed.values()) == [("c-h100-000",)]
    (waiting,) = plan.pending
    assert waiting.reason is PendingReason.MAINTENANCE
    assert "maintenance starts before its run in this epoch, or its minimum runtime of 2 h" in waiting.detail
    short = SnapBuilder().pool(nodes=2, drained=1, next_drain=4000.0).project("a", owed=16)
    plan = plan_epoch(short.queued("q1", min_runtime=7200.0)
                      .queued("q2", min_runtime=900.0, resumable=True).build())
    placed = {a.job: a.nodes for s in plan.slices for a in s.assignments}
    assert placed == {"q1": ("c-h100-000",), "q2": ("c-h100-001",)}


def test_a_start_after_a_window_in_the_epoch_keeps_off_the_next_one() -> None:
    """The node drains 15-30 min and again from 1 h 30 min (after the epoch). A 2 h
    contract started at 30 min would run into the second window: nothing starts."""
    plan = plan_epoch(
        SnapBuilder()
        .pool(nodes=1, drain=(900.0, 1800.0), drained=1, next_drain=5400.0)
        .project("a", owed=8)
        .queued("q1", min_runtime=7200.0, duration=10800.0)
        .build()
    )
    assert all(not s.assignments for s in plan.slices)
    (waiting,) = plan.pending
    assert waiting.reason is PendingReason.MAINTENANCE


def test_a_job_kept_off_a_node_that_drains_during_its_run_waits_for_maintenance() -> None:
    """The only node drains from 45 min: a 3 h job would still run then (its 30 min
    contract does not matter), so it waits, and the reason says maintenance, not a
    missing gang hole on 8 free GPUs."""
    plan = plan_epoch(
        SnapBuilder()
        .pool(nodes=1, drain=(2700.0, 6300.0), drained=1)
        .project("a", owed=8)
        .queued("q1", min_runtime=1800.0, duration=10800.0)
        .build()
    )
    (waiting,) = plan.pending
    assert waiting.reason is PendingReason.MAINTENANCE


@pytest.mark.parametrize("resumable", [False, True])
def test_non_resumable_work_keeps_off_a_window_before_its_end_not_only_its_contract(
    resumable: bool,
) -> None:
    """Node 001's next window opens at 4,000 s. Two 3 h jobs with 15 min contracts: a
    non-resumable one would run out into the window and lose all its work there, so only
    one starts (on node 000) and the other waits for maintenance; resumable ones both
    start (a drain costs them a restart)."""
    base = SnapBuilder().pool(nodes=2, drained=1, next_drain=4000.0).project("a", owed=16)
    plan = plan_epoch(base.queued("q1", min_runtime=900.0, duration=10800.0, resumable=resumable)
                      .queued("q2", min_runtime=900.0, duration=10800.0, resumable=resumable)
                      .build())
    placed = {a.job: a.nodes for s in plan.slices for a in s.assignments}
    if resumable:
        assert sorted(placed.values()) == [("c-h100-000",), ("c-h100-001",)]
        return
    assert list(placed.values()) == [("c-h100-000",)]
    (waiting,) = plan.pending
    assert waiting.reason is PendingReason.MAINTENANCE
    assert "its remaining 3.0 h of work (it is not resumable)" in waiting.detail


def test_a_start_that_would_run_into_a_drain_waits_for_the_node_that_stays_open() -> None:
    """Node 001 drains from 15 min on; node 000 holds a job that runs the first slice
    (funded, non-resumable, 15 min left). A queued 1 h job fits neither in slice 0:
    node 001 would hold it into the drain, node 000 is busy. The per-slice capacity
    (16 GPUs open in slice 0, 8 held) allows that start; the ``drain_capacity`` row
    (starts running from slice 0 into slice 1 share node 000 with its running job:
    8 x <= 8 - 8) does not, so the model starts it in slice 1, where placement puts it.
    (Without the row the model started it in slice 0, placement dropped it, and the fill
    put it in slice 1: a plan below the model's optimum.)"""
    snapshot = (
        SnapBuilder()
        .pool(nodes=2, drain=(900.0, 9000.0), drained=1)
        .project("a", owed=16)
        .running("r", ("c-h100-000",), ran=7200.0, resumable=False, duration=8100.0)
        .queued("q", duration=3600.0)
        .build()
    )
    f = apply(build_epoch(snapshot))
    (row,) = [c for c in f.model.constraints if c.name == "drain_capacity[0,0,0]"]
    coefs = dict(zip(row.vars.tolist(), row.coefs.tolist(), strict=True))
    assert (coefs, row.rhs) == ({f.x[(0, 0, 0)]: 8}, 0)
    plan = plan_epoch(snapshot, rel_gap=0.0)
    assert slices_of(plan, "q") == [1, 2, 3]
    assert "found no hole" not in plan.solver.message
    assert plan.solver.gap == pytest.approx(0.0)  # the plan placed is the model's optimum


def test_the_model_sees_a_window_after_the_epoch() -> None:
    """Node 001's next window opens at 4,000 s, after the epoch; two 8-GPU jobs with 2 h
    contracts may not start there (as above). The ``drain_capacity`` rows leave such
    starts node 000 alone in every slice, so the model starts one job, which placement
    puts there: the plan is the model's optimum. (Without the rows the model started
    both, placement dropped one, and the plan was a third below the model's answer.)"""
    snapshot = (
        SnapBuilder().pool(nodes=2, drained=1, next_drain=4000.0).project("a", owed=16)
        .queued("q1", min_runtime=7200.0).queued("q2", min_runtime=7200.0).build()
    )
    f = apply(build_epoch(snapshot))
    rows = {c.name: (c.coefs.tolist(), c.rhs) for c in f.model.constraints if c.name.startswith("drain_capacity")}
    assert rows == {f"drain_capacity[0,{k},0]": ([8] * (k + 1), 8) for k in range(4)}
    plan = plan_epoch(snapshot, rel_gap=0.0)
    assert "found no hole" not in plan.solver.message
    assert plan.solver.gap == pytest.approx(0.0)
