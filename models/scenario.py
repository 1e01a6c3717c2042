"""A scenario: clusters, org tree, policy, maintenance and workload, cross-checked."""

from __future__ import annotations

import math
from datetime import datetime
from functools import cached_property

from pydantic import Field, field_validator, model_validator

from models.base import Count, Input, Number
from models.cluster import Cluster, Node, Pool
from models.durations import Duration
from models.gpu import DEFAULT_GPU_TYPES, GpuType
from models.limits import (
    MAX_GENERATE_BACKLOG_DAYS,
    MAX_GENERATE_DAYS,
    MAX_GENERATE_LOAD,
    MAX_GENERATE_USERS,
    MAX_GPUS,
    MAX_JOBS,
    MAX_NODES,
    MAX_SEED,
    MAX_SHARE,
    MIN_SHARE,
)
from models.maintenance import Maintenance
from models.org import OrgUnit, project_paths, walk
from models.policy import Policy
from models.workload import Job


class GenerateSpec(Input):
    """Parameters of the synthetic workload generator (``scenarios.generate``).

    ``load`` is the offered GPU-time of the arrivals over ``days`` / physical capacity;
    ``backlog`` is extra work already queued at time 0, in capacity-time (``12h`` means
    twelve hours of every GPU's time), so a simulation starts from a busy institute.
    """

    seed: Count = Field(default=1, ge=0, le=MAX_SEED)
    days: Number = Field(default=7.0, gt=0, le=MAX_GENERATE_DAYS)
    load: Number = Field(default=1.0, gt=0, le=MAX_GENERATE_LOAD)
    users: Count = Field(default=150, ge=1, le=MAX_GENERATE_USERS)
    backlog: Duration = Field(default=0.0, ge=0, le=MAX_GENERATE_BACKLOG_DAYS * 86400.0)


class PhillySpec(Input):
    """Import of a Philly trace (``scenarios.philly``).

    ``project_map`` maps a Philly virtual cluster id to a project path; unmapped ids
    follow the importer's documented default rule. ``unallocated_share`` is the fraction
    of the non-debug rows imported as unallocated work (minimum runtime 0).
    """

    path: str = Field(min_length=1)
    gpu_type: str = "H100"
    cluster: str | None = None
    project_map: dict[str, str] = Field(default_factory=dict)
    days: Number | None = Field(default=None, gt=0, le=MAX_GENERATE_DAYS)
    unallocated_share: Number = Field(default=0.18, ge=0, le=1)

    @field_validator("project_map", mode="before")
    @classmethod
    def _ids_as_text(cls, value: object) -> object:
        # YAML reads an all-digit id such as 103959 as a number; ids are text.
        if isinstance(value, dict):
            return {
                str(k) if isinstance(k, int) and not isinstance(k, bool) else k: v
                for k, v in value.items()
            }
        return value


class Workloads(Input):
    """Exactly one source of jobs: inline ``jobs``, ``generate``, ``csv`` or ``philly``."""

    jobs: tuple[Job, ...] | None = Field(default=None, max_length=MAX_JOBS)
    generate: GenerateSpec | None = None
    csv: str | None = Field(default=None, min_length=1)
    philly: PhillySpec | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Workloads:
        given = [k for k in ("jobs", "generate", "csv", "philly") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one workload source of 'jobs', 'generate', 'csv' or 'philly'"
                + (f" (got {', '.join(given)})" if given else "")
            )
        return self


class BudgetRevision(Input):
    """New shares for some org units, effective from ``at`` (offset from the start)."""

    at: Duration = Field(ge=0)
    shares: dict[str, Number]

    @field_validator("shares")
    @classmethod
    def _positive(cls, shares: dict[str, float]) -> dict[str, float]:
        for path, share in shares.items():
            if not MIN_SHARE <= share <= MAX_SHARE:
                raise ValueError(
                    f"share of {path!r} must be in [{MIN_SHARE:g}, {MAX_SHARE:g}], got {share}"
                )
        return shares


