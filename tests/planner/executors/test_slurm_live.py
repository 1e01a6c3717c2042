"""The slurm executor against a real slurmctld and slurmds (see conftest.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from models import Plan, Scenario
from planner.executors.slurm import SlurmExecutor, SlurmUnavailable
from planner.executors.state import ClusterState

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(120)]


def executor(cluster: Any, scenario: Scenario, **kw: object) -> SlurmExecutor:
    return SlurmExecutor(scenario, runner=cluster.runner, **kw)


def wait_for(ex: SlurmExecutor, ok: Callable[[ClusterState], bool], timeout: float = 30.0) -> ClusterState:
    """Observe until ``ok`` holds (Slurm acts asynchronously); fail with the last state."""
    deadline = time.monotonic() + timeout
    while True:
        state = ex.observe()
        if ok(state):
            return state
        if time.monotonic() > deadline:
            summary = [(j.job, j.phase, j.nodes, j.reason) for j in state.jobs]
            pytest.fail(f"Slurm did not reach the expected state in {timeout}s: {summary}")
        time.sleep(0.3)


def running_as_planned(plan: Plan, index: int, protected: tuple[str, ...] = ()) -> Callable[[ClusterState], bool]:
    """The slice's jobs run on exactly their nodes; nothing else runs except ``protected``."""
    want = {a.job: set(a.nodes) for a in plan.slices[index].assignments}

    def ok(state: ClusterState) -> bool:
        running = {j.job: set(j.nodes) for j in state.jobs if j.managed and j.phase == "running"}
        extra = set(running) - set(want) - set(protected)
        return not extra and all(running.get(job) == nodes for job, nodes in want.items())

    return ok


def submit(ex: SlurmExecutor, scenario: Scenario, *names: str) -> None:
    jobs = {j.id: j for j in scenario.jobs}
    for name in names:
        result = ex.submit(jobs[name])
        assert result.ok, result.detail


def test_three_slices_match_the_plan(slurm: Any, scenario: Scenario, plans: Any) -> None:
    """After each of three slices the right jobs run on the planned nodes, preempted jobs
    are requeued and held, and a job inside its contract is left running untouched."""
    ex = executor(slurm, scenario)
    submit(ex, scenario, "free", "short", "contract", "b200")
    state = ex.observe()
    assert {j.job: j.phase for j in state.jobs if j.managed and j.phase != "finished"} == {
        "free": "held", "short": "held", "contract": "held", "b200": "held"
    }
    plan = plans([
        {"free": ("alpha-h100-000",), "contract": ("alpha-h100-001",), "short": ("beta-b200-000",)},
        # Slice 1: 'free' (no contract) and 'short' (past its 2 s) are preempted; b200
        # starts where 'short' ran; 'contract' is not in the slice but inside its contract.
        {"b200": ("beta-b200-000",)},
        # Slice 2: 'free' resumes on its node; 'contract' still untouched.
        {"free": ("alpha-h100-000",), "b200": ("beta-b200-000",), "contract": ("alpha-h100-001",)},
    ], slice_seconds=3.0)

    report = ex.apply(plan, 0)
    assert report.ok, report.failed
    first = wait_for(ex, running_as_planned(plan, 0))
    contract_id = first.job("contract").native_id
    contract_start = first.job("contract").run_start
    time.sleep(2.5)  # let 'short' pass its minimum runtime of 2 s

    report = ex.apply(plan, 1)
    assert report.ok, report.failed
    by_job = {r.job: r for r in report.results}
    assert by_job["free"].action == "preempt" and by_job["short"].action == "preempt"
    assert by_job["contract"].action == "protect" and not by_job["contract"].changed
    second = wait_for(ex, lambda s: running_as_planned(plan, 1, ("contract",))(s) and all(
        s.job(n).phase == "held" for n in ("free", "short")))
    for name in ("free", "short"):
        assert second.job(name).restarts == 1
    kept = second.job("contract")
    assert kept is not None and kept.phase == "running"
    assert (kept.native_id, kept.run_start, kept.restarts) == (contract_id, contract_start, 0)

    report = ex.apply(plan, 2)
    assert report.ok, report.failed
    third = wait_for(ex, running_as_planned(plan, 2))
    assert {r.job: r.action for r in report.changed} == {"free": "resume"}
    assert third.job("short").phase == "held"
    assert third.job("contract").run_start == contract_start
    time.sleep(1.0)  # the resumed job really runs (slurmd did not refuse its launch)
    resumed = ex.observe().job("free")
    assert resumed is not None and (resumed.phase, resumed.restarts) == ("running", 1)


def test_gang_runs_on_both_planned_nodes(slurm: Any, scenario: Scenario, plans: Any) -> None:
    """A 16-GPU gang is pinned to the two planned 8-GPU nodes and runs on both."""
    ex = executor(slurm, scenario)
    submit(ex, scenario, "gang")
    plan = plans([{"gang": ("alpha-h100-000", "alpha-h100-001")}])
    assert ex.apply(plan, 0).ok
    state = wait_for(ex, running_as_planned(plan, 0))
    assert state.job("gang").gpus == 16


