"""Very large epochs, decomposed by cluster and coupled through fair-share targets (POP).

An epoch of 30,000 jobs on 20 pools gives a model of over a million variables: every
job that may run anywhere has a start variable per pool and slice. Like POP
(Narayanan et al., SOSP 2021: partition the resources and the jobs, solve the parts
independently), :func:`split` cuts the snapshot into parts of whole clusters; each
queued job goes to one part it may run in (the least loaded, for its gang), each
running job stays with its nodes, and each project's owed share and headroom are
split between the parts in proportion to its demand there, its fair-share ratio kept.
The parts are planned one after another by :func:`planner.mip.plan_epoch`, with time
limits in proportion to their size, and :func:`merge` joins their plans: nodes,
budgets (split) and jobs are disjoint, so the whole plan keeps every constraint.

What this gives up: a job cannot move to another part, and a project's share is fixed
per part in advance. The bound reported is the sum of the parts' bounds: a bound of
the partitioned problem, not of the whole epoch (whose LP alone would not fit the
time limit at this size); the message says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from models import (
    JobState,
    NodeFree,
    Pending,
    Plan,
    ProjectPlan,
    ProjectStanding,
    Slice,
    Snapshot,
    SolverInfo,
    SolveStatus,
)
from planner.placement import nodes_needed

#: Decompose when the model would have more start variables than this (estimated).
DECOMPOSE_STARTS = 400_000


@dataclass
class Part:
    """One sub-problem: some clusters, their nodes and the jobs assigned to them."""

    clusters: tuple[str, ...]
    capacity: float = 0.0
    demand: float = 0.0
    jobs: list[JobState] = field(default_factory=list)


def estimated_starts(snapshot: Snapshot) -> int:
    """Start variables the model would have: queued jobs x allowed pools x slices."""
    pools = {(n.node.cluster, n.node.gpu_type) for n in snapshot.nodes}
    total = 0
    # Jobs with the same restrictions allow the same pools: counted once per restriction.
    allowed: dict[tuple[tuple[str, ...] | None, tuple[str, ...] | None], int] = {}
    for st in snapshot.jobs:
        if st.status == "queued":
            job = st.job
            key = (job.clusters, job.gpu_types)
            if key not in allowed:
                allowed[key] = sum(1 for c, t in pools if job.allows(c, t))
            total += allowed[key]
    return total * snapshot.policy.slices


def split(snapshot: Snapshot, parts: int) -> list[Snapshot]:
    """The snapshot cut into about ``parts`` sub-snapshots of whole clusters.

    Clusters are dealt to parts largest first, each to the part with the least
    capacity (H100-equivalent GPUs). Queued jobs, largest gang first, go to the allowed
    part with the least demand per capacity after adding them; a job no part fits goes
    to the largest part (it is reported pending there).
    """
    rate = {t: g.rate for t, g in snapshot.gpu_types.items()}
    cap: dict[str, float] = {}
    for ns in snapshot.nodes:
        n = ns.node
        cap[n.cluster] = cap.get(n.cluster, 0.0) + n.gpus * rate.get(n.gpu_type, 1.0)
    count = max(1, min(parts, len(cap)))
    groups = [Part(()) for _ in range(count)]
    for cluster in sorted(cap, key=lambda c: (-cap[c], c)):
        part = min(groups, key=lambda p: p.capacity)
        part.clusters = (*part.clusters, cluster)
        part.capacity += cap[cluster]
    part_of = {c: i for i, p in enumerate(groups) for c in p.clusters}
    # (cluster, gpu type) -> (nodes, GPUs per node) of each node size there
    shapes: dict[tuple[str, str], dict[int, int]] = {}
    for ns in snapshot.nodes:
        n = ns.node
        sizes = shapes.setdefault((n.cluster, n.gpu_type), {})
        sizes[n.gpus] = sizes.get(n.gpus, 0) + 1
    node_part = {ns.node.name: part_of[ns.node.cluster] for ns in snapshot.nodes}
    queued: list[JobState] = []
    for st in snapshot.jobs:
        if st.status == "running" and st.nodes and st.nodes[0] in node_part:
            groups[node_part[st.nodes[0]]].jobs.append(st)
            groups[node_part[st.nodes[0]]].demand += st.job.gpus
        elif st.status == "queued":
            queued.append(st)
    # The parts a job fits depend on its gang and its restrictions only: found once each.
    fitting: dict[tuple[int, tuple[str, ...] | None, tuple[str, ...] | None], list[int]] = {}
    for st in sorted(queued, key=lambda s: (-s.job.gpus, s.job.id)):
        job = st.job
        key = (job.gpus, job.clusters, job.gpu_types)
        fits = fitting.get(key)
        if fits is None:
            fits = fitting[key] = sorted(
                {
                    part_of[c]
                    for (c, t), sizes in shapes.items()
                    if job.allows(c, t)
                    and any(nodes_needed(job.gpus, g) <= k for g, k in sizes.items())
                }
            )
        if not fits:
            fits = [max(range(count), key=lambda i: groups[i].capacity)]
        i = min(fits, key=lambda i: ((groups[i].demand + job.gpus) / groups[i].capacity, i))
        groups[i].jobs.append(st)
        groups[i].demand += job.gpus
    # Each project's share and headroom, split in proportion to its demand per part.
    demand: list[dict[str, float]] = [{} for _ in groups]
    for i, part in enumerate(groups):
        for st in part.jobs:
            demand[i][st.job.project] = demand[i].get(st.job.project, 0.0) + st.job.gpus
    total: dict[str, float] = {}
    for d in demand:
        for p, g in d.items():
            total[p] = total.get(p, 0.0) + g
    out: list[Snapshot] = []
    for i, part in enumerate(groups):
        standing: dict[str, ProjectStanding] = {}
        for p, ps in snapshot.standing.items():
            share = demand[i].get(p, 0.0) / total[p] if total.get(p) else 0.0
            standing[p] = ps.model_copy(
                update={
                    "owed_gpus": ps.owed_gpus * share,
                    "headroom_gpu_h": ps.headroom_gpu_h * share,
                    "deficit_gpu_h": ps.deficit_gpu_h * share,
                }
            )
        out.append(
            snapshot.model_copy(
                update={
                    "nodes": tuple(n for n in snapshot.nodes if node_part[n.node.name] == i),
                    "jobs": tuple(sorted(part.jobs, key=lambda s: s.job.id)),
                    "standing": standing,
                }
            )
        )
    return out


def _or_inf(value: float | None) -> float:
    return float("inf") if value is None else value


def merge(snapshot: Snapshot, plans: list[Plan], backend: str, seconds: float, note: str) -> Plan:
    """One plan of the parts' plans (their nodes, jobs and budget shares are disjoint)."""
    first = plans[0]
    slices = tuple(
        Slice(
            start=s.start,
            end=s.end,
            assignments=tuple(
                sorted((a for p in plans for a in p.slices[k].assignments), key=lambda a: a.job)
            ),
        )
        for k, s in enumerate(first.slices)
    )
    actions = tuple(sorted((a for p in plans for a in p.actions), key=lambda a: (a.at, a.job)))
    pending: tuple[Pending, ...] = tuple(
        sorted((x for p in plans for x in p.pending), key=lambda x: x.job)
    )
    projects: dict[str, ProjectPlan] = {}
    for p in plans:
        for pp in p.projects:
            old = projects.get(pp.project)
            projects[pp.project] = (
                pp
                if old is None
                else ProjectPlan(
                    project=pp.project,
                    owed_gpu_h=old.owed_gpu_h + pp.owed_gpu_h,
                    planned_gpu_h=old.planned_gpu_h + pp.planned_gpu_h,
                    charged_gpu_h=old.charged_gpu_h + pp.charged_gpu_h,
                )
            )
    drained: tuple[NodeFree, ...] = tuple(
        sorted((d for p in plans for d in p.drained_nodes), key=lambda d: d.node)
    )
    infos = [p.solver for p in plans]

    def total(values: list[float | None]) -> float | None:
        return None if any(v is None for v in values) else sum(v for v in values if v is not None)

    objective = total([i.objective for i in infos])
    bound = total([i.bound for i in infos])
    charged = total([i.charged_objective for i in infos])
    gap = (
        max(bound - objective, 0.0) / max(abs(bound), 1.0)
        if bound is not None and objective is not None
        else None
    )
    fallback = any(i.fallback for i in infos)
    statuses = {i.status for i in infos}
    status = (
        SolveStatus.OPTIMAL
        if statuses == {SolveStatus.OPTIMAL}
        else SolveStatus.FEASIBLE
        if objective is not None
        else SolveStatus.NO_SOLUTION
    )
    worst = max(range(len(infos)), key=lambda i: _or_inf(infos[i].gap))
    ended = infos[worst].message.split("ended by ", 1)[-1].split(";")[0]
    parts = "; ".join(
        f"part {i + 1}: {len(p.slices[0].assignments)} running in slice 0, "
        + (f"gap {p.solver.gap:.2%}" if p.solver.gap is not None else "no gap")
        + f", {p.solver.seconds:.1f}s"
        + (" (greedy fallback)" if p.solver.fallback else "")
        for i, p in enumerate(plans)
    )
    info = SolverInfo(
        backend=backend,
        status=status,
        objective=objective,
        bound=bound,
        gap=gap,
        seconds=seconds,
        fallback=fallback,
        charged_objective=charged,
        message=f"decomposed by cluster into {len(plans)} parts (POP-like){note}; "
        f"bound: the sum of the parts' bounds, a bound of the partitioned problem; {parts}; "
        f"ended by part {worst + 1}'s {ended}",
    )
    return first.model_copy(
        update={
            "slices": slices,
            "actions": actions,
            "pending": pending,
            "projects": tuple(projects[p] for p in sorted(projects)),
            "solver": info,
            "drained_nodes": drained,
            "origin": snapshot.origin,
        }
    )
