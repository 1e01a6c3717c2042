"""``gpuplan simulate SCENARIO [--policy legacy|fairshare|mip ...] [--days N] [--out DIR]``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from models import Scenario, format_duration
from models.limits import MAX_DAYS, MAX_SIMULATED_SLICES
from planner.cli.errors import UsageError
from planner.cli.options import require_positive
from planner.cli.table import format_table
from scenarios import load_scenario
from scenarios.files import probe_writable

POLICIES = ("legacy", "fairshare", "mip")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="replay a scenario under scheduling policies and compare outcomes",
        description="Replay the scenario's workload under each policy (the same jobs for "
        "all), print the side-by-side metrics and write summary.json, projects.csv, "
        "jobs.csv and report.html to --out. Metric definitions: docs/metrics.md.",
    )
    p.add_argument("scenario", help="scenario YAML file (or a bundled name, e.g. tiny)")
    p.add_argument(
        "--policy",
        action="append",
        metavar="NAME",
        help="legacy, fairshare or mip; repeat it or give a comma list "
        "(default: all three)",
    )
    p.add_argument("--days", type=float, default=None,
                   help="simulated days (default: until the workload's last job would end, "
                   "at most one day after the last submission)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write summary.json, projects.csv, jobs.csv and report.html here")
    p.add_argument("--backend", default="cpsat", help="mip: solver backend (cpsat or pulp)")
    p.add_argument("--time-limit", type=float, default=10.0, metavar="S",
                   help="mip: solver time limit per epoch in seconds (default 10)")
    p.add_argument("--no-holds", dest="holds", action="store_false",
                   help="mip: do not hold whole-node holes for waiting large gangs")
    p.add_argument("--hold-fraction", type=float, default=None, metavar="F",
                   help="mip: largest part of a pool one held hole may take (default 0.25)")
    p.add_argument("--no-fast-lane", dest="fast_lane", action="store_false",
                   help="mip: debug jobs wait for the plan instead of preempting between epochs")
    p.add_argument("--replan-slices", action="store_true",
                   help="mip: re-plan at every slice boundary, not only at epochs")
    p.add_argument("--seed", type=int, default=0,
                   help="legacy: seed of the priority-level assignment (default 0)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=run)


def parse_policies(values: list[str] | None) -> list[str]:
    """Policy names from repeated/comma-separated ``--policy`` values, in order, unique."""
    if not values:
        return list(POLICIES)
    out: list[str] = []
    for v in values:
        for name in v.split(","):
            name = name.strip()
            if not name:
                continue
            if name not in POLICIES:
                raise UsageError(f"--policy: unknown policy {name!r} (choose from {', '.join(POLICIES)})")
            if name not in out:
                out.append(name)
    if not out:
        raise UsageError("--policy: no policy named")
    return out


def check_slices(file: str, scenario: Scenario, days: float | None) -> None:
    """Refuse a simulation of more than :data:`MAX_SIMULATED_SLICES` slices before it
    starts: ten years of one-second epochs is a valid scenario, and would run for days."""
    from planner.simulator import default_horizon

    horizon = days * 86400.0 if days is not None else default_horizon(scenario)
    slices = horizon / scenario.policy.slice_length
    if slices > MAX_SIMULATED_SLICES:
        span = f"--days {days:g}" if days is not None else "the workload"
        raise UsageError(
            f"{file}: {span} spans {slices:,.0f} slices of "
            f"{format_duration(scenario.policy.slice_length)} (policy.epoch / policy.slices); "
            f"a simulation takes at most {MAX_SIMULATED_SLICES:,}: give a smaller --days or "
            "longer slices"
        )


def run(args: argparse.Namespace) -> int:
    from planner.simulator import simulate
    from planner.simulator.report import summary_json, summary_rows, write_report

    policies = parse_policies(args.policy)
    if args.days is not None:
        require_positive("--days", args.days, maximum=MAX_DAYS)
    if args.time_limit is not None:
        require_positive("--time-limit", args.time_limit)
    if args.seed < 0:
        raise UsageError(f"--seed: must be 0 or more, got {args.seed}")
    if args.hold_fraction is not None and not 0 < args.hold_fraction <= 1:
        raise UsageError(f"--hold-fraction: must be in (0, 1], got {args.hold_fraction:g}")
    if args.backend not in ("cpsat", "pulp"):
        raise UsageError(f"--backend: unknown backend {args.backend!r} (choose cpsat or pulp)")
    out = Path(args.out) if args.out else None
    if out is not None and out.exists() and not out.is_dir():
        raise UsageError(f"--out: {out} exists and is not a directory")
    scenario = load_scenario(args.scenario)
    check_slices(args.scenario, scenario, args.days)
    if out is not None:
        prepare_out(out)  # before the simulation: a folder it cannot write fails now
    progress = not args.no_progress and sys.stderr.isatty()
    options: dict[str, dict[str, Any]] = {
        "legacy": {"seed": args.seed},
        "fairshare": {},
        "mip": {"backend": args.backend, "time_limit": args.time_limit, "holds": args.holds,
                "fast_lane": args.fast_lane, "replan_slices": args.replan_slices},
    }
    if args.hold_fraction is not None:
        options["mip"]["hold_fraction"] = args.hold_fraction
    results = {}
    for name in policies:
        try:
            results[name] = simulate(scenario, name, days=args.days, progress=progress,
                                     **options[name])
        except ValueError as exc:
            raise UsageError(f"{args.scenario}: {exc}") from None
    rows = summary_rows(results)
    horizon = next(iter(results.values())).horizon
    within = sum(1 for j in scenario.jobs if j.submit < horizon)
    count = (f"{len(scenario.jobs)} jobs" if within == len(scenario.jobs)
             else f"{within:,} of its {len(scenario.jobs):,} jobs submitted")
    print(f"scenario {scenario.name!r}: {count} in {horizon / 3600:g} h simulated")
    print(format_table(["metric", *policies], [[k, *v] for k, v in rows]))
    if out is not None:
        summary = summary_json(results)
        projects = pd.concat(
            [r.projects.assign(policy=n) for n, r in results.items()], ignore_index=True
        ).pipe(_policy_first)
        jobs = pd.concat(
            [r.jobs.assign(policy=n) for n, r in results.items()], ignore_index=True
        ).pipe(_policy_first)
        try:
            (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
            projects.to_csv(out / "projects.csv", index=False)
            jobs.to_csv(out / "jobs.csv", index=False)
            write_report(results, out / "report.html")
        except OSError as exc:
            where = exc.filename or out
            raise UsageError(f"--out: cannot write {where}: {exc.strerror or exc}") from None
        print(f"wrote {out}/{', '.join(OUT_FILES)}")
    return 0


OUT_FILES = ("summary.json", "projects.csv", "jobs.csv", "report.html")
"""What ``--out`` gets, in that folder."""


def prepare_out(out: Path) -> None:
    """Create ``out`` and check that the files of :data:`OUT_FILES` can be written there
    (a probe file is written and removed), so that a simulation is not run for nothing.

    Raises
    ------
    UsageError
        Naming the folder or file and why.
    """
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out: cannot create {exc.filename or out}: {exc.strerror or exc}") from None
    for name in OUT_FILES:
        if (out / name).is_dir():
            raise UsageError(f"--out: cannot write {out / name}: it is a directory")
    try:
        probe_writable(out)
    except OSError as exc:
        raise UsageError(f"--out: cannot write in {out}: {exc.strerror or exc}") from None


def _policy_first(df: pd.DataFrame) -> pd.DataFrame:
    return df[["policy", *[c for c in df.columns if c != "policy"]]]
