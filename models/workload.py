"""Workloads (jobs) and the time-slicing contract they declare."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, model_validator

from models.base import Count, Input
from models.durations import Duration
from models.limits import MAX_GPUS, MAX_PRIORITY

DEBUG_MAX_GPUS = 8
DEBUG_MAX_MIN_RUNTIME = 15 * 60.0


class JobKind(StrEnum):
    """What a job is for; derived from its shape when the file leaves it out.

    Derived rule: ``debug`` for funded jobs of at most 8 GPUs with a minimum runtime of
    at most 15 min; ``batch`` otherwise (free work, ``min_runtime == 0``, is batch).
    ``interactive`` is only ever given explicitly.
    """

    DEBUG = "debug"
    BATCH = "batch"
    INTERACTIVE = "interactive"


class Job(Input):
    """One workload: a gang of ``gpus`` GPUs that runs all at once or not at all.

    ``min_runtime`` is the contract: once started, the job is not preempted before it has
    run that long. ``0`` means unallocated work: free, never charged, always preemptible.
    ``duration`` is known in simulation and ``None`` live.
    """

    id: str = Field(min_length=1)
    project: str
    user: str = ""
    gpus: Count = Field(ge=1, le=MAX_GPUS)
    gpu_types: tuple[str, ...] | None = None
    clusters: tuple[str, ...] | None = None
    submit: Duration = 0.0
    duration: Duration | None = Field(default=None)
    min_runtime: Duration = 3600.0
    resumable: bool = False
    priority: Count = Field(default=0, ge=-MAX_PRIORITY, le=MAX_PRIORITY)
    urgent: bool = False
    kind: JobKind | None = None

    @model_validator(mode="after")
    def _check(self) -> Job:
        if self.duration is not None and self.duration <= 0:
            raise ValueError("duration must be positive")
        if self.min_runtime < 0:
            raise ValueError("min_runtime must not be negative")
        if self.kind is None:
            kind = (
                JobKind.DEBUG
                if self.gpus <= DEBUG_MAX_GPUS and 0 < self.min_runtime <= DEBUG_MAX_MIN_RUNTIME
                else JobKind.BATCH
            )
            object.__setattr__(self, "kind", kind)
        return self

    @property
    def allocated(self) -> bool:
        """Funded work (charged to the budget); ``min_runtime == 0`` is free work."""
        return self.min_runtime > 0

    def allows(self, cluster: str, gpu_type: str) -> bool:
        """Whether the job may run on the pool (cluster, gpu_type)."""
        return (self.clusters is None or cluster in self.clusters) and (
            self.gpu_types is None or gpu_type in self.gpu_types
        )
