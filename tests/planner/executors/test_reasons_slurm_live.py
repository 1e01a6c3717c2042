"""Reasons in squeue: the slurm executor's AdminComment against a real Slurm (see conftest.py)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from models import PendingReason, Scenario
from planner import reasons
from planner.executors.slurm import SlurmExecutor
from planner.executors.state import ClusterState

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(120)]

# What an operator or researcher types to see gpuplan's state of each job.
SQUEUE = ["squeue", "-h", "-O", "JobID:12,Name:16,admin_comment:200"]


def shown(cluster: Any, native_id: str) -> str:
    """The admin comment ``squeue -O`` prints for one job."""
    res = cluster.run(*SQUEUE, "-j", native_id)
    assert res.returncode == 0, res.stderr
    fields = res.stdout.split(None, 2)
    return fields[2].strip() if len(fields) == 3 else ""


def wait_until(ex: SlurmExecutor, ok: Any, timeout: float = 30.0) -> ClusterState:
    deadline = time.monotonic() + timeout
    while True:
        state = ex.observe()
        if ok(state):
            return state
        if time.monotonic() > deadline:
            pytest.fail(f"Slurm did not get there in {timeout}s: {[(j.job, j.phase) for j in state.jobs]}")
        time.sleep(0.3)


def test_held_job_shows_its_reason_in_squeue(slurm: Any, scenario: Scenario) -> None:
    """A held job's reason is in squeue -O admin_comment, and the contract comment is kept."""
    ex = SlurmExecutor(scenario, runner=slurm.runner)
    jobs = {j.id: j for j in scenario.jobs}
    assert ex.submit(jobs["gang"]).ok
    native = ex.observe().job("gang").native_id
    text = reasons.waiting(
        PendingReason.FAIR_SHARE_RANK,
        reasons.WaitFacts(project="nlp", ratio=1.3, jobs_ahead=3),
    )
    result = ex.set_reason("gang", text)
    assert result.ok and result.changed, result.detail
    assert shown(slurm, native) == text
    # The comment still names the job and its contract, so the executor still reads it.
    observed = ex.observe().job("gang")
    assert (observed.native_id, observed.min_runtime) == (native, 2.0)
    # The same text again does not touch Slurm, also from a restarted executor, which
    # reads what Slurm holds from squeue --json.
    assert not ex.set_reason("gang", text).changed
    assert not SlurmExecutor(scenario, runner=slurm.runner).set_reason("gang", text).changed


def test_preempted_job_shows_the_preemption_reason(slurm: Any, scenario: Scenario, plans: Any) -> None:
    """After a requeue the job keeps the reason it is given: squeue shows why it was preempted."""
    ex = SlurmExecutor(scenario, runner=slurm.runner)
    jobs = {j.id: j for j in scenario.jobs}
    assert ex.submit(jobs["free"]).ok
    plan = plans([{"free": ("alpha-h100-000",)}, {}], slice_seconds=3.0)
    assert ex.apply(plan, 0).ok
    running = wait_until(ex, lambda s: s.job("free").phase == "running")
    native = running.job("free").native_id
    assert ex.set_reason("free", reasons.running_preemptible(charged=False)).changed
    assert shown(slurm, native) == "running preemptible (unallocated, on idle GPUs)"
    report = ex.apply(plan, 1)
    assert [r.action for r in report.results if r.job == "free"] == ["preempt"]
    wait_until(ex, lambda s: s.job("free").phase == "held")
    because = reasons.preempted(time.time(), reasons.because_fair_share([("gang", "nlp")], charged=False))
    assert ex.set_reason("free", because).changed
    assert shown(slurm, native) == because
    assert shown(slurm, native).startswith("preempted at ")
