"""``gpuplan scenario show FILE``."""

from __future__ import annotations

import argparse

from models import Scenario, effective_shares, walk
from planner.cli.table import format_table
from planner.fairshare import owed_at
from scenarios import load_scenario


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("scenario", help="inspect a scenario", description="Inspect a scenario file.")
    sub = p.add_subparsers(dest="scenario_command", metavar="SUBCOMMAND", required=True)
    show = sub.add_parser(
        "show",
        help="capacity, org tree with effective shares, workload statistics",
        description="Print capacity per pool; the org tree with each unit's effective share "
        "of the cluster and each project's owed share at the scenario's start; workload "
        "statistics (jobs, GPU-hours, offered load per day).",
    )
    show.add_argument("file", help="scenario YAML file (or a bundled scenario name)")
    show.set_defaults(func=run_show)


def run_show(args: argparse.Namespace) -> int:
    s = load_scenario(args.file)
    print(f"Scenario {s.name!r}" + (f", starting {s.start.isoformat()}" if s.start else ""))
    print()
    print(capacity_table(s))
    print()
    print(org_table(s))
    print()
    print(workload_table(s))
    return 0


def capacity_table(s: Scenario) -> str:
    gpus = s.pool_gpus()
    nodes: dict[str, int] = {}
    for n in s.nodes:
        key = str(n.pool)
        nodes[key] = nodes.get(key, 0) + 1
    rows: list[list[object]] = []
    for pool, count in gpus.items():
        rate = s.rate(pool.gpu_type)
        rows.append([str(pool), nodes[str(pool)], count, rate, count * rate])
    rows.append(["total", len(s.nodes), sum(gpus.values()), "", s.capacity_h100()])
    return format_table(["pool", "nodes", "GPUs", "rate", "H100-eq"], rows)


def org_table(s: Scenario) -> str:
    shares = effective_shares(s.org)
    owed = owed_at_start(s)
    capacity = s.capacity_h100()
    rows: list[list[object]] = []
    for path, unit in walk(s.org):
        depth = path.count("/")
        label = "  " * depth + unit.name + ("" if unit.is_project else "/")
        # A unit is owed what its projects are owed (water-filling keeps excess inside
        # the unit before passing it up).
        unit_owed = sum(v for p, v in owed.items() if p == path or p.startswith(path + "/"))
        owed_cell: object = (
            f"{unit_owed:,.1f} ({unit_owed / capacity:.1%})" if owed and capacity else ""
        )
        rows.append([label, unit.share, f"{shares[path]:.1%}", f"{shares[path] * capacity:,.1f}", owed_cell])
    return format_table(["org unit", "share", "effective", "H100-eq", "owed at start (H100-eq)"], rows)


def owed_at_start(s: Scenario) -> dict[str, float]:
    """Each project's owed H100-equivalents at the start (water-filled over demand then)."""
    return owed_at(s, 0.0)


def workload_table(s: Scenario) -> str:
    jobs = s.jobs
    if not jobs:
        return "no jobs"
    rate = _min_rate_per_job(s)
    gpu_h = sum(j.gpus * (j.duration or 0.0) for j in jobs) / 3600
    h100_h = sum(j.gpus * (j.duration or 0.0) * rate[j.id] for j in jobs) / 3600
    kinds: dict[str, int] = {}
    for j in jobs:
        kinds[str(j.kind)] = kinds.get(str(j.kind), 0) + 1
    lines = [
        f"{len(jobs):,} jobs ({', '.join(f'{n:,} {k}' for k, n in sorted(kinds.items()))}), "
        f"{len({j.user for j in jobs}):,} users, {gpu_h:,.0f} GPU-hours "
        f"(~{h100_h:,.0f} H100-eq hours at the cheapest allowed type)",
    ]
    capacity = s.capacity_h100()
    day = 86400.0
    last = max(j.submit for j in jobs)
    days = int(last // day) + 1
    # One pass over the jobs, not one per day: a workload may span years.
    count = [0] * days
    work = [0.0] * days
    for j in jobs:
        d = int(j.submit // day)
        count[d] += 1
        work[d] += j.gpus * (j.duration or 0.0) * rate[j.id]
    rows: list[list[object]] = [
        [d, count[d], work[d] / 3600, work[d] / (capacity * day) if capacity else 0.0]
        for d in range(days)
    ]
    lines.append("")
    lines.append(format_table(["day", "jobs submitted", "H100-eq hours", "offered load"], rows))
    return "\n".join(lines)


def _min_rate_per_job(s: Scenario) -> dict[str, float]:
    rates: dict[str, float] = {}
    for j in s.jobs:
        allowed = [
            s.rate(p.gpu_type) for c in s.clusters for p in c.pools() if s.job_fits(j, c, p.gpu_type)
        ]
        rates[j.id] = min(allowed)
    return rates