class Scenario(Input):
    """Everything a planner or simulator needs; times are seconds from ``start``."""

    name: str = Field(min_length=1)
    start: datetime | None = None
    gpu_types: dict[str, GpuType] = Field(default_factory=lambda: dict(DEFAULT_GPU_TYPES))
    clusters: tuple[Cluster, ...] = Field(min_length=1)
    org: tuple[OrgUnit, ...] = Field(min_length=1)
    policy: Policy = Policy()
    maintenance: tuple[Maintenance, ...] = ()
    budget_revisions: tuple[BudgetRevision, ...] = ()
    workloads: Workloads = Workloads(jobs=())

    @field_validator("gpu_types", mode="before")
    @classmethod
    def _merge_defaults(cls, value: object) -> object:
        # A scenario lists only the types it adds or re-rates; the defaults stay.
        if isinstance(value, dict):
            return {**DEFAULT_GPU_TYPES, **value}
        return value

    @model_validator(mode="after")
    def _cross_check(self) -> Scenario:
        _check_scenario(self)
        return self

    # -- derived views (cached: the model is frozen) ----------------------------------

    @property
    def jobs(self) -> tuple[Job, ...]:
        """The resolved jobs (empty until a loader resolved a generated source)."""
        return self.workloads.jobs or ()

    @cached_property
    def projects(self) -> tuple[str, ...]:
        return project_paths(self.org)

    @cached_property
    def nodes(self) -> tuple[Node, ...]:
        return tuple(n for c in self.clusters for n in c.nodes())

    @cached_property
    def pools(self) -> tuple[Pool, ...]:
        return tuple(p for c in self.clusters for p in c.pools())

    def pool_gpus(self) -> dict[Pool, int]:
        """GPUs per pool, no drains applied."""
        out: dict[Pool, int] = {p: 0 for p in self.pools}
        for node in self.nodes:
            out[node.pool] += node.gpus
        return out

    def rate(self, gpu_type: str) -> float:
        return self.gpu_types[gpu_type].rate

    def capacity_h100(self) -> float:
        """Total capacity in H100-equivalent GPUs."""
        return sum(n.gpus * self.rate(n.gpu_type) for n in self.nodes)

    def job_fits(self, job: Job, cluster: Cluster, gpu_type: str) -> bool:
        """Whether ``job``'s gang fits the pool at all (ignoring load)."""
        if not job.allows(cluster.name, gpu_type):
            return False
        for group in cluster.node_groups:
            if group.gpu_type != gpu_type:
                continue
            if job.gpus <= group.gpus_per_node:
                return True
        nodes = [g for g in cluster.node_groups if g.gpu_type == gpu_type]
        if not nodes:
            return False
        # Multi-node gangs take whole nodes of one node size.
        return any(math.ceil(job.gpus / g.gpus_per_node) <= sum(
            h.nodes for h in nodes if h.gpus_per_node == g.gpus_per_node) for g in nodes)


class JobProblem(ValueError):
    """A cross-check that fails for one job: which job (its index), which field, and why.

    The loader maps the index back to where the job came from (a CSV or trace row), so
    the message names that file and line rather than the resolved ``workloads.jobs[i]``.
    """

    def __init__(self, index: int, job_id: str, field: str, problem: str) -> None:
        self.index = index
        self.job_id = job_id
        self.field = field
        self.problem = problem
        super().__init__(f"workloads.jobs[{index}] (id {job_id!r}).{field}: {problem}")


def _check_size(s: Scenario) -> None:
    """Node and GPU totals, from the groups' counts: before any node is built."""
    nodes = gpus = 0
    for i, cluster in enumerate(s.clusters):
        for group in cluster.node_groups:
            nodes += group.nodes
            gpus += group.nodes * group.gpus_per_node
        if nodes > MAX_NODES:
            raise ValueError(
                f"clusters[{i}]: the scenario has more than {MAX_NODES:,} nodes (the limit)"
            )
        if gpus > MAX_GPUS:
            raise ValueError(
                f"clusters[{i}]: the scenario has more than {MAX_GPUS:,} GPUs (the limit)"
            )


