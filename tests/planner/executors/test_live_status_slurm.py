"""What researchers see while ``gpuplan run`` manages a real Slurm: reasons in squeue, and
``gpuplan status --json`` agreeing with Slurm and the ledger."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from models import Job, Policy, Scenario, Workloads
from planner.ledger import Ledger

from .test_control_slurm_live import SCENARIO, LiveLoop, _records, _submit_held, _wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(150)]

REPO = Path(__file__).resolve().parents[3]
SQUEUE = ["squeue", "-h", "-O", "Name:16,admin_comment:250"]


def shown(slurm: Any) -> dict[str, str]:
    """Each job's gpuplan line as ``squeue -O admin_comment`` prints it."""
    res = slurm.run(*SQUEUE)
    assert res.returncode == 0, res.stderr
    out = {}
    for line in res.stdout.splitlines():
        name, _, text = line.strip().partition(" ")
        out[name] = text.strip()
    return out


def test_squeue_shows_why_jobs_wait_run_and_were_preempted(slurm: Any, scenario: Scenario) -> None:
    """While the loop runs: a running job under contract says until when; a waiting job
    says why; free work preempted for a debug job says when and because of whom."""
    sc = scenario.model_copy(update={"policy": Policy(slices=4, restart_overhead=0),
                                     "workloads": Workloads(jobs=(
        Job(id="c0", project="nlp", gpus=8, gpu_types=("H100",), duration=3600, min_runtime=3600),
        Job(id="c1", project="nlp", gpus=8, gpu_types=("H100",), duration=3600, min_runtime=3600),
        Job(id="filler", project="vision", gpus=8, gpu_types=("B200",), duration=3600,
            min_runtime=0, resumable=True),
        Job(id="waiter", project="nlp", gpus=8, gpu_types=("H100",), submit=1, duration=3600,
            min_runtime=600),
    ))})
    with LiveLoop(sc, slurm, policy="fairshare", slice_seconds=60.0, poll=1.0) as live:
        _wait_for("reasons shown", lambda: shown(slurm).get("c0", "").startswith("running under contract until")
                  and shown(slurm).get("waiter", "").startswith("waiting"), 40)
        waiting = shown(slurm)["waiter"]
        _submit_held(slurm, "dbg", "vision", 8, 60, 300)
        _wait_for("the preemption shown", lambda: shown(slurm).get("filler", "").startswith("preempted at"), 20)
        preempted = shown(slurm)["filler"]
    live.stop()
    assert "waiting for contracts to end" in waiting or "every pool" in waiting, waiting
    assert "dbg (vision)" in preempted, preempted


def test_status_json_agrees_with_slurm_and_the_ledger(slurm: Any, tmp_path: Path) -> None:
    """``gpuplan status --json`` during a ``gpuplan run``: the jobs it shows running are the
    ones Slurm runs, and each project's hours are the ledger's over the lookback."""
    (tmp_path / "live.yaml").write_text(SCENARIO)
    ledger = tmp_path / "ledger.sqlite"
    env = {**slurm.env, "PYTHONPATH": str(REPO)}
    run = subprocess.Popen(
        [sys.executable, "-m", "planner.cli", "run", str(tmp_path / "live.yaml"), "--executor",
         "slurm", "--policy", "fairshare", "--slice-seconds", "2", "--poll", "1",
         "--ledger", str(ledger), "-o", "retries=3"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        _wait_for("usage recorded", lambda: ledger.exists() and len(_records(ledger)) >= 3, 60, run)
        running = {}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            res = subprocess.run([sys.executable, "-m", "planner.cli", "status", "--ledger",
                                  str(ledger), "--json"], env=env, capture_output=True, text=True,
                                 timeout=30)
            assert res.returncode == 0, res.stderr
            status = json.loads(res.stdout)
            running = {j["job"] for j in status["jobs"] if j["state"].startswith("running")}
            in_slurm = set(slurm.run("squeue", "-h", "-t", "R", "-o", "%j").stdout.split())
            if running == in_slurm:
                break
            time.sleep(0.5)
        assert running == in_slurm and running, (running, in_slurm)
        # The records the status saw: all end by its time (later ones end after it). The
        # run is far shorter than the lookback, so they all count whole.
        with Ledger(ledger) as recorded:
            seen = [u for u in recorded.records() if u.end <= status["at"] + 1e-9]
        assert seen
        for p in status["projects"]:
            mine = [u for u in seen if u.project == p["project"]]
            assert p["delivered_gpu_h"] == pytest.approx(sum(u.allocated_gpu_h for u in mine), abs=1e-9)
            assert p["owed_gpu_h"] == pytest.approx(sum(u.owed_gpu_h for u in mine), abs=1e-9)
    finally:
        run.send_signal(signal.SIGTERM)
        run.communicate(timeout=30)
    assert run.returncode == 0
    assert os.path.exists(f"{ledger}.status.json")
