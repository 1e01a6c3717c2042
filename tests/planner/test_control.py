"""The live control loop, driven with a fake clock against the dryrun executor."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

import planner.control
from models import Cluster, Job, NodeGroup, OrgUnit, Plan, Policy, Scenario, Workloads
from planner.control import ControlLoop, RunState
from planner.executors import (
    ActionResult,
    ApplyReport,
    ClusterState,
    ExecutorFailure,
    ExecutorUnavailable,
    ObservedJob,
    ObservedNode,
)
from planner.executors.dryrun import DryRunExecutor
from planner.ledger import Ledger
from planner.scheduler import Scheduler
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


def _loop(scenario: Scenario, ex: Any, ledger: Ledger, clock: FakeTime, **kw: Any) -> ControlLoop:
    kw.setdefault("policy", "fairshare")
    kw.setdefault("run_state", RunState(ORIGIN))
    return ControlLoop(scenario, ex, ledger, slice_seconds=60.0, poll=5.0,
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


def _starts(decisions: list[tuple[Any, ...]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for row in decisions:
        if row[1] in ("start", "resume"):
            out.setdefault(row[2], row[0])
    return out


def one_pool(jobs: list[Job], nodes: int = 2) -> Scenario:
    """One cluster of ``nodes`` 8-GPU H100 nodes, two projects, 4 slices of 15 min."""
    return Scenario(
        name="live",
        clusters=(Cluster(name="alpha", node_groups=(NodeGroup(gpu_type="H100", nodes=nodes),)),),
        org=(OrgUnit(name="a", share=1), OrgUnit(name="b", share=1)),
        policy=Policy(epoch=3600.0, slices=4, restart_overhead=0.0),
        workloads=Workloads(jobs=tuple(jobs)),
    )


def test_usage_is_recorded_without_gaps_and_equals_what_ran(tiny: Scenario) -> None:
    """Charge points one slice apart cover the whole run; what they record is the GPUs the
    dryrun cluster ran times the time they ran."""
    clock = FakeTime()
    ex = DryRunExecutor(tiny, io.StringIO(), clock=clock.time)
    ledger = Ledger()
    summary = _loop(tiny, ex, ledger, clock).run(epochs=1)  # 4 slices of 60 s
    assert sorted(summary.submitted) == ["j1", "j2", "j5"]  # the jobs submitted at 0s
    assert _covered(ledger) == [(0.0, 240.0)]
    assert {(u.start, u.end) for u in ledger.records()} == {(0, 60), (60, 120), (120, 180), (180, 240)}
    rates = {n.name: tiny.rate(n.gpu_type) for n in tiny.nodes}
    running = [j for j in ex.observe().jobs if j.phase == "running"]
    assert {j.job for j in running} == {"j1", "j2", "j5"}
    gpu_h = sum(j.gpus * rates[j.nodes[0]] for j in running) * 240 / 3600
    delivered = sum(u.allocated_gpu_h + u.unallocated_gpu_h for u in ledger.records())
    assert delivered == pytest.approx(gpu_h)


def test_a_job_arriving_mid_slice_starts_at_once() -> None:
    """A debug job whose submit time falls inside a slice is submitted and started when its
    time comes, not at the next epoch (nor the next slice)."""
    jobs = [Job(id="long", project="a", gpus=8, duration=7200.0, min_runtime=3600.0),
            Job(id="debug", project="b", gpus=2, submit=437.0, duration=600.0, min_runtime=300.0)]
    sc = one_pool(jobs)
    for policy in ("fairshare", "mip"):
        clock = FakeTime()
        ex = DryRunExecutor(sc, io.StringIO(), clock=clock.time)
        summary = ControlLoop(sc, ex, Ledger(), policy=policy, run_state=RunState(ORIGIN),
                              poll=5.0, clock=clock.time, sleep=clock.sleep).run(epochs=1)
        assert _starts(summary.decisions)["debug"] == pytest.approx(437.0), policy
        assert ex.observe().job("debug") is not None


def test_gpus_freed_early_are_used_again_before_the_next_slice() -> None:
    """When a job ends mid-slice, a queued job starts on its GPUs at that moment."""
    jobs = [Job(id="short", project="a", gpus=8, duration=500.0, min_runtime=300.0),
            Job(id="other", project="a", gpus=8, duration=7200.0, min_runtime=3600.0),
            Job(id="waiting", project="b", gpus=8, submit=60.0, duration=3600.0, min_runtime=600.0)]
    sc = one_pool(jobs)
    clock = FakeTime()
    ex = DryRunExecutor(sc, io.StringIO(), clock=clock.time)
    summary = ControlLoop(sc, ex, Ledger(), policy="mip", run_state=RunState(ORIGIN), poll=5.0,
                          clock=clock.time, sleep=clock.sleep).run(epochs=1)
    finished = [r[0] for r in summary.decisions if r[1] == "finish" and r[2] == "short"]
    assert finished == [pytest.approx(500.0)]
    start = _starts(summary.decisions)["waiting"]
    assert 500.0 <= start < 900.0  # the slice boundary is at 900 s


def test_restart_loses_nothing_from_the_ledger(tiny: Scenario, tmp_path: Path) -> None:
    """A new loop on the same ledger and origin keeps every record, takes over the jobs it
    finds running, and charges the time they ran while no controller was running."""
    clock = FakeTime()
    ex = DryRunExecutor(tiny, io.StringIO(), clock=clock.time)
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as ledger:
        _loop(tiny, ex, ledger, clock).run(epochs=1)
        before = ledger.records()
    clock.t += 300  # the controller is down for five minutes; the jobs keep running
    lines: list[str] = []
    with Ledger(path) as ledger:
        summary = _loop(tiny, ex, ledger, clock, progress=lines.append).run(epochs=1)
        after = ledger.records()
    assert after[: len(before)] == before
    assert summary.charged_from == 240.0
    assert any("restart: recorded from the ledger's last record at 240s" in line for line in lines)
    assert _covered(Ledger(path)) == [(0.0, 780.0)]
    # Continuously running jobs are charged for the whole 780 s, downtime included.
    j5 = next(j for j in tiny.jobs if j.id == "j5")
    infra = sum(u.allocated_gpu_h for u in after if u.project == "infra")
    assert infra == pytest.approx(j5.gpus * tiny.rate("B200") * 780 / 3600)
    # The jobs found running were taken over, not started again.
    assert not any(r[1] in ("start", "resume") for r in summary.decisions if r[2] == "j5")


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
    inner = DryRunExecutor(tiny, io.StringIO(), clock=clock.time)
    for job in tiny.jobs[:2]:
        inner.submit(job)
    flaky = Flaky(inner, down=3)
    lines: list[str] = []
    summary = _loop(tiny, flaky, Ledger(), clock, progress=lines.append).run(epochs=1)
    assert clock.sleeps[:3] == [1.0, 2.0, 4.0]
    assert sum("unreachable" in line for line in lines) == 3
    assert summary.reports and all(r.ok for r in summary.reports)


def test_a_stop_ends_the_retries_of_an_apply_at_once(tiny: Scenario) -> None:
    """With the controller unreachable for applies, a stop asked for during the first
    wait ends the retrying (the plan is not applied) instead of retrying to the end of
    the slice, and the loop stops with its usage recorded."""
    clock = FakeTime()
    inner = DryRunExecutor(tiny, io.StringIO(), clock=clock.time)
    for job in tiny.jobs[:2]:
        inner.submit(job)
    flaky = Flaky(inner, down=0)
    applies = []

    def apply(plan: Plan, slice_index: int) -> ApplyReport:
        applies.append(clock.t)
        raise ExecutorUnavailable("controller down")

    flaky.apply = apply  # type: ignore[method-assign]
    lines: list[str] = []
    ledger = Ledger()
    loop = _loop(tiny, flaky, ledger, clock, progress=lines.append)

    def sleep(seconds: float) -> None:
        if applies:
            loop.request_stop()
        clock.sleep(seconds)

    loop.sleep = sleep
    summary = loop.run(epochs=1)
    assert len(applies) == 2  # the first try and one retry, then the stop
    assert summary.stopped and not summary.reports
    assert any("not applied" in line for line in lines)
    assert _covered(ledger) and _covered(ledger)[0][0] == 0.0


def test_arrivals_are_submitted_when_their_time_comes(tiny: Scenario) -> None:
    """Each scenario job is submitted at its submit time (j3 at 10 min, j4 at 15 min), not
    at an epoch boundary."""
    clock = FakeTime()
    ex = DryRunExecutor(tiny, io.StringIO(), clock=clock.time)
    submitted_at: dict[str, float] = {}
    real_submit = ex.submit

    def submit(job: Job) -> Any:
        submitted_at[job.id] = clock.t - ORIGIN
        return real_submit(job)

    ex.submit = submit  # type: ignore[method-assign]
    _loop(tiny, ex, Ledger(), clock).run(epochs=5)  # 5 epochs of 240 s
    assert submitted_at["j3"] == pytest.approx(600.0)
    assert submitted_at["j4"] == pytest.approx(900.0)
    assert "j6" not in submitted_at  # submitted at 30 min, after the run's 20 min


class Static:
    """A cluster that reports a fixed state and records what it is asked to apply."""

    name = "static"

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.plans: list[Plan] = []

    def observe(self) -> ClusterState:
        return self.state

    def apply(self, plan: Plan, slice_index: int) -> ApplyReport:
        self.plans.append(plan)
        return ApplyReport(slice_index=slice_index, at=self.state.at)


def test_adopted_jobs_join_the_queue_if_their_project_is_known(tiny: Scenario) -> None:
    """A job users submitted into the managed partition with a known project is queued with
    its contract (and started); one of an unknown project, an unmanaged job and a finished
    job are left out; a job found running is taken over with its start time."""
    clock = FakeTime()
    state = ClusterState(at=ORIGIN, nodes=(), jobs=(
        ObservedJob(job="mine", native_id="1", phase="held", project="infra", gpus=2,
                    min_runtime=600.0, resumable=True),
        ObservedJob(job="lost", native_id="2", phase="held", project="nobody", gpus=2),
        ObservedJob(job="theirs", native_id="3", phase="running", managed=False, gpus=2),
        ObservedJob(job="j1", native_id="4", phase="finished"),
        ObservedJob(job="j2", native_id="5", phase="running", nodes=("beta-b200-000",),
                    run_start=ORIGIN - 30),
    ))
    nodes = DryRunExecutor(tiny, io.StringIO(), clock=clock.time).observe().nodes
    cluster = Static(state.model_copy(update={"nodes": nodes}))
    loop = _loop(tiny, cluster, Ledger(), clock)
    loop.run(epochs=1)
    core = loop.core
    assert core is not None
    assert "lost" not in core.by_id and "theirs" not in core.by_id
    mine = core.by_id["mine"]
    assert (mine.job.min_runtime, mine.job.resumable, mine.status) == (600.0, True, "running")
    j2 = core.by_id["j2"]
    assert (j2.status, j2.run_start, j2.nodes) == ("running", -30.0, ("beta-b200-000",))
    assert core.by_id["j1"].status == "future"  # finished on the cluster: never queued


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
    first = _loop(tiny, DryRunExecutor(tiny, io.StringIO(), clock=clock.time), Ledger(),
                  clock, run_state=RunState.load(path, ORIGIN))
    assert sorted(first.run(epochs=1).submitted) == ["j1", "j2", "j5"]
    forgetful = DryRunExecutor(tiny, io.StringIO(), clock=clock.time)
    lines: list[str] = []
    second = _loop(tiny, forgetful, Ledger(), clock, run_state=RunState.load(path, clock.time()),
                   progress=lines.append)
    assert second.run(epochs=1).submitted == []
    assert forgetful.observe().jobs == ()
    assert any("not submitted again: j1, j2, j5" in line for line in lines)


def test_nodes_drained_on_the_cluster_get_no_work(tiny: Scenario) -> None:
    """A node the cluster reports drained, one it does not report, and one where a job
    outside the planner's convention runs, get no work."""
    clock = FakeTime()
    ex = DryRunExecutor(tiny, io.StringIO(), clock=clock.time)
    ex.drain("beta-b200-000", "psu")
    for job in tiny.jobs:
        ex.submit(job)

    class Partial(DryRunExecutor):
        def observe(self) -> ClusterState:
            seen = super().observe()
            theirs = ObservedJob(job="theirs", native_id="99", phase="running", managed=False,
                                 gpus=1, nodes=("alpha-h100-003",), run_start=ORIGIN)
            return seen.model_copy(update={
                "nodes": tuple(n for n in seen.nodes if n.name != "alpha-h100-000"),
                "jobs": (*seen.jobs, theirs),
            })

    partial = Partial(tiny, io.StringIO(), clock=clock.time)
    partial._jobs, partial._drained = ex._jobs, ex._drained
    summary = _loop(tiny, partial, Ledger(), clock).run(epochs=2)
    used = {n for row in summary.decisions if row[1] in ("start", "resume") for n in row[5].split(",")}
    assert used, "nothing started"
    assert not used & {"beta-b200-000", "alpha-h100-000", "alpha-h100-003"}