def _check_scenario(s: Scenario) -> None:
    """Cross-reference checks; each error names the field path it is about."""
    _check_size(s)
    cluster_names = [c.name for c in s.clusters]
    _no_duplicates(cluster_names, "clusters", "cluster name")
    for i, cluster in enumerate(s.clusters):
        for j, group in enumerate(cluster.node_groups):
            if group.gpu_type not in s.gpu_types:
                raise ValueError(
                    f"clusters[{i}].node_groups[{j}].gpu_type: unknown GPU type "
                    f"{group.gpu_type!r} (known: {', '.join(sorted(s.gpu_types))})"
                )
    _check_org(s.org, "org")
    projects = set(s.projects)
    units = {path for path, _ in walk(s.org)}
    by_name = {c.name: c for c in s.clusters}
    node_of: dict[str, Node] = {}
    for node in s.nodes:
        other = node_of.setdefault(node.name, node)
        if other is not node:
            # Names are {cluster}-{gpu type, lower case}-{index}: clusters or GPU types
            # that differ only in case, or by a dash, can give two nodes one name.
            raise ValueError(
                f"clusters: two nodes would both be named {node.name!r} ({other.gpu_type} of "
                f"cluster {other.cluster!r}, {node.gpu_type} of cluster {node.cluster!r}); "
                f"rename a cluster or a GPU type"
            )
    for i, m in enumerate(s.maintenance):
        where = f"maintenance[{i}]"
        if m.cluster not in by_name:
            raise ValueError(f"{where}.cluster: unknown cluster {m.cluster!r}")
        if m.node_names is not None:
            for name in m.node_names:
                if name not in node_of or node_of[name].cluster != m.cluster:
                    raise ValueError(f"{where}.node_names: unknown node {name!r} in {m.cluster!r}")
        if m.gpu_type is not None and m.gpu_type not in {n.gpu_type for n in by_name[m.cluster].nodes()}:
            raise ValueError(f"{where}.gpu_type: cluster {m.cluster!r} has no {m.gpu_type!r} nodes")
        if m.nodes is not None:
            pool_nodes = [
                n for n in by_name[m.cluster].nodes() if m.gpu_type in (None, n.gpu_type)
            ]
            if m.nodes > len(pool_nodes):
                raise ValueError(
                    f"{where}.nodes: {m.nodes} nodes asked, cluster {m.cluster!r} has {len(pool_nodes)}"
                )
    philly = s.workloads.philly
    if philly is not None:
        if philly.gpu_type not in s.gpu_types:
            raise ValueError(f"workloads.philly.gpu_type: unknown GPU type {philly.gpu_type!r}")
        if philly.cluster is not None and philly.cluster not in by_name:
            raise ValueError(f"workloads.philly.cluster: unknown cluster {philly.cluster!r}")
        for vc, path in philly.project_map.items():
            if path not in projects:
                raise ValueError(f"workloads.philly.project_map.{vc}: unknown project {path!r}")
    for i, rev in enumerate(s.budget_revisions):
        for path in rev.shares:
            if path not in units:
                raise ValueError(f"budget_revisions[{i}].shares: unknown org unit {path!r}")
    seen: set[str] = set()
    max_min = s.policy.max_min_runtime
    for i, job in enumerate(s.jobs):
        def problem(field: str, text: str, i: int = i, job: Job = job) -> JobProblem:
            return JobProblem(i, job.id, field, text)

        if job.id in seen:
            raise problem("id", f"duplicate job id {job.id!r}")
        if job.submit < 0:
            # A snapshot may hold work submitted before its epoch; a scenario's times
            # count from its start.
            raise problem("submit", f"must not be negative (times count from the scenario's start), got {job.submit:g}s")
        seen.add(job.id)
        if job.project not in projects:
            hint = " (it is a unit with children, not a project)" if job.project in units else ""
            raise problem("project", f"unknown project {job.project!r}{hint}")
        for t in job.gpu_types or ():
            if t not in s.gpu_types:
                raise problem("gpu_types", f"unknown GPU type {t!r}")
        for c in job.clusters or ():
            if c not in by_name:
                raise problem("clusters", f"unknown cluster {c!r}")
        if job.min_runtime > max_min:
            raise problem(
                "min_runtime",
                f"{job.min_runtime:g}s is above the policy's max_min_runtime of {max_min:g}s",
            )
        if not any(s.job_fits(job, c, p.gpu_type) for c in s.clusters for p in c.pools()):
            raise problem("gpus", f"a gang of {job.gpus} GPUs fits no allowed pool")


def _check_org(units: tuple[OrgUnit, ...], where: str) -> None:
    _no_duplicates([u.name for u in units], where, "org unit name")
    for i, unit in enumerate(units):
        _check_org(unit.children, f"{where}[{i}].children")


def _no_duplicates(names: list[str], where: str, what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"{where}: duplicate {what} {name!r}")
        seen.add(name)
