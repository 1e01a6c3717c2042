"""The control loop, driven with a fake clock against the dryrun executor."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from models import Plan, Scenario
from planner.control import ControlLoop, RunState, live_jobs, live_snapshot
from planner.executors import ApplyReport, ClusterState, ExecutorUnavailable, ObservedJob
from planner.executors.dryrun import DryRunExecutor
from planner.ledger import Ledger
from scenarios import load_scenario

ORIGIN = 1_000_000.0


class FakeTime:
    """A clock that only moves when the loop sleeps."""

    def __init__(self, t: float = ORIGIN) -> None:
        self.t = t
        self.sleeps: list[float] = []

    def time(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds


@pytest.fixture()
def tiny() -> Scenario:
    return load_scenario("tiny")


def _loop(scenario: Scenario, ex: object, ledger: Ledger, clock: FakeTime, **kw: object) -> ControlLoop:
    return ControlLoop(scenario, ex, ledger, run_state=RunState(ORIGIN), slice_seconds=60.0,
                       clock=clock.time, sleep=clock.sleep, **kw)


def _covered(ledger: Ledger) -> list[tuple[float, float]]:
    """The merged intervals the ledger's records cover."""
    spans = sorted({(u.start, u.end) for u in ledger.records()})
    merged: list[tuple[float, float]] = []
    for s, e in spans:
        if merged and s <= merged[-1][1] + 1e-9:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


def test_slices_are_applied_at_their_boundaries_and_usage_recorded(tiny: Scenario) -> None:
    """Each slice is applied at its start; each slice's delivered GPU-hours are recorded at
    its end, equal to the GPUs the dryrun cluster ran times the slice length."""
    clock = FakeTime()
    ex = DryRunExecutor(tiny, io.StringIO(), clock=clock.time)
    ledger = Ledger()
    summary = _loop(tiny, ex, ledger, clock).run(epochs=1)
    assert sorted(summary.submitted) == ["j1", "j2", "j5"]  # the jobs submitted at 0s
    assert [(s.start, s.end) for s in summary.slices] == [(0, 60), (60, 120), (120, 180), (180, 240)]
    assert [s.report.at - ORIGIN for s in summary.slices] == [0, 60, 120, 180]
    rates = {n.name: tiny.rate(n.gpu_type) for n in tiny.nodes}
    running = [j for j in ex.observe().jobs if j.phase == "running"]
    assert running, "the plan started nothing"
    per_slice = sum(j.gpus * rates[j.nodes[0]] for j in running) * 60 / 3600
    for record in summary.slices:
        delivered = sum(u.allocated_gpu_h + u.unallocated_gpu_h for u in record.usage)
        assert delivered == pytest.approx(per_slice)
    assert _covered(ledger) == [(0.0, 240.0)]


def test_restart_loses_nothing_from_the_ledger(tiny: Scenario, tmp_path: Path) -> None:
    """A new loop on the same ledger and origin keeps every record and charges the time
    jobs ran while no controller was running."""
    clock = FakeTime()
    ex = DryRunExecutor(tiny, io.StringIO(), clock=clock.time)
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as ledger:
        _loop(tiny, ex, ledger, clock).run(epochs=1)
        before = ledger.records()
    clock.t += 300  # the controller is down for five minutes; the jobs keep running
    with Ledger(path) as ledger:
        summary = _loop(tiny, ex, ledger, clock).run(epochs=1)
        after = ledger.records()
    assert after[: len(before)] == before
    assert [(u.start, u.end) for u in summary.catch_up][:1] == [(240.0, 540.0)]
    assert _covered(Ledger(path)) == [(0.0, 780.0)]
    # Continuously running jobs are charged for the whole 780 s, downtime included.
    j5 = next(j for j in tiny.jobs if j.id == "j5")
    infra = sum(u.allocated_gpu_h for u in after if u.project == "infra")
    assert infra == pytest.approx(j5.gpus * tiny.rate("B200") * 780 / 3600)


class Flaky:
    """Wraps an executor; its controller is unreachable for the first ``down`` calls."""

    def __init__(self, inner: DryRunExecutor, down: int) -> None:
        self.inner, self.down, self.name = inner, down, "flaky"

    def _check(self) -> None:
        if self.down > 0:
            self.down -= 1
            raise ExecutorUnavailable("controller down")

    def observe(self) -> ClusterState:
        self._check()
        return self.inner.observe()

    def apply(self, plan: Plan, slice_index: int) -> ApplyReport:
        self._check()
        return self.inner.apply(plan, slice_index)


def test_unreachable_controller_is_retried_with_backoff(tiny: Scenario) -> None:
    """While the executor reports its controller unreachable the loop waits 1, 2, 4 s and
    then carries on."""
    clock = FakeTime()
    flaky = Flaky(DryRunExecutor(tiny, io.StringIO(), clock=clock.time), down=3)
    lines: list[str] = []
    summary = _loop(tiny, flaky, Ledger(), clock, progress=lines.append).run(epochs=1)
    assert clock.sleeps[:3] == [1.0, 2.0, 4.0]
    assert sum("unreachable" in line for line in lines) == 3
    assert all(s.report is not None for s in summary.slices)


