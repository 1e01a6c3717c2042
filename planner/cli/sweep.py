"""``gpuplan sweep SWEEP.yaml [--workers N] [--scheduler tcp://HOST:PORT] [--out DIR]``."""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import TYPE_CHECKING, Any

from planner.cli.errors import UsageError
from planner.cli.table import format_table
from scenarios.sweep import ERROR_COLUMN, POINT_COLUMN, SEED_COLUMN, SweepReport
from scenarios.sweep_file import load_sweep_file

if TYPE_CHECKING:
    import pandas as pd

#: Metrics the end-of-sweep table shows, when the simulator reports them.
HEADLINE = (
    "delivered_over_owed",
    "worst_project_delivered_over_owed",
    "occupancy",
    "wait_p90_s.debug",
    "preemptions",
)
MAX_TABLE_ROWS = 40


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "sweep",
        help="simulate a grid of scenario variants, locally or on a Dask cluster",
        description="Run the simulator over every point of a sweep file's grid, under each "
        "policy and seed. Each finished point is written at once under OUT/points/, so "
        "an interrupted sweep loses nothing and a rerun skips the finished points; "
        "OUT/results.csv and OUT/results.parquet hold the whole sweep. A failing point "
        "is reported with its error and the others go on. Exit code 0 when every point "
        "ran, 1 when some failed, 2 for bad input. See docs/sweeps.md for the file.",
    )
    p.add_argument("file", metavar="SWEEP.yaml", help="sweep file (base, grid, policies, seeds, days)")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="worker processes of the local Dask cluster (default: the CPU count; "
        "0 runs the points one by one in this process)",
    )
    where.add_argument(
        "--scheduler",
        metavar="tcp://HOST:PORT",
        help="run on an existing Dask cluster (its workers need gpuplan installed)",
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        help="result folder (default: the file's 'out', else SWEEP-results in the current folder)",
    )
    p.add_argument("--no-progress", action="store_true", help="do not show the progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.workers is not None and args.workers < 0:
        raise UsageError(f"--workers: expected 0 or more, got {args.workers}")
    workers = args.workers if args.workers is not None else (os.cpu_count() or 1)
    if args.out is not None and not args.out.strip():
        raise UsageError("--out: must not be empty")
    sweep_file = load_sweep_file(args.file)
    out = sweep_file.out_dir(args.out)
    try:
        report = sweep_file.run(
            out=out, workers=workers, scheduler=args.scheduler, progress=not args.no_progress
        )
    except KeyboardInterrupt:
        saved = len(list((out / "points").glob("*.parquet")))
        print(
            f"gpuplan sweep: stopped; {saved} finished points are saved in {out / 'points'}: "
            "run the same command again to carry on",
            file=sys.stderr,
        )
        raise
    print(results_table(report.frame, list(sweep_file.spec.grid)))
    print()
    print(outcome_line(report))
    return 1 if report.failed else 0


def outcome_line(report: SweepReport) -> str:
    """``8 points: 6 ran, 2 already done, 1 failed. Results: ...``."""
    ran = report.total - report.skipped
    text = f"{report.total} points: {ran} ran, {report.skipped} already done, {report.failed} failed."
    if report.files:
        text += " Results: " + ", ".join(str(f) for f in report.files)
    return text


def results_table(frame: pd.DataFrame, grid_keys: list[str]) -> str:
    """The grid columns, policy, seed and a few headline metrics, one row per point."""
    columns = [POINT_COLUMN, *grid_keys]
    if SEED_COLUMN in frame.columns:
        columns.append(SEED_COLUMN)
    columns.append("policy")
    columns += [m for m in HEADLINE if m in frame.columns]
    failed = bool(frame[ERROR_COLUMN].notna().any()) if ERROR_COLUMN in frame.columns else False
    if failed:
        columns.append(ERROR_COLUMN)
    shown = frame.head(MAX_TABLE_ROWS)
    rows: list[list[Any]] = []
    for record in shown.to_dict("records"):
        rows.append([_cell(record.get(c)) for c in columns])
    table = format_table(columns, rows)
    if len(frame) > MAX_TABLE_ROWS:
        table += f"\n... {len(frame) - MAX_TABLE_ROWS} more rows in the results files"
    return table


def _cell(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, str) and len(value) > 60:
        return value[:57] + "..."
    if hasattr(value, "item"):
        return value.item()
    return value
