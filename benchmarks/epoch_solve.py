"""Time one epoch's solve on large snapshots built from the ai2-like generator.

The ai2-like scenario (1,880 GPUs, 40 projects) is scaled to the issue's target: node
counts doubled (about 3,760 GPUs in its 5 pools) and an org of 150 projects. A week of
work is generated for it; a snapshot takes ``--jobs`` of those jobs: enough of them are
already running (placed on nodes, some inside their minimum runtime) to fill about 95% of
the GPUs, the rest wait. Standings get random fair-share ratios and headrooms so that
some budgets bind.

Prints one row per (jobs, backend): jobs, job classes, variables, constraints, seconds,
status, objective, bound and gap (medians over ``--repeat`` runs; the status, objective
and bound are the last run's). The target column says "met" only when every run met it.
"charged" is the gap of the plan's own charging (``SolverInfo.charged_objective``:
whole run-slices charged in order, where the MIP may charge any number of quanta within
a project's headroom); the target is on the MIP's gap. Targets (issue 4): 3,000 jobs within 1% of the bound in
10 s; 10,000 jobs in 60 s.

Usage::

    .venv/bin/python benchmarks/epoch_solve.py                 # 1,000 / 3,000 / 10,000 jobs
    .venv/bin/python benchmarks/epoch_solve.py --jobs 3000 --backend pulp --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from models import (  # noqa: E402
    Cluster,
    GenerateSpec,
    JobState,
    NodeGroup,
    OrgUnit,
    ProjectStanding,
    Scenario,
    Snapshot,
)
from planner.fairshare import water_fill  # noqa: E402
from planner.mip import plan_epoch  # noqa: E402
from planner.placement import place_gang  # noqa: E402
from planner.snapshot import build_snapshot  # noqa: E402
from scenarios import load_scenario  # noqa: E402
from scenarios.generate import generate_jobs  # noqa: E402

#: jobs -> (seconds, gap) the issue asks for; ``None``: no gap target.
TARGETS: dict[int, tuple[float, float | None]] = {3000: (10.0, 0.01), 10000: (60.0, None)}


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
    free: dict[str, int] = {n.name: n.gpus for n in scenario.nodes}
    size = dict(free)
    pools: dict[tuple[str, str], list[str]] = {}
    for n in scenario.nodes:
        pools.setdefault((n.cluster, n.gpu_type), []).append(n.name)
    total = sum(size.values())
    busy = 0
    states: list[JobState] = []
    for job in picked:
        placed = None
        if busy < 0.95 * total and rng.random() < 0.7:
            for (cluster, gpu_type), names in pools.items():
                if not job.allows(cluster, gpu_type):
                    continue
                nodes = place_gang({n: free[n] for n in names if free[n] > 0}, size, job.gpus)
                if nodes is not None:
                    placed = (cluster, gpu_type, nodes)
                    break
        if placed is None:
            states.append(JobState(job=job, status="queued"))
            continue
        cluster, gpu_type, nodes = placed
        per = size[nodes[0]] if len(nodes) > 1 else job.gpus
        for n in nodes:
            free[n] -= per
        busy += per * len(nodes)
        ran = float(rng.uniform(0, min(job.duration or 3600.0, 8 * 3600.0)) * 0.9)
        states.append(
            JobState(
                job=job,
                status="running",
                progress=ran,
                run_start=now - ran,
                cluster=cluster,
                gpu_type=gpu_type,
                nodes=nodes,
                charged=job.allocated,
            )
        )
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, nargs="*", default=[1000, 3000, 10000])
    ap.add_argument("--backend", nargs="*", default=["cpsat"])
    ap.add_argument("--time-limit", type=float, default=None, help="default: 10 s up to 3,000 jobs, else 60 s")
    ap.add_argument("--gap", type=float, default=0.01)
    ap.add_argument("--repeat", type=int, default=1, help="runs per row; the median is shown")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    scenario = big_scenario(args.seed)
    gpus = sum(n.gpus for n in scenario.nodes)
    print(
        f"scenario: {gpus:,} GPUs in {len(scenario.pools)} pools, {len(scenario.projects)} projects, "
        f"{scenario.policy.slices} slices; 2-core machine shared with other work, timings noisy"
    )
    header = f"{'jobs':>6} {'running':>7} {'backend':>7} {'classes':>7} {'vars':>7} {'cons':>7} {'seconds':>8} {'status':>9} {'objective':>14} {'bound':>14} {'gap':>7} {'charged':>7} target"
    print(header)
    for n in args.jobs:
        snap = big_snapshot(scenario, n, args.seed)
        running = sum(1 for s in snap.jobs if s.status == "running")
        limit = args.time_limit or (10.0 if n <= 3000 else 60.0)
        for backend in args.backend:
            times: list[float] = []
            gaps: list[float] = []
            charged_gaps: list[float] = []
            plan = None
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                plan = plan_epoch(snap, backend=backend, time_limit=limit, rel_gap=args.gap)
                times.append(time.perf_counter() - t0)
                if plan.solver.gap is not None:
                    gaps.append(plan.solver.gap)
                info = plan.solver
                if info.charged_objective is not None and info.bound:
                    charged_gaps.append((info.bound - info.charged_objective) / abs(info.bound))
            assert plan is not None
            s = plan.solver
            msg = s.message.split(",")
            nvars = msg[0].split()[0] if msg and msg[0].split() else "?"
            ncons = msg[1].split()[0] if len(msg) > 1 else "?"
            classes = msg[2].split()[0] if len(msg) > 2 else "?"
            sec = statistics.median(times)
            gap = statistics.median(gaps) if gaps else None
            target = TARGETS.get(n)
            ok = ""
            if target is not None:
                # Every run must meet the target, not only the median one.
                limit_s, limit_gap = target
                runs_ok = all(
                    t <= limit_s and (limit_gap is None or g <= limit_gap)
                    for t, g in zip(times, gaps, strict=False)
                ) and len(gaps) == len(times)
                ok = ("met" if runs_ok else "MISSED") + (
                    f" (slowest {max(times):.2f}s, worst gap {max(gaps):.2%})" if args.repeat > 1 and gaps else ""
                )
            print(
                f"{n:>6} {running:>7} {backend:>7} {classes:>7} {nvars:>7} {ncons:>7} {sec:>8.2f} "
                f"{s.status.value:>9} {s.objective or 0:>14,.0f} {s.bound or 0:>14,.0f} "
                f"{(gap if gap is not None else float('nan')):>7.2%} "
                f"{(statistics.median(charged_gaps) if charged_gaps else float('nan')):>7.2%} {ok}"
                + (" (fallback)" if s.fallback else "")
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
