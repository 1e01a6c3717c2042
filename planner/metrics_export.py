"""Prometheus ``/metrics`` for ``gpuplan run --metrics-port``: a :class:`models.LiveStatus` as metrics.

A driver-level module (the live loop's, not the core's): it imports ``prometheus_client``
and serves HTTP. The collector reads the latest status through a callable at each scrape,
so the loop only swaps in a new snapshot and never waits on a scraper. Every metric is
documented in ``docs/executors.md`` (operations).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from threading import Thread
from typing import TYPE_CHECKING

from prometheus_client import start_http_server
from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from models import JOB_CLASSES, Histogram, LiveStatus

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

StatusSource = Callable[[], LiveStatus | None]
"""Returns the latest status, or ``None`` before the first one."""

PROJECT_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("gpuplan_project_owed_gpu_hours", "owed_gpu_h",
     "H100-equivalent GPU-hours the project was owed over the lookback window"),
    ("gpuplan_project_delivered_gpu_hours", "delivered_gpu_h",
     "H100-equivalent GPU-hours of funded (allocated) work delivered over the lookback window"),
    ("gpuplan_project_charged_gpu_hours", "charged_gpu_h",
     "H100-equivalent GPU-hours charged to the budget over the lookback (urgent work counts more)"),
    ("gpuplan_project_unallocated_gpu_hours", "unallocated_gpu_h",
     "H100-equivalent GPU-hours of free (unallocated) work over the lookback window"),
    ("gpuplan_project_standing_ratio", "ratio",
     "Charged over owed GPU-hours over the lookback: the fair-share sort key, lower goes first"),
    ("gpuplan_project_share_ratio", "share", "The project's effective share of total capacity (0-1)"),
    ("gpuplan_project_headroom_gpu_hours", "headroom_gpu_h",
     "H100-equivalent GPU-hours the project may still charge in the coming epoch"),
    ("gpuplan_project_running_gpus", "running_gpus", "GPUs the project's jobs run on now"),
    ("gpuplan_project_waiting_gpus", "waiting_gpus", "GPUs the project's waiting jobs ask for"),
)

POOL_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("gpuplan_pool_capacity_gpus", "capacity_gpus", "GPUs in the pool"),
    ("gpuplan_pool_busy_gpus", "busy_gpus", "GPUs of the pool running jobs now"),
    ("gpuplan_pool_drained_gpus", "drained_gpus", "GPUs of the pool on drained nodes"),
)


class LiveStatusCollector:
    """A ``prometheus_client`` collector of the status ``source`` returns at scrape time."""

    def __init__(self, source: StatusSource) -> None:
        self.source = source

    def describe(self) -> list[Metric]:
        # Describing nothing keeps registration from calling collect() (and the source).
        return []

    def collect(self) -> Iterator[Metric]:
        status = self.source()
        if status is None:
            return
        yield from self._projects(status)
        yield from self._pools(status)
        yield from self._scheduler(status)

    def _projects(self, status: LiveStatus) -> Iterator[Metric]:
        for name, field, doc in PROJECT_GAUGES:
            g = GaugeMetricFamily(name, doc, labels=["project"])
            for p in status.projects:
                g.add_metric([p.project], float(getattr(p, field)))
            yield g
        queued = GaugeMetricFamily("gpuplan_queue_jobs", "Waiting jobs by pending reason",
                                   labels=["reason"])
        counts: dict[str, int] = {}
        for q in status.queue:
            key = q.reason.value if q.reason is not None else "not_planned_yet"
            counts[key] = counts.get(key, 0) + 1
        for reason, n in sorted(counts.items()):
            queued.add_metric([reason], n)
        yield queued

    def _pools(self, status: LiveStatus) -> Iterator[Metric]:
        for name, field, doc in POOL_GAUGES:
            g = GaugeMetricFamily(name, doc, labels=["cluster", "gpu_type"])
            for p in status.pools:
                g.add_metric([p.cluster, p.gpu_type], float(getattr(p, field)))
            yield g

    def _scheduler(self, status: LiveStatus) -> Iterator[Metric]:
        s = status.scheduler
        yield GaugeMetricFamily("gpuplan_status_timestamp_seconds",
                                "POSIX time of the status these metrics show", value=status.wall)
        yield GaugeMetricFamily("gpuplan_scenario_time_seconds",
                                "Scenario time of the status (seconds since the run's origin)",
                                value=status.at)
        if s.plan_seconds is not None:
            yield GaugeMetricFamily("gpuplan_scheduler_plan_seconds",
                                    "Seconds the last plan took", value=s.plan_seconds)
        if s.gap is not None:
            yield GaugeMetricFamily("gpuplan_scheduler_gap_ratio",
                                    "Relative optimality gap of the last plan (0 = proven optimal)",
                                    value=s.gap)
        yield CounterMetricFamily("gpuplan_scheduler_fallbacks",
                                  "Plans that fell back to the greedy plan", value=s.fallbacks_total)
        decisions = CounterMetricFamily("gpuplan_scheduler_decisions",
                                        "Scheduler decisions by kind", labels=["kind"])
        for kind, n in sorted(s.decisions_total.items()):
            decisions.add_metric([kind], n)
        yield decisions
        latency = HistogramMetricFamily(
            "gpuplan_submit_to_start_seconds",
            "Seconds from a job's submission to its first start, by job class", labels=["job_class"],
        )
        for job_class in JOB_CLASSES:
            h = s.submit_to_start.get(job_class) or Histogram()
            buckets = [(_le(bound), float(n)) for bound, n in h.cumulative()]
            latency.add_metric([job_class], buckets, sum_value=h.sum)
        yield latency
        yield CounterMetricFamily("gpuplan_executor_errors",
                                  "Executor actions that failed", value=s.executor_errors_total)
        yield CounterMetricFamily("gpuplan_executor_retries",
                                  "Executor calls retried while the cluster was unreachable",
                                  value=s.executor_retries_total)


def _le(bound: float) -> str:
    # The bucket label as prometheus_client's own histograms write it ("10.0", "+Inf").
    return "+Inf" if bound == float("inf") else repr(float(bound))


def registry_for(source: StatusSource) -> CollectorRegistry:
    """A registry holding only the gpuplan collector (no process or platform metrics)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LiveStatusCollector(source))
    return registry


@dataclass
class MetricsServer:
    """A running ``/metrics`` endpoint; :meth:`close` stops it."""

    host: str
    port: int
    server: WSGIServer
    thread: Thread

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def serve(port: int, get_status: StatusSource, *, host: str = "127.0.0.1") -> MetricsServer:
    """Serve ``/metrics`` for ``get_status`` on ``host:port`` in a daemon thread.

    ``port=0`` picks a free port (see :attr:`MetricsServer.port`). The default host is
    loopback: put a reverse proxy or Prometheus on the same host in front of it, or pass
    ``host="0.0.0.0"`` deliberately.

    Raises
    ------
    OSError
        When the port cannot be bound (in use, or not permitted).
    """
    server, thread = start_http_server(port, addr=host, registry=registry_for(get_status))
    return MetricsServer(host=host, port=int(server.server_port), server=server, thread=thread)
