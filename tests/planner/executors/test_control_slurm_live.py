"""``gpuplan run`` against the real Slurm: reacting in seconds, holes for gangs, clean stops."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from models import Job, Plan, Policy, Scenario, Workloads
from planner.control import ControlLoop, RunSummary
from planner.executors import ActionResult, ApplyReport, ClusterState
from planner.executors.slurm import SlurmExecutor
from planner.ledger import Ledger

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(150)]

REPO = Path(__file__).resolve().parents[3]

SCENARIO = """
name: live
clusters:
  - {name: alpha, node_groups: [{gpu_type: H100, nodes: 2, gpus_per_node: 8}]}
  - {name: beta, node_groups: [{gpu_type: B200, nodes: 1, gpus_per_node: 8}]}
org:
  - {name: nlp, share: 2}
  - {name: vision, share: 1}
policy: {slices: 2}
workloads:
  jobs:
    - {id: contract, project: nlp, gpus: 8, gpu_types: [H100], duration: 1h, min_runtime: 1h}
    - {id: free, project: vision, gpus: 4, gpu_types: [H100], duration: 1h, min_runtime: 0s, resumable: true}
    - {id: wide, project: vision, gpus: 8, gpu_types: [B200], duration: 1h, min_runtime: 30m, resumable: true}
