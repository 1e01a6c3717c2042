"""One snapshot of the live scheduler, as `gpuplan status`, the metrics and the app read it.

``gpuplan run`` builds a :class:`LiveStatus` after each decision and writes it next to the
ledger (``planner.status_file``); readers never touch the run itself. GPU amounts are
H100-equivalent GPU-hours where the name says ``gpu_h`` and physical GPUs where it says
``gpus``. ``at`` and the queue's and preemptions' times are scenario seconds (from the
run's origin, as in the ledger); ``wall`` and ``origin`` are POSIX seconds.
"""

from __future__ import annotations

import bisect
from typing import Literal

from pydantic import Field, model_validator

from models.base import Frozen
from models.plan import PendingReason

JobClass = Literal["debug", "batch", "large"]
"""Wait class of a job by its shape (``planner.scheduler.state.wait_class``)."""

JOB_CLASSES: tuple[JobClass, ...] = ("debug", "batch", "large")

LATENCY_BUCKETS: tuple[float, ...] = (
    1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0,
    28800.0, 86400.0,
)
"""Upper bounds (seconds) of the submit-to-start histogram: the institute's debug target
(30 s) and its old p90 (2 h) both fall on a bound."""

JobStateKind = Literal[
    "waiting", "running_contract", "running_preemptible", "preempted", "suspended"
]


class ProjectStatus(Frozen):
    """One project's standing now, over the lookback window ending at ``LiveStatus.at``.

    ``delivered_gpu_h`` is allocated (funded) time delivered, ``charged_gpu_h`` what that
    cost its budget (urgent work counts more), ``unallocated_gpu_h`` free time on idle
    GPUs. ``ratio`` is charged over owed (the fair-share sort key: lower goes first).
    """

    project: str
    share: float = Field(ge=0)
    owed_gpu_h: float = Field(ge=0)
    delivered_gpu_h: float = Field(ge=0)
    charged_gpu_h: float = Field(ge=0)
    unallocated_gpu_h: float = Field(ge=0)
    ratio: float = Field(ge=0)
    headroom_gpu_h: float = Field(ge=0)
    running_gpus: int = Field(default=0, ge=0)
    waiting_gpus: int = Field(default=0, ge=0)


class QueuedJob(Frozen):
    """A waiting job: where it stands in the queue and why it waits.

    ``position`` counts from 1 in the order the scheduler would start jobs; ``reason``
    is ``None`` when the job arrived after the last plan (not yet decided on).
    """

    job: str
    project: str
    user: str = ""
    gpus: int = Field(ge=1)
    submitted: float
    wait_s: float = Field(ge=0)
    position: int = Field(ge=1)
    reason: PendingReason | None = None
    text: str


class Preemption(Frozen):
    """A recent preemption: which job, when (scenario seconds) and why, in plain words."""

    job: str
    project: str
    user: str = ""
    at: float
    reason: str


class PoolStatus(Frozen):
    """GPUs of one pool (cluster and GPU type) now."""

    cluster: str
    gpu_type: str
    capacity_gpus: int = Field(ge=0)
    busy_gpus: int = Field(ge=0)
    drained_gpus: int = Field(ge=0)


class Histogram(Frozen):
    """A Prometheus-style histogram: ``counts[i]`` samples fell in ``(bounds[i-1], bounds[i]]``,
    and ``counts[-1]`` above the last bound (one more count than bounds)."""

    bounds: tuple[float, ...] = LATENCY_BUCKETS
    counts: tuple[int, ...] = ()
    sum: float = 0.0

    @model_validator(mode="after")
    def _check(self) -> Histogram:
        if list(self.bounds) != sorted(set(self.bounds)):
            raise ValueError("bounds must be strictly increasing")
        if not self.counts:
            object.__setattr__(self, "counts", (0,) * (len(self.bounds) + 1))
        elif len(self.counts) != len(self.bounds) + 1:
            raise ValueError(f"counts needs {len(self.bounds) + 1} entries, got {len(self.counts)}")
        if any(c < 0 for c in self.counts):
            raise ValueError("counts must not be negative")
        return self

    @property
    def count(self) -> int:
        """How many samples were observed."""
        return sum(self.counts)

    def observe(self, value: float) -> Histogram:
        """A copy with one more sample ``value``."""
        i = bisect.bisect_left(self.bounds, value)
        counts = list(self.counts)
        counts[i] += 1
        return self.model_copy(update={"counts": tuple(counts), "sum": self.sum + value})

    def cumulative(self) -> list[tuple[float, int]]:
        """``(upper bound, samples at or below it)`` pairs, ending with ``(inf, count)``."""
        out, running = [], 0
        for bound, c in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += c
            out.append((bound, running))
        return out


class SchedulerCounters(Frozen):
    """What the scheduler did since the run started, and how its last plan went.

    ``decisions_total`` counts decisions by kind (``start``, ``preempt``, ``hold``,
    ``release``, ...); ``submit_to_start`` holds one histogram per job class.
    """

    plan_seconds: float | None = None
    gap: float | None = None
    fallbacks_total: int = Field(default=0, ge=0)
    decisions_total: dict[str, int] = Field(default_factory=dict)
    submit_to_start: dict[JobClass, Histogram] = Field(default_factory=dict)
    executor_errors_total: int = Field(default=0, ge=0)
    executor_retries_total: int = Field(default=0, ge=0)


class JobLine(Frozen):
    """A managed job's current state in plain words (what ``squeue`` shows for it)."""

    job: str
    project: str = ""
    user: str = ""
    state: JobStateKind
    text: str


class LiveStatus(Frozen):
    """One snapshot of the live scheduler, written after each decision.

    ``at`` is scenario seconds (the ledger's time axis), ``wall`` the POSIX time it was
    taken and ``origin`` the POSIX time of scenario time 0; ``lookback_s`` is the window
    the projects' hours cover.
    """

    version: Literal[1] = 1
    at: float
    wall: float
    origin: float | None = None
    lookback_s: float = Field(default=7 * 86400.0, gt=0)
    policy: str = ""
    executor: str = ""
    projects: tuple[ProjectStatus, ...] = ()
    queue: tuple[QueuedJob, ...] = ()
    preemptions: tuple[Preemption, ...] = ()
    pools: tuple[PoolStatus, ...] = ()
    scheduler: SchedulerCounters = Field(default_factory=SchedulerCounters)
    jobs: tuple[JobLine, ...] = ()

    def project(self, name: str) -> ProjectStatus | None:
        """The row of project ``name``, if any."""
        return next((p for p in self.projects if p.project == name), None)

    def job_line(self, job: str) -> JobLine | None:
        """The state line of managed job ``job``, if the run knows it."""
        return next((j for j in self.jobs if j.job == job), None)