def test_a_stop_request_records_usage_up_to_the_stop(tiny: Scenario) -> None:
    """A stop in mid-slice ends the loop at once and charges the partial slice."""
    clock = FakeTime()
    ex = DryRunExecutor(tiny, io.StringIO(), clock=clock.time)
    ledger = Ledger()
    loop = _loop(tiny, ex, ledger, clock)
    real_sleep = clock.sleep

    def sleep(seconds: float) -> None:
        real_sleep(seconds)
        if clock.t - ORIGIN >= 90:
            loop.request_stop()

    loop.sleep = sleep
    summary = loop.run()  # no bound: runs until stopped
    assert summary.stopped
    assert 90 <= summary.end < 100
    assert _covered(ledger) == [(0.0, summary.end)]


def test_each_decision_is_one_log_line_with_its_reason(tiny: Scenario) -> None:
    """The loop reports every start and preemption as one line naming the job, the action
    and the reason."""
    clock = FakeTime()
    ex = DryRunExecutor(tiny, io.StringIO(), clock=clock.time)
    lines: list[str] = []
    _loop(tiny, ex, Ledger(), clock, progress=lines.append).run(epochs=1)
    starts = [line for line in lines if " start j" in line]
    assert len(starts) == 3
    assert all("GPUs]" in line and " on " in line and "(charged" in line for line in starts)


