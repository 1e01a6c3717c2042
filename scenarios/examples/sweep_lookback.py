"""Example sweep script: fair-share lookback x the language program's share on ai2-like.

Copy this file and change the constants below. Run it with::

    python sweep_lookback.py --workers 2          # a local Dask cluster of 2 processes
    python sweep_lookback.py --scheduler tcp://host:8786   # an existing Dask cluster
    python sweep_lookback.py --base tiny --days 1          # a quick try-out

Finished points are saved under ``--out`` as they complete: stop it with Ctrl-C and run
it again to carry on where it stopped. It prints, per lookback and share, how much of the
GPU time owed was delivered (overall and to the worst-served project) and the p90 wait
of debug jobs.
"""

from __future__ import annotations

import argparse
from typing import Any

from scenarios import sweep

BASE = "ai2-like"  # a bundled scenario name, or the path of your scenario file
DAYS = 2.0  # simulated days per point
POLICIES = ["fairshare"]
GRID: dict[str, list[Any]] = {
    "policy.lookback": ["1d", "3d", "7d"],
    # The language program's share of the whole (its siblings keep theirs).
    "org.language.share": [25, 35, 45],
}
METRICS = ["delivered_over_owed", "worst_project_delivered_over_owed", "wait_p90_s.debug"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=BASE, help=f"scenario (default: {BASE})")
    parser.add_argument("--days", type=float, default=DAYS, help=f"simulated days (default: {DAYS:g})")
    parser.add_argument("--workers", type=int, default=2, help="local worker processes (0: serial)")
    parser.add_argument("--scheduler", help="address of an existing Dask scheduler")
    parser.add_argument("--out", default="sweep_lookback-results", help="result folder")
    args = parser.parse_args()

    grid: dict[str, list[Any]] = dict(GRID)
    if args.base == "tiny":  # the tiny scenario's programs are research and infra
        grid = {"policy.lookback": GRID["policy.lookback"], "org.research.share": [2, 3, 4]}
    frame = sweep(
        args.base,
        grid=grid,
        policies=POLICIES,
        days=args.days,
        workers=args.workers,
        scheduler=args.scheduler,
        out=args.out,
        progress=True,
    )
    failed = frame[frame["error"].notna()]
    if len(failed):
        print(f"{len(failed)} points failed:")
        print(failed[[*grid, "policy", "error"]].to_string(index=False))
    ok = frame[frame["error"].isna()]
    share_key = list(grid)[1]
    for metric in METRICS:
        if metric not in ok.columns:
            continue
        print(f"\n{metric} (rows: policy.lookback, columns: {share_key})")
        table = ok.pivot_table(index=["policy", "policy.lookback"], columns=share_key, values=metric)
        print(table.round(3).to_string())
    print(f"\nAll columns: {args.out}/results.csv")


# The guard is required: Dask starts its worker processes by re-importing this file.
if __name__ == "__main__":
    main()