def test_applying_a_slice_twice_changes_nothing(slurm: Any, scenario: Scenario, plans: Any) -> None:
    """A second apply of the same slice issues no Slurm command that changes anything."""
    calls: list[list[str]] = []

    def recording(args: object) -> object:
        calls.append(list(args))
        return slurm.runner(args)

    ex = SlurmExecutor(scenario, runner=recording)
    submit(ex, scenario, "free", "short")
    plan = plans([{"free": ("alpha-h100-000",), "short": ("alpha-h100-001",)}])
    assert ex.apply(plan, 0).ok
    wait_for(ex, running_as_planned(plan, 0))
    calls.clear()
    again = ex.apply(plan, 0)
    assert again.ok and not again.changed
    assert all(c[0] in ("squeue", "sinfo") for c in calls), calls


def test_drained_node_gets_no_new_job(slurm: Any, scenario: Scenario, plans: Any) -> None:
    """A start planned on a drained node is refused and the job stays held."""
    ex = executor(slurm, scenario)
    submit(ex, scenario, "b200")
    assert ex.drain("beta-b200-000", "repair").ok
    state = ex.observe()
    assert state.node("beta-b200-000").drained
    report = ex.apply(plans([{"b200": ("beta-b200-000",)}]), 0)
    (result,) = report.failed
    assert result.job == "b200" and "drained" in result.detail
    time.sleep(1.0)
    assert ex.observe().job("b200").phase == "held"


def test_user_jobs_are_adopted_and_foreign_jobs_untouched(slurm: Any, scenario: Scenario, plans: Any) -> None:
    """A user's held job in the gpuplan partition with a tagged comment is adopted (name and
    contract from the comment); a job in another partition is never preempted."""
    run = slurm.run
    adopted = run("sbatch", "--parsable", "--hold", "--partition=gpuplan", "--job-name=whatever",
                  "--comment=gpuplan job=mine project=nlp min_runtime=0 resumable=1",
                  "--gres=gpu:2", "--output=/dev/null", "--wrap=sleep 600")
    foreign = run("sbatch", "--parsable", "--partition=other", "--job-name=theirs",
                  "--gres=gpu:2", "--output=/dev/null", "--wrap=sleep 600")
    assert adopted.returncode == 0 and foreign.returncode == 0, (adopted.stderr, foreign.stderr)
    ex = executor(slurm, scenario)
    state = wait_for(ex, lambda s: any(j.job == "theirs" and j.phase == "running" for j in s.jobs))
    mine = state.job("mine")
    assert mine is not None and mine.managed and mine.phase == "held"
    assert (mine.project, mine.min_runtime, mine.resumable, mine.gpus) == ("nlp", 0.0, True, 2)
    theirs = next(j for j in state.jobs if j.job == "theirs")
    assert not theirs.managed
    plan = plans([{}])
    report = ex.apply(plan, 0)
    assert report.ok and not report.changed
    time.sleep(1.0)
    after = next(j for j in ex.observe().jobs if j.job == "theirs")
    assert after.phase == "running" and after.restarts == 0


def test_suspend_and_resume_in_place(slurm: Any, scenario: Scenario, plans: Any) -> None:
    """scontrol suspend stops a running job on its nodes; the next apply of a slice that
    keeps it there resumes it in place (same job, no requeue)."""
    ex = executor(slurm, scenario)
    submit(ex, scenario, "free")
    plan = plans([{"free": ("alpha-h100-000",)}])
    assert ex.apply(plan, 0).ok
    running = wait_for(ex, running_as_planned(plan, 0)).job("free")
    assert ex.suspend("free").ok
    paused = wait_for(ex, lambda s: s.job("free").phase == "suspended").job("free")
    assert paused.nodes == ("alpha-h100-000",)
    report = ex.apply(plan, 0)
    assert [(r.action, r.ok) for r in report.changed] == [("resume", True)]
    back = wait_for(ex, running_as_planned(plan, 0)).job("free")
    assert (back.native_id, back.restarts) == (running.native_id, 0)


def test_unreachable_controller_is_retried_until_it_returns(slurm: Any, scenario: Scenario) -> None:
    """With slurmctld stopped, observe retries with growing waits and succeeds once it is
    back; with no retries left it raises SlurmUnavailable."""
    slurm.stop_controller()
    impatient = executor(slurm, scenario, retries=0)
    with pytest.raises(SlurmUnavailable, match="unreachable"):
        impatient.observe()
    waits: list[float] = []
    restarts: list[threading.Thread] = []

    def sleep(seconds: float) -> None:
        # The controller comes back only after the executor has seen it fail.
        waits.append(seconds)
        if not restarts:
            restarts.append(threading.Thread(target=slurm.start_controller))
            restarts[0].start()
        time.sleep(seconds)

    try:
        patient = executor(slurm, scenario, retries=8, backoff=0.5, max_backoff=2.0, sleep=sleep)
        state = patient.observe()
    finally:
        for thread in restarts:
            thread.join()
    assert {n.name for n in state.nodes} == {"alpha-h100-000", "alpha-h100-001", "beta-b200-000"}
    assert waits[0] == 0.5 and waits == sorted(waits) and max(waits) <= 2.0