def test_a_long_run_keeps_its_memory_bounded(tiny: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    """A service runs for months: the scheduler's log and the summary's decision rows are
    cut to the latest LOG_KEEP, while the counts by kind keep every decision."""
    import planner.control as control

    monkeypatch.setattr(control, "LOG_KEEP", 3)
    clock = FakeTime()
    ex = DryRunExecutor(tiny, io.StringIO(), clock=clock.time)
    loop = _loop(tiny, ex, Ledger(), clock)
    summary = loop.run(epochs=30)  # two simulated hours of 60-s slices
    assert loop.core is not None
    assert len(loop.core.log) <= 6 and len(summary.decisions) <= 6
    assert sum(summary.counts.values()) > 6
    assert summary.counts["start"] >= len({r[2] for r in summary.decisions if r[1] == "start"})


class Broken(Flaky):
    """A plugin that breaks after ``after`` seconds of scenario time: its observe raises
    OSError, or its apply returns None."""

    def __init__(self, inner: DryRunExecutor, clock: FakeTime, after: float, how: str) -> None:
        super().__init__(inner, down=0)
        self.clock, self.after, self.how, self.name = clock, after, how, "broken"
        self.submit = inner.submit

    def observe(self) -> ClusterState:
        if self.how == "observe" and self.clock.t - ORIGIN >= self.after:
            raise OSError("socket closed")
        return self.inner.observe()

    def apply(self, plan: Plan, slice_index: int) -> ApplyReport:
        if self.how == "apply" and self.clock.t - ORIGIN >= self.after:
            return None  # type: ignore[return-value]
        return self.inner.apply(plan, slice_index)


def test_an_executor_error_mid_run_stops_it_with_usage_recorded(tiny: Scenario) -> None:
    """An observe raising something other than ExecutorUnavailable stops the run with an
    error naming the executor and the method, after charging usage up to that moment."""
    clock = FakeTime()
    broken = Broken(DryRunExecutor(tiny, io.StringIO(), clock=clock.time), clock, 90.0, "observe")
    ledger = Ledger()
    lines: list[str] = []
    with pytest.raises(ExecutorFailure, match=r"executor 'broken': observe\(\) failed: OSError: socket closed"):
        _loop(tiny, broken, ledger, clock, progress=lines.append).run(epochs=1)
    assert 90.0 <= _covered(ledger)[-1][1] < 100.0
    assert lines[-1].startswith("stopped at ")


def test_apply_returning_none_is_a_failure_not_a_success(tiny: Scenario) -> None:
    """An apply that returns no report stops the run naming the method, instead of
    counting the starts it did not make as done."""
    clock = FakeTime()
    broken = Broken(DryRunExecutor(tiny, io.StringIO(), clock=clock.time), clock, 0.0, "apply")
    with pytest.raises(ExecutorFailure, match=r"'broken': apply\(\) returned None; expected ApplyReport"):
        _loop(tiny, broken, Ledger(), clock).run(epochs=1)


def test_an_executor_that_cannot_submit_is_warned_about_once(tiny: Scenario) -> None:
    """Scenario jobs an executor without submit() would silently never run: one warning."""
    clock = FakeTime()
    lines: list[str] = []
    flaky = Flaky(DryRunExecutor(tiny, io.StringIO(), clock=clock.time), down=0)
    _loop(tiny, flaky, Ledger(), clock, progress=lines.append).run(epochs=1)
    warnings = [line for line in lines if "cannot submit" in line]
    assert len(warnings) == 1 and "'flaky'" in warnings[0]


def test_node_names_spelt_otherwise_are_warned_about_by_name(tiny: Scenario) -> None:
    """A node the executor reports under another spelling (case included) is named in one
    warning, with the scenario's nodes it does not report."""
    ours = tiny.nodes[0].name
    theirs = ours.upper()
    reported = (ObservedNode(name=theirs, native=theirs, gpus=8),
                *(ObservedNode(name=n.name, native=n.name, gpus=8) for n in tiny.nodes[1:]))
    lines: list[str] = []
    _loop(tiny, Static(ClusterState(at=ORIGIN, nodes=reported)), Ledger(), FakeTime(),
          progress=lines.append).run(epochs=1)
    warnings = [line for line in lines if "node names must match" in line]
    assert len(warnings) == 1
    assert f"({ours})" in warnings[0] and f"({theirs})" in warnings[0]


class RefusesOnce(Flaky):
    """Its cluster refuses the first submit of each job (a transient error)."""

    def __init__(self, inner: DryRunExecutor) -> None:
        super().__init__(inner, down=0)
        self.name = "refuses-once"
        self.refused: set[str] = set()

    def submit(self, job: Job) -> ActionResult:
        if job.id not in self.refused:
            self.refused.add(job.id)
            return ActionResult(job=job.id, action="submit", ok=False, detail="try later")
        return self.inner.submit(job)


def test_a_refused_submit_is_tried_again_in_the_same_run(tiny: Scenario) -> None:
    """Every first submit is refused: each job is submitted a poll later, in this run,
    and the refusals count as failed actions."""
    clock = FakeTime()
    ex = RefusesOnce(DryRunExecutor(tiny, io.StringIO(), clock=clock.time))
    lines: list[str] = []
    summary = _loop(tiny, ex, Ledger(), clock, progress=lines.append).run(epochs=1)
    due = [j.id for j in tiny.jobs if j.submit <= 60.0 * 4 - 5.0]
    assert due and set(due) <= set(summary.submitted)
    assert summary.failed_total >= len(due)
    assert any("trying again in 5s" in line for line in lines)


def test_a_restart_keeps_free_work_uncharged(tiny: Scenario, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A funded job the first run started as free work (uncharged) is written to the run
    state, and the restarted run adopts it uncharged: its project is charged nothing,
    downtime included."""
    class InfraFree(Scheduler):
        """Starts infra's jobs uncharged, as a plan that runs them as free work does."""

        def start(self, run: Any, pool: Any, nodes: tuple[str, ...], **kw: Any) -> None:
            kw["charged"] = kw.get("charged", True) and run.job.project != "infra"
            super().start(run, pool, nodes, **kw)

    clock = FakeTime()
    ex = DryRunExecutor(tiny, io.StringIO(), clock=clock.time)
    path = tmp_path / "ledger.sqlite"
    state_path = tmp_path / "ledger.sqlite.run.json"
    with monkeypatch.context() as m:
        m.setattr(planner.control, "Scheduler", InfraFree)
        with Ledger(path) as ledger:
            _loop(tiny, ex, ledger, clock, run_state=RunState.load(state_path, ORIGIN)).run(epochs=1)
    assert RunState.load(state_path, clock.time()).free == {"j5"}
    clock.t += 300
    with Ledger(path) as ledger:
        loop = _loop(tiny, ex, ledger, clock, run_state=RunState.load(state_path, clock.time()))
        loop.run(epochs=1)
        records = ledger.records()
    assert loop.core is not None and loop.core.by_id["j5"].status == "running"
    assert not loop.core.by_id["j5"].charged
    infra = [u for u in records if u.project == "infra"]
    assert sum(u.unallocated_gpu_h for u in infra) > 0
    assert sum(u.allocated_gpu_h for u in infra) == 0.0


def test_a_job_waiting_at_a_restart_keeps_its_wait(tmp_path: Path) -> None:
    """Three 8-GPU jobs at 0 on two nodes: one waits. After a restart 10 minutes on, the
    live status counts its wait from its arrival, not from the restart."""
    jobs = [Job(id=f"j{i}", project="a", gpus=8, duration=36000.0, min_runtime=3600.0)
            for i in range(3)]
    scenario = one_pool(jobs)
    clock = FakeTime()
    ex = DryRunExecutor(scenario, io.StringIO(), clock=clock.time)
    path = tmp_path / "ledger.sqlite"
    state_path = tmp_path / "ledger.sqlite.run.json"
    with Ledger(path) as ledger:
        _loop(scenario, ex, ledger, clock, run_state=RunState.load(state_path, ORIGIN)).run(epochs=1)
    clock.t = ORIGIN + 600.0
    with Ledger(path) as ledger:
        loop = _loop(scenario, ex, ledger, clock, run_state=RunState.load(state_path, clock.time()))
        loop.run(epochs=1)
    assert loop.core is not None
    waiting = [r for r in loop.core.runs if r.status == "queued"]
    assert [r.job.id for r in waiting] == ["j2"]
    assert waiting[0].queued_at == 0.0
    status = loop.status.latest()
    assert status is not None
    # Published at its last decision, after the restart: the wait is all of the time since 0.
    assert status.at >= 600.0
    assert [(q.job, q.wait_s) for q in status.queue] == [("j2", status.at)]
