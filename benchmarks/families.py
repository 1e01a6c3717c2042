"""Snapshot families for the epoch benchmark (``benchmarks/epoch_solve.py --family``).

Each family is one kind of epoch a planner meets, drawn from a seed:

- ``warm``: the ai2-like generator scaled to 3,760 GPUs and 150 projects, mid-run, about
  95% of the GPUs busy with running jobs under contracts (the original benchmark);
- ``cold``: every job queued, none running, as a new user would try it: about 3,900 GPUs
  in 5 pools of three types, 150 projects in a three-level tree, gangs of 1-128 GPUs,
  run times of 1-48 h, minimum runtimes of 15 min-8 h, most jobs resumable, 40%
  restricted to one or two GPU types;
- ``gang-heavy``: half of the GPU demand in 64-512-GPU gangs (the other families
  have about half of theirs in 64- and 128-GPU gangs: their jobs are 1-128 GPUs);
- ``type-restricted``: most jobs (80%) allowed one GPU type;
- ``urgent-heavy``: a third of the funded jobs urgent (28% of all jobs);
- ``many-projects``: 1,000 projects in a four-level tree;
- ``maintenance``: a fifth of the largest pool drained from the second slice on;
- ``scale``: 30,000 jobs on 40,000 GPUs in 20 pools, 1,000 projects, cold, gangs 1-512.

Apart from ``warm`` and ``cold``, the families start with about 60% of the GPUs busy with
running jobs (some inside their contracts), so that preemption decisions are part of
the model too. Fair-share ratios and headrooms are random, so some budgets bind.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from models import (
    DEFAULT_GPU_TYPES,
    Cluster,
    GenerateSpec,
    Job,
    JobState,
    Node,
    NodeGroup,
    NodeState,
    OrgUnit,
    Policy,
    ProjectStanding,
    Scenario,
    Snapshot,
)
from models.org import project_paths
from planner.fairshare import water_fill
from planner.placement import place_gang
from planner.snapshot import build_snapshot
from scenarios import load_scenario
from scenarios.generate import generate_jobs

HOUR = 3600.0


@dataclass(frozen=True)
class Family:
    """The knobs of one generated family."""

    name: str
    jobs: int = 3000
    #: (cluster, gpu type, nodes of 8 GPUs)
    pools: tuple[tuple[str, str, int], ...] = (
        ("alpha", "H100", 96),
        ("alpha", "B200", 64),
        ("beta", "H100", 120),
        ("beta", "B300", 56),
        ("gamma", "B200", 152),
    )
    #: fan-out of the org tree per level (its product is the number of projects)
    tree: tuple[int, ...] = (5, 6, 5)
    #: share of the GPUs busy with running jobs at the epoch's start
    fill: float = 0.6
    #: gang sizes and their weights (by job count)
    gangs: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
    gang_weights: tuple[float, ...] = (0.18, 0.12, 0.14, 0.22, 0.14, 0.1, 0.06, 0.04)
    #: share of the GPU demand in big gangs (``None``: as the weights give)
    big_demand: float | None = None
    big_gangs: tuple[int, ...] = (64, 128, 256, 512)
    #: share of jobs restricted to one type, and to two types
    one_type: float = 0.25
    two_types: float = 0.15
    urgent: float = 0.03
    free: float = 0.15
    resumable: float = 0.8
    #: (share of the largest pool's nodes, drain start in slices from now)
    drain: tuple[float, int] | None = None


FAMILIES: dict[str, Family] = {
    "cold": Family("cold", fill=0.0),
    "gang-heavy": Family("gang-heavy", big_demand=0.5),
    "type-restricted": Family("type-restricted", one_type=0.8, two_types=0.1),
    "urgent-heavy": Family("urgent-heavy", urgent=0.33),
    "many-projects": Family("many-projects", tree=(5, 5, 5, 8)),
    "maintenance": Family("maintenance", drain=(0.2, 1)),
    "scale": Family(
        "scale",
        jobs=30000,
        pools=tuple(
            (f"c{c:02d}", gpu_type, 250)
            for c in range(10)
            for gpu_type in (("H100", "B200") if c % 2 else ("H100", "B300"))
        ),
        tree=(10, 10, 10),
        fill=0.0,
        gangs=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
        gang_weights=(0.17, 0.12, 0.13, 0.21, 0.13, 0.1, 0.06, 0.04, 0.025, 0.015),
    ),
}

#: Every family name, ``warm`` (built by the benchmark script) included.
NAMES = ("warm", *FAMILIES)


def _org(tree: tuple[int, ...], rng: np.random.Generator, depth: int = 0) -> tuple[OrgUnit, ...]:
    """A tree with ``tree[i]`` children per unit at level ``i``; leaves are projects."""
    kinds = (*("prog", "team", "group")[: len(tree) + depth - 1], "proj")
    out = []
    for i in range(tree[0]):
        children = _org(tree[1:], rng, depth + 1) if len(tree) > 1 else ()
        out.append(OrgUnit(name=f"{kinds[depth]}{i}", share=float(rng.integers(1, 9)), children=children))
    return tuple(out)


def _gpus(fam: Family, n: int, rng: np.random.Generator) -> np.ndarray:
    weights = np.asarray(fam.gang_weights, dtype=float)
    gpus = rng.choice(fam.gangs, size=n, p=weights / weights.sum())
    if fam.big_demand is not None:
        # Redraw until big gangs hold the asked share of the demand: a job is big with
        # the probability that gives that share at the two kinds' mean sizes.
        small = [g for g in fam.gangs if g < min(fam.big_gangs)]
        sw = np.asarray([w for g, w in zip(fam.gangs, fam.gang_weights, strict=True) if g in small])
        mean_small = float(np.dot(small, sw / sw.sum()))
        mean_big = float(np.mean(fam.big_gangs))
        share = fam.big_demand
        p_big = share * mean_small / (share * mean_small + (1 - share) * mean_big)
        big = rng.random(n) < p_big
        gpus = np.where(
            big, rng.choice(fam.big_gangs, size=n), rng.choice(small, size=n, p=sw / sw.sum())
        )
    return gpus


def family_snapshot(name: str, seed: int = 1, jobs: int | None = None) -> Snapshot:
    """The snapshot of family ``name`` (any of :data:`NAMES`) drawn from ``seed``."""
    if name == "warm":
        return big_snapshot(big_scenario(seed), jobs or 3000, seed)
    fam = FAMILIES[name]
    if jobs is not None:
        fam = replace(fam, jobs=jobs)
    rng = np.random.default_rng(seed)
    policy = Policy()
    now = 3 * 24 * HOUR
    org = _org(fam.tree, rng)
    projects = project_paths(org)
    nodes: list[Node] = []
    pools: dict[tuple[str, str], list[str]] = {}
    for cluster, gpu_type, count in fam.pools:
        for i in range(count):
            node = Node(name=f"{cluster}-{gpu_type.lower()}-{i:03d}", cluster=cluster, gpu_type=gpu_type, gpus=8)
            nodes.append(node)
            pools.setdefault((cluster, gpu_type), []).append(node.name)
    types = sorted({t for _, t, _ in fam.pools})
    n = fam.jobs
    gpus = _gpus(fam, n, rng)
    # Projects draw jobs unevenly (a few busy projects, a long tail).
    weights = rng.pareto(1.2, size=len(projects)) + 0.05
    owner = rng.choice(len(projects), size=n, p=weights / weights.sum())
    kind = rng.random(n)
    job_list: list[Job] = []
    for i in range(n):
        r = rng.random()
        allowed: tuple[str, ...] | None = None
        if r < fam.one_type:
            allowed = (str(rng.choice(types)),)
        elif r < fam.one_type + fam.two_types and len(types) > 2:
            allowed = tuple(sorted(str(t) for t in rng.choice(types, size=2, replace=False)))
        free = kind[i] < fam.free
        min_rt = 0.0 if free else float(rng.choice([900.0, 1800.0, 3600.0, 2 * HOUR, 4 * HOUR, 8 * HOUR]))
        duration = float(np.exp(rng.uniform(np.log(HOUR), np.log(48 * HOUR))))
        job_list.append(
            Job(
                id=f"j{i:05d}",
                project=projects[int(owner[i])],
                gpus=int(gpus[i]),
                gpu_types=allowed,
                submit=float(now - rng.uniform(0.0, 48 * HOUR)),
                duration=duration,
                min_runtime=min(min_rt, duration),
                resumable=bool(rng.random() < fam.resumable),
                priority=int(rng.integers(0, 3)),
                urgent=bool(not free and rng.random() < fam.urgent),
            )
        )
    states = _start_some(job_list, nodes, pools, fam.fill, now, rng)
    node_states = _drains(nodes, pools, fam, now, policy)
    demand: dict[str, float] = {}
    for st in states:
        demand[st.job.project] = demand.get(st.job.project, 0.0) + st.job.gpus
    capacity = sum(n.gpus * DEFAULT_GPU_TYPES[n.gpu_type].rate for n in nodes)
    owed = water_fill(org, demand, capacity)
    epoch_h = policy.epoch / HOUR
    standing = {
        p: ProjectStanding(
            project=p,
            owed_gpus=o,
            ratio=float(rng.uniform(0.2, 1.8)),
            deficit_gpu_h=0.0,
            headroom_gpu_h=float(o * epoch_h * rng.uniform(0.3, 3.0)),
        )
        for p, o in owed.items()
    }
    return Snapshot(
        now=now,
        policy=policy,
        gpu_types=dict(DEFAULT_GPU_TYPES),
        org=org,
        nodes=tuple(node_states),
        jobs=tuple(states),
        standing=standing,
    )


def big_scenario(seed: int = 1) -> Scenario:
    """The ai2-like clusters with doubled node counts and an org of 150 projects."""
    base = load_scenario("ai2-like")
    rng = np.random.default_rng(seed)
    clusters = tuple(
        Cluster(
            name=c.name,
            node_groups=tuple(
                NodeGroup(gpu_type=g.gpu_type, nodes=g.nodes * 2, gpus_per_node=g.gpus_per_node)
                for g in c.node_groups
            ),
        )
        for c in base.clusters
    )
    org = tuple(
        OrgUnit(
            name=f"prog{p}",
            share=float(rng.integers(5, 40)),
            children=tuple(
                OrgUnit(
                    name=f"team{t}",
                    share=float(rng.integers(1, 6)),
                    children=tuple(
                        OrgUnit(name=f"proj{q}", share=float(rng.integers(1, 9))) for q in range(5)
                    ),
                )
                for t in range(6)
            ),
        )
        for p in range(5)
    )
    data = base.model_dump(mode="python", exclude={"workloads", "maintenance", "clusters", "org"})
    data.update(clusters=clusters, org=org, workloads={"jobs": ()})
    return Scenario.model_validate(data)


def big_snapshot(scenario: Scenario, n_jobs: int, seed: int = 1) -> Snapshot:
    """``n_jobs`` generated jobs, about 95% of the GPUs already busy with some of them."""
    rng = np.random.default_rng(seed)
    jobs = generate_jobs(scenario, GenerateSpec(seed=seed, days=7.0, load=1.2, users=300))
    picked = [jobs[i] for i in sorted(rng.choice(len(jobs), size=min(n_jobs, len(jobs)), replace=False))]
    now = max(j.submit for j in picked)
    pools: dict[tuple[str, str], list[str]] = {}
    for n in scenario.nodes:
        pools.setdefault((n.cluster, n.gpu_type), []).append(n.name)
    states = _start_some(picked, list(scenario.nodes), pools, 0.95, now, rng)
    demand: dict[str, float] = {}
    for st in states:
        demand[st.job.project] = demand.get(st.job.project, 0.0) + st.job.gpus
    owed = water_fill(scenario.org, demand, scenario.capacity_h100())
    epoch_h = scenario.policy.epoch / 3600.0
    standing = {
        p: ProjectStanding(
            project=p,
            owed_gpus=o,
            ratio=float(rng.uniform(0.2, 1.8)),
            deficit_gpu_h=0.0,
            headroom_gpu_h=float(o * epoch_h * rng.uniform(0.3, 3.0)),
        )
        for p, o in owed.items()
    }
    return build_snapshot(scenario, now, states, standing)


def _start_some(
    jobs: list[Job],
    nodes: list[Node],
    pools: dict[tuple[str, str], list[str]],
    fill: float,
    now: float,
    rng: np.random.Generator,
) -> list[JobState]:
    """Place jobs on nodes until ``fill`` of the GPUs are busy; the rest wait."""
    free = {n.name: n.gpus for n in nodes}
    size = dict(free)
    total = sum(size.values())
    busy = 0
    out: list[JobState] = []
    for job in jobs:
        placed = None
        if busy < fill * total and rng.random() < 0.7:
            for (cluster, gpu_type), names in pools.items():
                if not job.allows(cluster, gpu_type):
                    continue
                got = place_gang({n: free[n] for n in names if free[n] > 0}, size, job.gpus)
                if got is not None:
                    placed = (cluster, gpu_type, got)
                    break
        if placed is None:
            out.append(JobState(job=job, status="queued"))
            continue
        cluster, gpu_type, got = placed
        per = size[got[0]] if len(got) > 1 else job.gpus
        for n in got:
            free[n] -= per
        busy += per * len(got)
        ran = float(rng.uniform(0.0, min(job.duration or HOUR, 8 * HOUR)) * 0.9)
        out.append(
            JobState(
                job=job,
                status="running",
                progress=ran,
                run_start=now - ran,
                cluster=cluster,
                gpu_type=gpu_type,
                nodes=got,
                charged=job.allocated,
            )
        )
    return out


def _drains(
    nodes: list[Node], pools: dict[tuple[str, str], list[str]], fam: Family, now: float, policy: Policy
) -> list[NodeState]:
    if fam.drain is None:
        return [NodeState(node=n) for n in nodes]
    share, first = fam.drain
    largest = max(pools.values(), key=len)
    drained = set(largest[len(largest) - round(share * len(largest)) :])
    start = now + first * policy.slice_length
    return [
        NodeState(node=n, drain_start=start, drain_end=now + 4 * HOUR)
        if n.name in drained
        else NodeState(node=n)
        for n in nodes
    ]
