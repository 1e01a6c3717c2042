"""Outcomes: ``legacy``, ``fairshare`` and ``mip`` side by side on every metric a user feels.

For each scenario family it runs the three policies on several replicates and prints, per
metric, the median and the range over the replicates, and whether ``mip`` is at least as
good as ``fairshare`` beyond noise:

- ``philly-week`` and ``ai2-like``, the bundled scenarios, full length (``--days`` cuts
  them), replicated by perturbing every submit time by a seeded uniform +-5 min;
- ``gang-heavy``: a generated 256-GPU institute (two clusters, H100 and B200) where about
  half the GPU demand is in 64-256-GPU gangs, one replicate per generator seed;
- ``bursty-debug``: a generated 128-GPU cluster kept full of batch work, with bursts of 30
  debug jobs every 3 hours, one replicate per generator seed;
- ``maintenance-heavy``: gang-heavy's 256-GPU institute with generated work as it comes
  and a repair every 4 hours (2 nodes for 1-3 h), one replicate per generator seed.

Metrics: delivered over owed, worst project, occupancy, wait p50 and p90 per class
(debug, batch, large), preemptions, restarts per job, preempted GPU-hours, maintenance
drain hours (only where the family has maintenance). Higher is
better for the first three, lower for the rest. Replicates are paired (the same
workload under each policy): a metric is ``NO`` when mip is worse in every replicate,
or worse in so many more replicates than it is better that a one-sided sign test puts
the loss beyond noise (p < 0.05: with 30 replicates, 10 better against 20 worse);
otherwise ``yes`` when the median of mip's paired differences from fairshare is no
worse, and ``noise`` when it is worse but the replicates do not separate them. The last
column counts the replicates where mip is better / worse than fairshare.

Usage::

    python benchmarks/outcomes.py                       # everything (about an hour on 2 cores)
    python benchmarks/outcomes.py --quick               # 2 replicates, 2 days of the bundled ones
    python benchmarks/outcomes.py --families gang-heavy,bursty-debug --replicates 3
    python benchmarks/outcomes.py --json out.json       # also write every figure
    python benchmarks/outcomes.py --from-json out.json  # print a saved run's tables
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from models import (  # noqa: E402
    Cluster,
    GenerateSpec,
    Job,
    Maintenance,
    NodeGroup,
    OrgUnit,
    Policy,
    Scenario,
    Workloads,
)
from planner.cli.table import format_table  # noqa: E402
from planner.simulator import simulate  # noqa: E402
from scenarios import load_scenario  # noqa: E402
from scenarios.generate import generate_jobs  # noqa: E402

POLICIES = ("legacy", "fairshare", "mip")
HIGHER = ("delivered_over_owed", "worst_project", "occupancy")
METRICS = (
    "delivered_over_owed", "worst_project", "occupancy",
    "debug_p50_s", "debug_p90_s", "batch_p50_s", "batch_p90_s", "large_p50_s", "large_p90_s",
    "preemptions", "restarts_per_job", "preempted_gpu_h", "maintenance_drain_h",
)
JITTER_S = 300.0


def _mip_policy(scenario: Scenario) -> Scenario:
    policy = scenario.policy.model_copy(update={"epoch": 3600.0, "slices": 4})
    return scenario.model_copy(update={"policy": policy})


def jittered(scenario: Scenario, seed: int) -> Scenario:
    """Every submit time moved by a seeded uniform +-5 min (never before 0); seed 0: as is."""
    if seed == 0:
        return scenario
    rng = np.random.default_rng(seed)
    jobs = tuple(j.model_copy(update={"submit": max(0.0, round(j.submit + rng.uniform(-JITTER_S, JITTER_S)))})
                 for j in scenario.jobs)
    return scenario.model_copy(update={"workloads": Workloads(jobs=jobs)})


def _org(n: int) -> tuple[OrgUnit, ...]:
    programs = ("language", "vision", "robotics")
    return tuple(
        OrgUnit(name=p, share=1.0, children=tuple(
            OrgUnit(name=f"team{k}", share=1.0 + k % 3) for k in range(n // len(programs))))
        for p in programs
    )


def gang_heavy(seed: int) -> Scenario:
    """256 GPUs; generated work where batch gangs of 16+ GPUs grow 4x (same GPU-time)."""
    base = Scenario(
        name="gang-heavy",
        clusters=(Cluster(name="alpha", node_groups=(NodeGroup(gpu_type="H100", nodes=16),)),
                  Cluster(name="beta", node_groups=(NodeGroup(gpu_type="B200", nodes=16),))),
        org=_org(12), policy=Policy(epoch=3600.0, slices=4),
    )
    jobs = generate_jobs(base, GenerateSpec(seed=seed, days=2, load=0.95, users=40, backlog=12 * 3600.0))
    out: list[Job] = []
    for j in jobs:
        if j.min_runtime > 0 and 16 <= j.gpus < 64 and j.duration:
            j = j.model_copy(update={"gpus": min(j.gpus * 4, 128), "duration": max(j.duration / 4, 600.0)})
        out.append(j)
    return base.model_copy(update={"workloads": Workloads(jobs=tuple(out))})


def bursty_debug(seed: int) -> Scenario:
    """128 GPUs kept full of generated work, plus 30 debug jobs every 3 h within 2 min."""
    base = Scenario(
        name="bursty-debug",
        clusters=(Cluster(name="alpha", node_groups=(NodeGroup(gpu_type="H100", nodes=16),)),),
        org=_org(9), policy=Policy(epoch=3600.0, slices=4),
    )
    jobs = list(generate_jobs(base, GenerateSpec(seed=seed, days=2, load=1.1, users=30,
                                                 backlog=24 * 3600.0)))
    rng = np.random.default_rng(1000 + seed)
    projects = base.projects
    for burst in range(16):
        t0 = burst * 3 * 3600.0 + 1800.0
        for k in range(30):
            jobs.append(Job(
                id=f"burst{burst:02d}-{k:02d}", project=str(rng.choice(projects)),
                gpus=int(rng.choice([1, 2, 4, 8])), submit=round(t0 + rng.uniform(0, 120)),
                duration=round(rng.uniform(300, 1800)), min_runtime=float(rng.choice([300, 600, 900])),
                resumable=False,
            ))
    jobs.sort(key=lambda j: j.submit)
    return base.model_copy(update={"workloads": Workloads(jobs=tuple(jobs))})


def maintenance_heavy(seed: int) -> Scenario:
    """256 GPUs of generated work (as gang-heavy's institute, gangs as generated), with a
    repair every 4 h: 2 nodes of one cluster drained for 1-3 h, at seeded times."""
    rng = np.random.default_rng(2000 + seed)
    windows = tuple(
        Maintenance(cluster=("alpha", "beta")[k % 2], nodes=2,
                    start=round(k * 4 * 3600.0 + rng.uniform(1800, 3 * 3600.0)),
                    duration=float(rng.choice([3600.0, 7200.0, 10800.0])))
        for k in range(12)
    )
    base = Scenario(
        name="maintenance-heavy",
        clusters=(Cluster(name="alpha", node_groups=(NodeGroup(gpu_type="H100", nodes=16),)),
                  Cluster(name="beta", node_groups=(NodeGroup(gpu_type="B200", nodes=16),))),
        org=_org(12), policy=Policy(epoch=3600.0, slices=4), maintenance=windows,
    )
    jobs = generate_jobs(base, GenerateSpec(seed=seed, days=2, load=0.95, users=40, backlog=12 * 3600.0))
    return base.model_copy(update={"workloads": Workloads(jobs=tuple(jobs))})


FAMILIES: dict[str, Callable[[int], Scenario]] = {
    "philly-week": lambda seed: jittered(_mip_policy(load_scenario("philly-week")), seed),
    "ai2-like": lambda seed: jittered(_mip_policy(load_scenario("ai2-like")), seed),
    "gang-heavy": lambda seed: gang_heavy(seed + 1),
    "bursty-debug": lambda seed: bursty_debug(seed + 1),
    "maintenance-heavy": lambda seed: maintenance_heavy(seed + 1),
}
GENERATED_DAYS = 2.0


def figures(summary: dict[str, Any]) -> dict[str, float | None]:
    p50, p90 = summary["wait_p50_s"], summary["wait_p90_s"]
    return {
        "delivered_over_owed": summary["delivered_over_owed"],
        "worst_project": summary["worst_project_delivered_over_owed"],
        "occupancy": summary["occupancy"],
        **{f"{c}_p50_s": p50.get(c) for c in ("debug", "batch", "large")},
        **{f"{c}_p90_s": p90.get(c) for c in ("debug", "batch", "large")},
        "preemptions": float(summary["preemptions"]),
        "restarts_per_job": summary["restarts_per_job"],
        "preempted_gpu_h": summary["preempted_gpu_h"],
        "maintenance_drain_h": summary.get("maintenance_drain_h"),
    }


def paired_gains(metric: str, fair: list[float | None], mip: list[float | None]) -> list[float]:
    """What ``mip`` gains over ``fairshare`` in each replicate (same workload), positive
    when better; replicates where either has no figure are left out."""
    sign = 1.0 if metric in HIGHER else -1.0
    return [sign * (m - f) for f, m in zip(fair, mip, strict=True) if f is not None and m is not None]


#: A metric is ``NO`` when the paired replicates say, by a one-sided sign test at this
#: level, that ``mip`` is worse (:func:`sign_test_p`).
LOSS_LEVEL = 0.05


def sign_test_p(better: int, worse: int) -> float:
    """One-sided sign test: the chance of ``better`` or fewer replicates better than
    ``fairshare`` among ``better + worse`` untied ones if each went either way with
    probability 1/2 (1.0 when every replicate ties)."""
    n = better + worse
    return sum(math.comb(n, k) for k in range(better + 1)) / 2**n


def verdict(metric: str, fair: list[float | None], mip: list[float | None]) -> str:
    """``NO``: mip worse in every replicate, or in so many more replicates than it is
    better that a one-sided sign test puts the loss beyond noise (p < :data:`LOSS_LEVEL`;
    with 30 replicates, 10 better against 20 worse is ``NO``, 11 against 19 is not).
    Otherwise ``yes`` when mip is at least as good in the median of the paired
    differences (same replicate, same workload), and ``noise`` when it is worse in the
    median but the replicates do not separate the two."""
    gains = paired_gains(metric, fair, mip)
    if not gains:
        return "-"
    better, worse = sum(g > 0 for g in gains), sum(g < 0 for g in gains)
    if all(g < 0 for g in gains) or sign_test_p(better, worse) < LOSS_LEVEL:
        return "NO"
    return "yes" if statistics.median(gains) >= 0 else "noise"


def better_worse(metric: str, fair: list[float | None], mip: list[float | None]) -> str:
    """In how many replicates ``mip`` is better / worse than ``fairshare`` (same
    workload), the counts :func:`verdict`'s sign test reads."""
    gains = paired_gains(metric, fair, mip)
    if not gains:
        return "-"
    return f"{sum(g > 0 for g in gains)}/{sum(g < 0 for g in gains)}"


def _shown(values: list[float]) -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    fmt = (lambda v: f"{v:.3f}") if abs(med) < 10 else (lambda v: f"{v:,.0f}")
    if len(values) == 1 or min(values) == max(values):
        return fmt(med)
    return f"{fmt(med)} [{fmt(min(values))}-{fmt(max(values))}]"


def render(name: str, found: dict[str, Any]) -> None:
    """Print one family's table from its runs (``--from-json`` re-renders saved ones)."""
    runs, seconds, days = found["runs"], found["seconds"], found["days"]
    rows = []
    for metric in METRICS:
        cols = {pol: [r[metric] for r in runs[pol]] for pol in POLICIES}
        rows.append([metric, *(_shown([v for v in cols[pol] if v is not None]) for pol in POLICIES),
                     verdict(metric, cols["fairshare"], cols["mip"]),
                     better_worse(metric, cols["fairshare"], cols["mip"])])
    rows.append(["wall s (median)", *(f"{statistics.median(seconds[pol]):.0f}" for pol in POLICIES), "", ""])
    print(f"\n{name} ({'full length' if days is None else f'{days:g} days'}; median [range] "
          f"over {len(runs['mip'])} replicates)")
    print(format_table(["metric", *POLICIES, "mip >= fairshare", "better/worse"], rows), flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--families", default=",".join(FAMILIES))
    p.add_argument("--replicates", type=int, default=3)
    p.add_argument("--days", type=float, default=None,
                   help="simulated days of the bundled scenarios (default: full length)")
    p.add_argument("--quick", action="store_true", help="2 replicates, 2 days of the bundled ones")
    p.add_argument("--time-limit", type=float, default=3.0, help="mip: seconds per plan")
    p.add_argument("--json", default=None, metavar="PATH", help="write every figure as JSON")
    p.add_argument("--from-json", default=None, metavar="PATH",
                   help="print the tables of a saved --json run instead of running")
    args = p.parse_args()
    if args.from_json:
        for name, found in json.loads(Path(args.from_json).read_text()).items():
            render(name, found)
        return 0
    if args.quick:
        args.replicates, args.days = 2, args.days or 2.0
    names = [n for n in args.families.split(",") if n]
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        p.error(f"unknown families {unknown}; choose from {', '.join(FAMILIES)}")
    print(f"outcomes: {args.replicates} replicates, mip {args.time_limit:g} s per plan, "
          f"{os.cpu_count()} cores (shared; timings noisy)", flush=True)
    everything: dict[str, Any] = {}
    for name in names:
        days = args.days if name in ("philly-week", "ai2-like") else GENERATED_DAYS
        runs: dict[str, list[dict[str, float | None]]] = {pol: [] for pol in POLICIES}
        seconds: dict[str, list[float]] = {pol: [] for pol in POLICIES}
        for rep in range(args.replicates):
            scenario = FAMILIES[name](rep)
            for pol in POLICIES:
                opts = {"time_limit": args.time_limit} if pol == "mip" else {}
                t0 = time.perf_counter()
                result = simulate(scenario, pol, days=days, **opts)
                seconds[pol].append(time.perf_counter() - t0)
                runs[pol].append(figures(result.summary))
                print(f"  {name} replicate {rep} {pol}: {seconds[pol][-1]:.0f} s", file=sys.stderr, flush=True)
        everything[name] = {"days": days, "runs": runs, "seconds": seconds}
        render(name, everything[name])
    if args.json:
        Path(args.json).write_text(json.dumps(everything, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
