"""``gpuplan run --executor slurm`` against the real Slurm, killed and restarted mid-loop."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from models import Job, Plan, Policy, Scenario, Workloads
from planner.control import ControlLoop
from planner.executors import ActionResult, ApplyReport, ClusterState
from planner.executors.slurm import SlurmExecutor
from planner.ledger import Ledger
from planner.mip import plan_epoch

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(120)]

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


def _gpuplan(slurm: Any, tmp_path: Path, epochs: int) -> subprocess.Popen[str]:
    env = {**slurm.env, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "planner.cli", "run", str(tmp_path / "live.yaml"), "--executor", "slurm",
         "--epochs", str(epochs), "--slice-seconds", "3", "--ledger", str(tmp_path / "ledger.sqlite"),
         "--time-limit", "3", "-o", "retries=3"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_killed_and_restarted_run_loses_nothing(slurm: Any, tmp_path: Path) -> None:
    """A gpuplan run killed with SIGKILL after its first slices, then restarted, keeps every
    ledger record, leaves no gap in the recorded time, charges the contract job for all the
    time it ran (downtime included) and never touches it in Slurm."""
    (tmp_path / "live.yaml").write_text(SCENARIO)
    ledger = tmp_path / "ledger.sqlite"
    first = _gpuplan(slurm, tmp_path, epochs=5)
    try:
        deadline = time.monotonic() + 60
        while not (ledger.exists() and len(_records(ledger)) >= 2):
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "no usage recorded within 60 s"
            time.sleep(0.2)
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
    second = _gpuplan(slurm, tmp_path, epochs=1)
    out, err = second.communicate(timeout=90)
    assert second.returncode == 0, err
    assert "restart: recorded" in err

    after = _records(ledger)
    assert after[: len(before)] == before
    with Ledger(ledger) as recorded:
        usage = recorded.records()
    spans = sorted({(u.start, u.end) for u in usage})
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert start <= end + 1e-6, f"gap in the ledger between {end} and {start}"
    still = ex.observe().job("contract")
    assert still is not None and (still.native_id, still.run_start, still.restarts) == (
        contract.native_id, contract.run_start, 0)
    origin = float(json.loads((tmp_path / "ledger.sqlite.run.json").read_text())["origin"])
    # Charged from its start (or the first record, if it started within the first
    # planning moments) to the last record, across the kill.
    ran = spans[-1][1] - max(contract.run_start - origin, spans[0][0])
    nlp = sum(u.allocated_gpu_h for u in usage if u.project == "nlp")
    assert nlp == pytest.approx(8 * ran / 3600, rel=0.02)


class Checked:
    """Wraps the slurm executor: after each apply, waits until Slurm runs the slice."""

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
            assert time.monotonic() < deadline, f"slice {slice_index}: want {want}, Slurm runs {running}"
            time.sleep(0.3)
        held = {j.job for j in state.jobs if j.managed and j.phase == "held"}
        preempted = {r.job for r in report.changed if r.action == "preempt"}
        assert preempted <= held, f"preempted jobs not held: {preempted - held}"
        self.matched.append({j: tuple(sorted(n)) for j, n in running.items()})
        return report


def test_planned_slices_are_carried_out_by_slurm(slurm: Any, scenario: Scenario) -> None:
    """With the real planner in the loop, after every slice Slurm runs exactly the planned
    jobs on their planned nodes (plus contract-protected ones); when funded work arrives in
    the second epoch, the free job in its way is preempted and held, the contract job is not."""
    jobs = (
        Job(id="contract", project="nlp", gpus=8, gpu_types=("H100",), min_runtime=3600),
        Job(id="free", project="vision", gpus=4, gpu_types=("H100",), min_runtime=0, resumable=True),
        Job(id="late", project="vision", gpus=8, gpu_types=("H100",), submit=3, min_runtime=60,
            resumable=True),
    )
    scenario = scenario.model_copy(update={
        "policy": Policy(slices=2), "workloads": Workloads(jobs=jobs),
    })
    checked = Checked(SlurmExecutor(scenario, runner=slurm.runner))
    loop = ControlLoop(scenario, checked, Ledger(), slice_seconds=2.5,
                       plan=lambda snap, prev: plan_epoch(snap, time_limit=3.0, previous=prev))
    summary = loop.run(epochs=2)
    assert summary.submitted == ["contract", "free", "late"]
    assert len(checked.matched) == 4
    assert set(checked.matched[0]) == {"contract", "free"}
    assert set(checked.matched[-1]) == {"contract", "late"}
    assert checked.matched[0]["contract"] == checked.matched[-1]["contract"]
    actions = {(r.job, r.action) for s in summary.slices for r in s.report.changed}
    assert ("free", "preempt") in actions and ("contract", "preempt") not in actions
