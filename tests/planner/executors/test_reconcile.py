"""reconcile(): the steps that bring an observed cluster to a plan's slice."""

from __future__ import annotations

from typing import Any

import pytest

from planner.executors import ClusterState, ObservedJob, ObservedNode, reconcile

NODES = (
    ObservedNode(name="alpha-h100-000", native="alpha-h100-000", gpus=8, gpu_type="H100"),
    ObservedNode(name="alpha-h100-001", native="alpha-h100-001", gpus=8, gpu_type="H100"),
    ObservedNode(name="beta-b200-000", native="beta-b200-000", gpus=8, gpu_type="B200",
                 drained=True, reason="repair"),
)


def job(name: str, phase: str = "held", **kw: object) -> ObservedJob:
    return ObservedJob(job=name, native_id=f"{name}-id", phase=phase, **kw)


def state(*jobs: ObservedJob, at: float = 100.0) -> ClusterState:
    return ClusterState(at=at, nodes=NODES, jobs=jobs)


def test_held_job_in_slice_is_started_on_its_nodes(plans: Any) -> None:
    """A held job the slice assigns gets one start step with the planned nodes."""
    steps, results = reconcile(state(job("free")), plans([{"free": ("alpha-h100-000",)}]), 0)
    assert [(s.job, s.action, s.nodes, s.rehold) for s in steps] == [
        ("free", "start", ("alpha-h100-000",), False)
    ]
    assert results == ()


def test_running_job_on_planned_nodes_needs_no_step(plans: Any) -> None:
    """A job already running where the slice wants it yields a no-op continue."""
    running = job("free", "running", nodes=("alpha-h100-000",), run_start=0.0, min_runtime=0.0)
    steps, results = reconcile(state(running), plans([{"free": ("alpha-h100-000",)}]), 0)
    assert steps == ()
    assert [(r.action, r.ok, r.changed) for r in results] == [("continue", True, False)]


def test_contract_job_is_never_touched(plans: Any) -> None:
    """A running job inside its minimum runtime is protected even when the slice omits it."""
    inside = job("c", "running", nodes=("alpha-h100-001",), run_start=50.0, min_runtime=100.0,
                 resumable=True)
    steps, results = reconcile(state(inside, at=149.0), plans([{}]), 0)
    assert steps == ()
    assert [(r.action, r.changed, r.detail) for r in results] == [
        ("protect", False, "inside its minimum runtime for 1s more")
    ]


def test_unknown_contract_protects_the_job(plans: Any) -> None:
    """A running job whose minimum runtime is unknown is never preempted."""
    unknown = job("u", "running", nodes=("alpha-h100-001",), run_start=0.0, resumable=True)
    steps, results = reconcile(state(unknown, at=1e9), plans([{}]), 0)
    assert steps == () and results[0].action == "protect"


def test_resumable_job_past_contract_is_preempted_before_starts(plans: Any) -> None:
    """Preemptions come before starts, so the started job finds its node freed."""
    past = job("short", "running", nodes=("alpha-h100-000",), run_start=0.0, min_runtime=2.0,
               resumable=True)
    steps, _ = reconcile(state(past, job("free")), plans([{"free": ("alpha-h100-000",)}]), 0)
    assert [(s.job, s.action) for s in steps] == [("short", "preempt"), ("free", "start")]


def test_non_resumable_job_is_left_running_and_reported(plans: Any) -> None:
    """A non-resumable job past its contract that the slice omits is reported, not killed."""
    stubborn = job("stubborn", "running", nodes=("alpha-h100-000",), run_start=0.0,
                   min_runtime=1.0, resumable=False)
    steps, results = reconcile(state(stubborn), plans([{}]), 0)
    assert steps == ()
    assert [(r.action, r.ok) for r in results] == [("preempt", False)]


def test_start_on_drained_node_is_refused(plans: Any) -> None:
    """A start planned on a drained node fails with the node's reason and no step."""
    steps, results = reconcile(state(job("b200")), plans([{"b200": ("beta-b200-000",)}]), 0)
    assert steps == ()
    assert [(r.ok, r.detail) for r in results] == [(False, "node beta-b200-000 is drained (repair)")]


def test_released_job_pinned_elsewhere_is_reheld_and_repinned(plans: Any) -> None:
    """A released job pinned to other nodes is held again before being re-pinned."""
    waiting = job("free", "pending", pinned=("alpha-h100-001",))
    steps, _ = reconcile(state(waiting), plans([{"free": ("alpha-h100-000",)}]), 0)
    assert [(s.action, s.rehold) for s in steps] == [("start", True)]
    same = job("free", "pending", pinned=("alpha-h100-000",))
    steps, results = reconcile(state(same), plans([{"free": ("alpha-h100-000",)}]), 0)
    assert steps == () and not results[0].changed


def test_released_job_left_out_of_slice_is_held(plans: Any) -> None:
    """A released job that the slice does not run is held again."""
    steps, _ = reconcile(state(job("free", "pending")), plans([{}]), 0)
    assert [(s.job, s.action) for s in steps] == [("free", "hold")]


def test_unmanaged_jobs_are_ignored(plans: Any) -> None:
    """Jobs outside the planner's convention get no step, whatever their state."""
    foreign = job("theirs", "running", managed=False, nodes=("alpha-h100-000",), run_start=0.0,
                  min_runtime=0.0, resumable=True)
    assert reconcile(state(foreign), plans([{}]), 0) == ((), ())


def test_previously_preempted_job_is_resumed(plans: Any) -> None:
    """A held job with restarts is started with the verb 'resume'."""
    steps, _ = reconcile(state(job("free", restarts=1)), plans([{"free": ("alpha-h100-000",)}]), 0)
    assert steps[0].action == "resume"


def test_missing_job_and_bad_slice_index(plans: Any) -> None:
    """A planned job the cluster does not have is a failure; a bad slice index raises."""
    plan = plans([{"gang": ("alpha-h100-000", "alpha-h100-001")}])
    steps, results = reconcile(state(), plan, 0)
    assert steps == () and results[0].detail == "no such job on the cluster"
    with pytest.raises(IndexError, match="no slice 1"):
        reconcile(state(), plan, 1)


def test_suspended_job_is_resumed_in_place_or_reported(plans: Any) -> None:
    """A suspended job the slice keeps on its nodes is resumed in place; planned elsewhere,
    it is reported and left alone; left out of the slice, it is left suspended."""
    paused = job("free", "suspended", nodes=("alpha-h100-000",), run_start=0.0, min_runtime=0.0)
    steps, _ = reconcile(state(paused), plans([{"free": ("alpha-h100-000",)}]), 0)
    assert [(s.action, s.in_place) for s in steps] == [("resume", True)]
    steps, results = reconcile(state(paused), plans([{"free": ("alpha-h100-001",)}]), 0)
    assert steps == () and not results[0].ok
    assert reconcile(state(paused), plans([{}]), 0) == ((), ())
