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

import pytest

from planner.executors.slurm import SlurmExecutor
from planner.ledger import Ledger

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


def _gpuplan(slurm: object, tmp_path: Path, epochs: int) -> subprocess.Popen[str]:
    env = {**slurm.env, "PYTHONPATH": str(REPO)}  # type: ignore[attr-defined]
    return subprocess.Popen(
        [sys.executable, "-m", "planner.cli", "run", str(tmp_path / "live.yaml"), "--executor", "slurm",
         "--epochs", str(epochs), "--slice-seconds", "3", "--ledger", str(tmp_path / "ledger.sqlite"),
         "--time-limit", "3", "-o", "retries=3"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_killed_and_restarted_run_loses_nothing(slurm: object, tmp_path: Path) -> None:
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
    ex = SlurmExecutor(runner=slurm.runner)  # type: ignore[attr-defined]
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
    origin = float(json.loads((tmp_path / "ledger.sqlite.origin.json").read_text())["origin"])
    # Charged from its start (or the first record, if it started within the first
    # planning moments) to the last record, across the kill.
    ran = spans[-1][1] - max(contract.run_start - origin, spans[0][0])  # type: ignore[operator]
    nlp = sum(u.allocated_gpu_h for u in usage if u.project == "nlp")
    assert nlp == pytest.approx(8 * ran / 3600, rel=0.02)
