"""Prometheus metrics of a LiveStatus: names, values, the HTTP endpoint, and a real Prometheus."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from models import (
    Histogram,
    LiveStatus,
    PendingReason,
    PoolStatus,
    ProjectStatus,
    QueuedJob,
    SchedulerCounters,
)
from planner.metrics_export import registry_for, serve

PROMETHEUS = shutil.which("prometheus")


def fixed_status() -> LiveStatus:
    latency = Histogram(bounds=(10.0, 60.0)).observe(4.0).observe(25.0)
    return LiveStatus(
        at=3600.0, wall=1_767_571_200.0,
        projects=(ProjectStatus(project="research/nlp", share=0.6, owed_gpu_h=12.5, delivered_gpu_h=10.0,
                                charged_gpu_h=11.0, unallocated_gpu_h=2.0, ratio=0.88, headroom_gpu_h=3.0,
                                running_gpus=8, waiting_gpus=16),),
        queue=(QueuedJob(job="j2", project="research/nlp", gpus=16, submitted=0, wait_s=3600, position=1,
                         reason=PendingReason.NO_GANG_HOLE, text="waiting for a gang hole"),),
        pools=(PoolStatus(cluster="alpha", gpu_type="H100", capacity_gpus=16, busy_gpus=8, drained_gpus=8),),
        scheduler=SchedulerCounters(plan_seconds=0.5, gap=0.01, fallbacks_total=2,
                                    decisions_total={"start": 5, "preempt": 1},
                                    submit_to_start={"debug": latency},
                                    executor_errors_total=3, executor_retries_total=4),
    )


def samples(status: LiveStatus | None) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client import generate_latest

    text = generate_latest(registry_for(lambda: status)).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_project_and_pool_gauges_carry_the_status_values() -> None:
    """Per-project hours, ratio and GPUs, and per-pool GPUs, are gauges with units in the names."""
    got = samples(fixed_status())
    nlp = (("project", "research/nlp"),)
    assert got[("gpuplan_project_owed_gpu_hours", nlp)] == 12.5
    assert got[("gpuplan_project_delivered_gpu_hours", nlp)] == 10.0
    assert got[("gpuplan_project_charged_gpu_hours", nlp)] == 11.0
    assert got[("gpuplan_project_unallocated_gpu_hours", nlp)] == 2.0
    assert got[("gpuplan_project_standing_ratio", nlp)] == 0.88
    assert got[("gpuplan_project_running_gpus", nlp)] == 8
    assert got[("gpuplan_project_waiting_gpus", nlp)] == 16
    pool = (("cluster", "alpha"), ("gpu_type", "H100"))
    assert [got[(f"gpuplan_pool_{k}_gpus", pool)] for k in ("capacity", "busy", "drained")] == [16, 8, 8]
    assert got[("gpuplan_queue_jobs", (("reason", "no_gang_hole"),))] == 1


def test_scheduler_counters_end_in_total_and_latency_is_a_histogram() -> None:
    """Counters are _total, plan seconds and gap are gauges, latency has cumulative buckets per class."""
    got = samples(fixed_status())
    assert got[("gpuplan_scheduler_fallbacks_total", ())] == 2
    assert got[("gpuplan_scheduler_decisions_total", (("kind", "start"),))] == 5
    assert got[("gpuplan_executor_errors_total", ())] == 3
    assert got[("gpuplan_executor_retries_total", ())] == 4
    assert (got[("gpuplan_scheduler_plan_seconds", ())], got[("gpuplan_scheduler_gap_ratio", ())]) == (0.5, 0.01)
    debug = ("job_class", "debug")
    assert got[("gpuplan_submit_to_start_seconds_bucket", (debug, ("le", "10.0")))] == 1
    assert got[("gpuplan_submit_to_start_seconds_bucket", (debug, ("le", "+Inf")))] == 2
    assert got[("gpuplan_submit_to_start_seconds_sum", (debug,))] == 29.0
    # Classes without samples are exported empty, so dashboards see every class.
    assert got[("gpuplan_submit_to_start_seconds_count", (("job_class", "large"),))] == 0


def test_no_status_yet_exports_nothing() -> None:
    """Before the first status the endpoint answers with no gpuplan series."""
    assert samples(None) == {}


def test_serve_answers_on_loopback_and_reads_the_latest_status() -> None:
    """serve() binds 127.0.0.1 and each scrape reads the status the loop holds now."""
    current = {"status": fixed_status()}
    server = serve(0, lambda: current["status"])
    try:
        assert server.host == "127.0.0.1"
        first = urllib.request.urlopen(server.url, timeout=5).read().decode()
        assert 'gpuplan_project_owed_gpu_hours{project="research/nlp"} 12.5' in first
        current["status"] = current["status"].model_copy(update={"projects": ()})
        second = urllib.request.urlopen(server.url, timeout=5).read().decode()
        assert "gpuplan_project_owed_gpu_hours{" not in second
    finally:
        server.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture()
def exporter() -> Iterator[int]:
    server = serve(0, fixed_status)
    yield server.port
    server.close()


class Prometheus:
    """Debian's Prometheus on a free loopback port, scraping ``target`` every second."""

    def __init__(self, tmp_path: Path, target: int) -> None:
        if PROMETHEUS is None:
            pytest.skip("the prometheus binary is not installed (apt install prometheus; .ci/run does)")
        self.port = _free_port()
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: gpuplan\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{target}']\n"
        )
        self.log = tmp_path / "prometheus.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path,
            )

    def query(self, expr: str, want: float, seconds: float = 60) -> dict[str, object]:
        """The first series of ``expr`` once its value is ``want`` (waits for scrapes)."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?query={urllib.parse.quote(expr)}"
        deadline = time.monotonic() + seconds
        seen: list[dict[str, object]] = []
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"prometheus exited: {self.log.read_text()[-2000:]}"
            try:
                seen = json.loads(urllib.request.urlopen(url, timeout=5).read())["data"]["result"]
            except OSError:
                seen = []  # not listening yet
            if seen and float(seen[0]["value"][1]) == want:  # type: ignore[index]
                return seen[0]
            time.sleep(0.5)
        raise AssertionError(f"{expr}: {seen} after {seconds:g} s, want {want}: "
                             f"{self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.mark.timeout(120)
def test_real_prometheus_scrapes_the_exporter(tmp_path: Path, exporter: int) -> None:
    """Debian's Prometheus scrapes the exporter and its HTTP API returns the project's series."""
    prom = Prometheus(tmp_path, exporter)
    try:
        series = prom.query('gpuplan_project_owed_gpu_hours{project="research/nlp"}', 12.5)
        assert series["metric"]["job"] == "gpuplan"  # type: ignore[index]
    finally:
        prom.stop()


@pytest.mark.timeout(150)
def test_real_prometheus_scrapes_a_gpuplan_run(tmp_path: Path) -> None:
    """``gpuplan run --metrics-port`` under test (tiny, dryrun, fairshare): Prometheus scrapes
    it and sees research/nlp running its two first jobs (16 + 8 GPUs) and the pools' size."""
    port = _free_port()
    repo = Path(__file__).resolve().parents[2]
    run = subprocess.Popen(
        [sys.executable, "-m", "planner.cli", "run", "tiny", "--policy", "fairshare",
         "--ledger", str(tmp_path / "l.sqlite"), "--poll", "1", "--metrics-port", str(port),
         "-o", f"log={tmp_path / 'actions.jsonl'}"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(repo)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    prom = Prometheus(tmp_path, port)
    try:
        prom.query('gpuplan_project_running_gpus{project="research/nlp"}', 24)
        prom.query('gpuplan_pool_capacity_gpus{cluster="alpha",gpu_type="H100"}', 32)
        prom.query('gpuplan_scheduler_decisions_total{kind="start"}', 3)
    finally:
        prom.stop()
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=30)
    assert run.returncode == 0, err