"""


def _records(path: Path) -> list[tuple[object, ...]]:
    # Read with plain sqlite3, as another process would, while the loop may be writing.
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT * FROM usage ORDER BY id").fetchall()
    except sqlite3.OperationalError:  # the schema is not created yet
        return []
    finally:
        conn.close()


def _gpuplan(slurm: Any, tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**slurm.env, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "planner.cli", "run", str(tmp_path / "live.yaml"), "--executor", "slurm",
         "--slice-seconds", "3", "--poll", "1", "--ledger", str(tmp_path / "ledger.sqlite"),
         "--time-limit", "3", "-o", "retries=3", *extra],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _wait_for(what: str, check: Callable[[], bool], seconds: float, proc: Any = None) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if proc is not None:
            assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{what}: not within {seconds:g} s"
        time.sleep(0.2)


def _no_gaps(path: Path) -> list[tuple[float, float]]:
    with Ledger(path) as recorded:
        spans = sorted({(u.start, u.end) for u in recorded.records()})
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert start <= end + 1e-6, f"gap in the ledger between {end} and {start}"
    return spans


def test_killed_and_restarted_run_loses_nothing(slurm: Any, tmp_path: Path) -> None:
    """A gpuplan run killed with SIGKILL, then restarted, keeps every ledger record, leaves
    no gap in the recorded time, charges the contract job for all the time it ran
    (downtime included) and never touches it in Slurm."""
    (tmp_path / "live.yaml").write_text(SCENARIO)
    ledger = tmp_path / "ledger.sqlite"
    first = _gpuplan(slurm, tmp_path)
    try:
        _wait_for("two usage records", lambda: ledger.exists() and len(_records(ledger)) >= 2, 60, first)
        os.kill(first.pid, signal.SIGKILL)
    finally:
        first.kill()
        first.communicate()
    before = _records(ledger)
    ex = SlurmExecutor(runner=slurm.runner)
    contract = ex.observe().job("contract")
    assert contract is not None and contract.phase == "running"
    assert set(contract.nodes) <= {"alpha-h100-000", "alpha-h100-001"}

    time.sleep(2.0)  # the controller is down; Slurm keeps running the jobs
    second = _gpuplan(slurm, tmp_path, "--epochs", "1")
    out, err = second.communicate(timeout=90)
    assert second.returncode == 0, err
    assert "restart: recorded" in err

    after = _records(ledger)
    assert after[: len(before)] == before
    spans = _no_gaps(ledger)
    still = ex.observe().job("contract")
    assert still is not None and (still.native_id, still.run_start, still.restarts) == (
        contract.native_id, contract.run_start, 0)
    origin = float(json.loads((tmp_path / "ledger.sqlite.run.json").read_text())["origin"])
    with Ledger(ledger) as recorded:
        usage = recorded.records()
    # Charged from its start to the last record, across the kill. The GPUs are the job's
    # from the scheduler's decision; Slurm launches it after the plan is applied, a few
    # seconds later (at most the time limit plus Slurm's launch): that lag is charged too
    # until the loop first sees it running.
    ran = spans[-1][1] - max(contract.run_start - origin, spans[0][0])
    nlp = sum(u.allocated_gpu_h for u in usage if u.project == "nlp")
    assert 8 * ran / 3600 * 0.99 <= nlp <= 8 * (ran + 3 + 3) / 3600


def test_sigterm_stops_cleanly_and_a_restart_submits_nothing_twice(slurm: Any, tmp_path: Path) -> None:
    """SIGTERM in mid-slice: the run exits 0 having recorded usage up to the stop; the
    restarted run goes on from there (no gap) and submits no job a second time."""
    (tmp_path / "live.yaml").write_text(SCENARIO)
    ledger = tmp_path / "ledger.sqlite"
    first = _gpuplan(slurm, tmp_path, "--policy", "fairshare")
    _wait_for("two usage records", lambda: ledger.exists() and len(_records(ledger)) >= 2, 60, first)
    time.sleep(1.3)  # into the next slice
    first.send_signal(signal.SIGTERM)
    out, err = first.communicate(timeout=30)
    assert first.returncode == 0, err
    assert "received SIGTERM: stopping" in err and "usage recorded up to then" in err
    stopped_at = _no_gaps(ledger)[-1][1]
    assert stopped_at % 3 != 0  # the last record ends at the stop, not at a slice boundary

    second = _gpuplan(slurm, tmp_path, "--policy", "fairshare", "--epochs", "1")
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    spans = _no_gaps(ledger)
    assert spans[-1][1] > stopped_at
    names = slurm.run("squeue", "--all", "-h", "-o", "%j").stdout.split()
    assert sorted(names) == ["contract", "free", "wide"], names


class LiveLoop:
    """A ControlLoop on the real Slurm, run in a thread until :meth:`stop`."""

    def __init__(self, scenario: Scenario, slurm: Any, **kw: Any) -> None:
        self.executor = SlurmExecutor(scenario, runner=slurm.runner)
        self.lines: list[str] = []
        self.loop = ControlLoop(scenario, self.executor, Ledger(), progress=self.lines.append, **kw)
        self.summary: RunSummary | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.summary = self.loop.run()
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def __enter__(self) -> LiveLoop:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> RunSummary:
        self.loop.request_stop()
        self.thread.join(timeout=60)
        assert self.error is None, self.error
        assert self.summary is not None, "the loop did not stop"
        return self.summary

    def job(self, name: str) -> Any:
        return self.executor.observe().job(name)


def _submit_held(slurm: Any, name: str, project: str, gpus: int, seconds: int, min_runtime: int) -> float:
    """Submit a job to the managed partition as a user would: held, contract in the comment."""
    res = slurm.run(
        "sbatch", "--parsable", "--hold", f"--job-name={name}", "--partition=gpuplan",
        f"--comment=gpuplan job={name} project={project} min_runtime={min_runtime} resumable=1",
        "--nodes=1", f"--gres=gpu:{gpus}", "--output=/dev/null", f"--wrap=sleep {seconds}",
    )
    assert res.returncode == 0, res.stderr
    return time.time()


def _scenario(scenario: Scenario, jobs: tuple[Job, ...], slices: int = 4) -> Scenario:
    return scenario.model_copy(update={"policy": Policy(slices=slices, restart_overhead=0),
                                       "workloads": Workloads(jobs=jobs)})


@pytest.fixture()
def busy(scenario: Scenario) -> Scenario:
    """Every GPU busy: contract work on both H100 nodes, free work on the B200 node."""
    return _scenario(scenario, (
        Job(id="c0", project="nlp", gpus=8, gpu_types=("H100",), duration=3600, min_runtime=3600,
            resumable=True),
        Job(id="c1", project="nlp", gpus=8, gpu_types=("H100",), duration=3600, min_runtime=3600,
            resumable=True),
        Job(id="filler", project="vision", gpus=8, gpu_types=("B200",), duration=3600,
            min_runtime=0, resumable=True),
    ))


@pytest.mark.parametrize("poll", [2.0])
def test_a_debug_job_submitted_mid_slice_starts_within_seconds(slurm: Any, busy: Scenario,
                                                               poll: float) -> None:
    """A debug-class job a user submits held into the managed partition while every GPU is
    busy starts within poll + 5 s (it displaces free work), long before the next slice."""
    with LiveLoop(busy, slurm, policy="mip", slice_seconds=60.0, poll=poll,
                  policy_options={"time_limit": 3.0}) as live:
        _wait_for("the cluster filled", lambda: all(
            (j := live.job(n)) is not None and j.phase == "running" for n in ("c0", "c1", "filler")), 40)
        time.sleep(3.0)  # mid-slice
        submitted = _submit_held(slurm, "dbg", "vision", 2, 60, 300)
        _wait_for("the debug job running", lambda: (j := live.job("dbg")) is not None
                  and j.phase == "running", poll + 5)
        waited = time.time() - submitted
        filler = live.job("filler")
    summary = live.stop()
    assert waited <= poll + 5
    assert filler is not None and filler.phase in ("held", "completing", "running")
    assert any(r[1] == "start" and r[2] == "dbg" for r in summary.decisions)


def test_gpus_freed_by_an_early_end_are_used_before_the_slice_boundary(
        slurm: Any, scenario: Scenario) -> None:
    """A job that ends (its command exits) long before the next slice boundary: the queued
    job starts on its GPUs within seconds, not at the boundary."""
    sc = _scenario(scenario, (
        Job(id="c0", project="nlp", gpus=8, gpu_types=("H100",), duration=3600, min_runtime=3600),
        Job(id="early", project="nlp", gpus=8, gpu_types=("H100",), duration=4, min_runtime=2),
        Job(id="next", project="vision", gpus=8, gpu_types=("H100",), submit=1, duration=3600,
            min_runtime=600),
    ))
    with LiveLoop(sc, slurm, policy="mip", slice_seconds=60.0, poll=1.0,
                  policy_options={"time_limit": 3.0}) as live:
        _wait_for("the early job finished", lambda: (j := live.job("early")) is not None
                  and j.phase == "finished", 40)
        ended = time.time()
        _wait_for("the next job running", lambda: (j := live.job("next")) is not None
                  and j.phase == "running", 10)
        started = time.time()
    summary = live.stop()
    assert started - ended < 10
    starts = {r[2]: r[0] for r in summary.decisions if r[1] == "start"}
    assert starts["next"] < 60.0  # before the first slice boundary


def test_a_gang_needing_a_whole_pool_gets_its_hole(slurm: Any, scenario: Scenario) -> None:
    """A 16-GPU gang needs both H100 nodes, which non-resumable work under contract keeps
    busy with more such work queued: mip holds the nodes for it, keeps the queue off them,
    and starts the gang once the work on both has ended."""
    sc = _scenario(scenario, (
        Job(id="n0", project="nlp", gpus=8, gpu_types=("H100",), duration=20, min_runtime=6),
        Job(id="n1", project="nlp", gpus=8, gpu_types=("H100",), duration=26, min_runtime=6),
        *(Job(id=f"q{i}", project="nlp", gpus=8, gpu_types=("H100",), submit=1, duration=60,
              min_runtime=6) for i in range(3)),
        Job(id="gang", project="vision", gpus=16, gpu_types=("H100",), submit=1, duration=30,
            min_runtime=6, resumable=True),
    ))
    with LiveLoop(sc, slurm, policy="mip", slice_seconds=2.0, poll=1.0,
                  policy_options={"time_limit": 1.0, "hold_min_gpus": 16, "hold_fraction": 1.0}) as live:
        _wait_for("the gang running", lambda: (j := live.job("gang")) is not None
                  and j.phase == "running", 90)
        gang = live.job("gang")
    summary = live.stop()
    assert set(gang.nodes) == {"alpha-h100-000", "alpha-h100-001"}
    events = [(r[1], r[2]) for r in summary.decisions]
    assert ("hold", "gang") in events
    held_at = next(r[0] for r in summary.decisions if r[1] == "hold" and r[2] == "gang")
    finished = {r[2]: r[0] for r in summary.decisions if r[1] == "finish"}
    gang_start = next(r[0] for r in summary.decisions if r[1] == "start" and r[2] == "gang")
    assert gang_start >= max(finished["n0"], finished["n1"])
    # The first node to free up was kept for the gang: no queued job started on it.
    assert held_at < min(finished["n0"], finished["n1"])
    assert not [r for r in summary.decisions if r[1] == "start" and r[2].startswith("q")
                and r[0] < gang_start]


class Checked:
    """Wraps the slurm executor: after each apply, waits until Slurm runs what was asked."""

    def __init__(self, inner: SlurmExecutor) -> None:
        self.inner, self.name = inner, "checked"
        self.matched: list[dict[str, tuple[str, ...]]] = []

    def observe(self) -> ClusterState:
        return self.inner.observe()

    def submit(self, job: Job) -> ActionResult:
        return self.inner.submit(job)

    def apply(self, plan: Plan, slice_index: int) -> ApplyReport:
        report = self.inner.apply(plan, slice_index)
        assert report.ok, report.failed
        want = {a.job: set(a.nodes) for a in plan.slices[slice_index].assignments}
        protected = {r.job for r in report.results if r.action == "protect"}
        deadline = time.monotonic() + 30
        while True:
            state = self.inner.observe()
            running = {j.job: set(j.nodes) for j in state.jobs if j.managed and j.phase == "running"}
            if all(running.get(j) == n for j, n in want.items()) and set(running) <= set(want) | protected:
                break
            assert time.monotonic() < deadline, f"want {want}, Slurm runs {running}"
            time.sleep(0.3)
        held = {j.job for j in state.jobs if j.managed and j.phase == "held"}
        preempted = {r.job for r in report.changed if r.action == "preempt"}
        assert preempted <= held, f"preempted jobs not held: {preempted - held}"
        self.matched.append({j: tuple(sorted(n)) for j, n in running.items()})
        return report


def test_decisions_are_carried_out_by_slurm(slurm: Any, scenario: Scenario) -> None:
    """After every apply Slurm runs exactly the jobs the scheduler runs, on its nodes; when
    funded work arrives, the free job in its way is preempted and held, the contract job
    is not."""
    sc = _scenario(scenario, (
        Job(id="contract", project="nlp", gpus=8, gpu_types=("H100",), min_runtime=3600),
        Job(id="free", project="vision", gpus=4, gpu_types=("H100",), min_runtime=0, resumable=True),
        Job(id="late", project="vision", gpus=8, gpu_types=("H100",), submit=4, min_runtime=60,
            resumable=True),
    ), slices=2)
    checked = Checked(SlurmExecutor(sc, runner=slurm.runner))
    loop = ControlLoop(sc, checked, Ledger(), slice_seconds=5.0, poll=1.0,
                       policy_options={"time_limit": 3.0})
    summary = loop.run(epochs=2)
    assert summary.submitted == ["contract", "free", "late"]
    assert set(checked.matched[0]) == {"contract", "free"}
    assert set(checked.matched[-1]) == {"contract", "late"}
    assert checked.matched[0]["contract"] == checked.matched[-1]["contract"]
    actions = {(r.job, r.action) for report in summary.reports for r in report.changed}
    assert ("free", "preempt") in actions and ("contract", "preempt") not in actions