def test_late_arrivals_wait_for_their_submit_time(tiny: Scenario) -> None:
    """A job is submitted in the first epoch that starts after its submit time."""
    clock = FakeTime()
    ex = DryRunExecutor(tiny, io.StringIO(), clock=clock.time)
    loop = ControlLoop(tiny, ex, Ledger(), run_state=RunState(ORIGIN), slice_seconds=150.0,
                       clock=clock.time, sleep=clock.sleep)
    summary = loop.run(epochs=2)  # epochs of 600 s: j3 (10m), j4 (15m) arrive for epoch 2
    assert "j3" in summary.submitted and "j4" not in summary.submitted
    assert summary.submitted.index("j3") > summary.submitted.index("j5")


def test_adopted_jobs_join_the_queue_if_their_project_is_known(tiny: Scenario) -> None:
    """An adopted job with a known project is queued with its contract; one of an unknown
    project, an unmanaged job and a finished job are left out."""
    state = ClusterState(at=ORIGIN, jobs=(
        ObservedJob(job="mine", native_id="1", phase="held", project="infra", gpus=2,
                    min_runtime=600.0, resumable=True),
        ObservedJob(job="lost", native_id="2", phase="held", project="nobody", gpus=2),
        ObservedJob(job="theirs", native_id="3", phase="running", managed=False, gpus=2),
        ObservedJob(job="j1", native_id="4", phase="finished"),
        ObservedJob(job="j2", native_id="5", phase="running", nodes=("beta-b200-000",),
                    run_start=ORIGIN + 30),
    ))
    jobs = {js.job.id: js for js in live_jobs(tiny, state, ORIGIN)}
    assert set(jobs) == {"mine", "j2"}
    assert (jobs["mine"].status, jobs["mine"].job.min_runtime, jobs["mine"].job.resumable) == (
        "queued", 600.0, True)
    j2 = jobs["j2"]
    assert (j2.status, j2.run_start, j2.cluster, j2.gpu_type, j2.job.duration) == (
        "running", 30.0, "beta", "B200", None)


def test_run_state_is_kept_next_to_the_ledger(tmp_path: Path) -> None:
    """The first run writes its origin; later runs read it with the submitted jobs; a
    corrupt file is an error naming it."""
    path = tmp_path / "l.sqlite.run.json"
    first = RunState.load(path, 100.0)
    assert (first.origin, first.submitted) == (100.0, set())
    first.submitted.add("j1")
    first.save()
    again = RunState.load(path, 999.0)
    assert (again.origin, again.submitted) == (100.0, {"j1"})
    path.write_text("{oops")
    with pytest.raises(ValueError, match="l.sqlite.run.json: not a gpuplan run state file"):
        RunState.load(path, 5.0)


def test_a_finished_and_forgotten_job_is_not_submitted_again(tiny: Scenario, tmp_path: Path) -> None:
    """A restarted run does not resubmit jobs it submitted before, even once the cluster
    no longer lists them (here: a new, empty dryrun cluster)."""
    clock = FakeTime()
    path = tmp_path / "l.sqlite.run.json"
    state = RunState.load(path, ORIGIN)
    first = ControlLoop(tiny, DryRunExecutor(tiny, io.StringIO(), clock=clock.time), Ledger(),
                        run_state=state, slice_seconds=60.0, clock=clock.time, sleep=clock.sleep)
    assert sorted(first.run(epochs=1).submitted) == ["j1", "j2", "j5"]
    forgetful = DryRunExecutor(tiny, io.StringIO(), clock=clock.time)
    lines: list[str] = []
    second = ControlLoop(tiny, forgetful, Ledger(), run_state=RunState.load(path, 0.0),
                         slice_seconds=60.0, clock=clock.time, sleep=clock.sleep,
                         progress=lines.append)
    assert second.run(epochs=1).submitted == []
    assert forgetful.observe().jobs == ()
    assert any("not submitted again: j1, j2, j5" in line for line in lines)


def test_nodes_drained_on_the_cluster_get_no_planned_work(tiny: Scenario) -> None:
    """A node the cluster reports drained is drained in the snapshot, and no slice of the
    resulting plan uses it; a node the cluster does not report, or where a job outside the
    planner's convention runs, is treated the same way."""
    clock = FakeTime()
    ex = DryRunExecutor(tiny, io.StringIO(), clock=clock.time)
    ex.drain("beta-b200-000", "psu")
    state = ex.observe()
    theirs = ObservedJob(job="theirs", native_id="99", phase="running", managed=False, gpus=1,
                         nodes=("alpha-h100-003",), run_start=ORIGIN)
    partial = state.model_copy(update={
        "nodes": tuple(n for n in state.nodes if n.name != "alpha-h100-000"),
        "jobs": (*state.jobs, theirs),
    })
    snap = live_snapshot(tiny, partial, ORIGIN, 0.0, None)
    drained = {ns.node.name for ns in snap.nodes if ns.drained_at(0.0)}
    assert drained == {"beta-b200-000", "alpha-h100-000", "alpha-h100-003"}
    summary = _loop(tiny, ex, Ledger(), clock).run(epochs=1)
    used = {n for s in summary.plans[0].slices for a in s.assignments for n in a.nodes}
    assert used and "beta-b200-000" not in used
