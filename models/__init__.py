"""Pydantic domain models of gpuplan: frozen, strict, free of I/O and solvers."""

from models.cluster import Cluster, Node, NodeGroup, Pool
from models.durations import Duration, format_duration, parse_duration
from models.errors import GpuplanError
from models.gpu import DEFAULT_GPU_TYPES, GpuType
from models.maintenance import Maintenance
from models.org import OrgUnit, effective_shares, project_paths, walk, with_shares
from models.plan import (
    Action,
    Assignment,
    NodeFree,
    Pending,
    PendingReason,
    Plan,
    ProjectPlan,
    Slice,
    SolverInfo,
    SolveStatus,
)
from models.policy import Policy
from models.scenario import BudgetRevision, GenerateSpec, PhillySpec, Scenario, Workloads
from models.snapshot import JobState, NodeState, Snapshot, drain_guard, keeps_running, spare_seconds
from models.standing import ProjectStanding
from models.status import (
    JOB_CLASSES,
    LATENCY_BUCKETS,
    Histogram,
    JobClass,
    JobLine,
    JobStateKind,
    LiveStatus,
    PoolStatus,
    Preemption,
    ProjectStatus,
    QueuedJob,
    SchedulerCounters,
)
from models.workload import Job, JobKind

__all__ = [
    "DEFAULT_GPU_TYPES",
    "JOB_CLASSES",
    "LATENCY_BUCKETS",
    "Action",
    "Assignment",
    "BudgetRevision",
    "Cluster",
    "Duration",
    "GenerateSpec",
    "GpuplanError",
    "GpuType",
    "Histogram",
    "Job",
    "JobClass",
    "JobKind",
    "JobLine",
    "JobState",
    "JobStateKind",
    "LiveStatus",
    "Maintenance",
    "Node",
    "NodeFree",
    "NodeGroup",
    "NodeState",
    "OrgUnit",
    "Pending",
    "PendingReason",
    "PhillySpec",
    "Plan",
    "Policy",
    "Pool",
    "PoolStatus",
    "Preemption",
    "ProjectPlan",
    "ProjectStanding",
    "ProjectStatus",
    "QueuedJob",
    "Scenario",
    "SchedulerCounters",
    "Slice",
    "Snapshot",
    "SolveStatus",
    "SolverInfo",
    "Workloads",
    "drain_guard",
    "effective_shares",
    "format_duration",
    "keeps_running",
    "parse_duration",
    "project_paths",
    "spare_seconds",
    "walk",
    "with_shares",
]
