"""What-if benchmark: the app's timing targets on one simulated week of ai2-like.

The issue's targets, current against edited budgets with replicates included:

- the first answer, from the fast ``fairshare`` preview, in under 10 s;
- the ``mip`` answer in under 3 minutes (and proportionally sooner with more workers):
  the app's quick mip stage (``whatif.QUICK_OPTIONS``: 0.3 s plans), which the answer
  with the what-if's 2 s plans (``whatif.RUN_OPTIONS``) then replaces.

All go through what the app runs (:func:`app_streamlit.whatif.run_points`: the sweep
machinery on a local Dask cluster, the replicates in pairs). Printed:

1. the local cluster's start-up (paid once per app process);
2. the preview of a fresh what-if: when the first replicate pair is in (the app's first
   answer) and when all runs are; and of a second edit (only the edited side runs: the
   current side's replicates are kept), each the median of ``--repeats``; and of a fresh
   what-if whose Run comes ``--run-after`` seconds after the page opened, the current
   side having run meanwhile as the page's warm-up does (``app_streamlit/warmup.py``).
   Each repeat measures every row once, in turn (the host's speed drifts over minutes),
   and one run in this process with the workers idle: the host's speed at the time, and
   the fresh what-if as a multiple of it (at best its rounds: 3 with 6 runs on 2 workers);
3. the quick mip stage over ``--quick-days`` (default the whole week, the target):
   when the first replicate pair is in and when all runs are;
4. ``mip`` with 2 s plans: a run of ``--mip-days`` per side and replicate (the default
   measures a quarter day) and the week that extrapolates to: the epochs in a week times
   the planner's seconds per epoch, over the workers. The first quarter day costs more
   per simulated hour than the week does (763 s extrapolated, 416 s measured whole with
   ``--mip-days 7``).

Measured on the project's 2-core machine, shared with other work (load average 6-8,
noisy; ``docs/app.md``, *How long it takes*): first answer 12.0 s, all 6 preview runs
28.1 s, an edit's 3 runs 14.7 s (medians of 5); one fairshare run 8.4 s inside a worker
(2.6 s of CPU); mip 2.0 s per simulated hour, so a week of 6 runs about 17 min. Quiet,
2026-12-02: all 6 preview runs 9.4-11.9 s, the quick mip week 136 s; with the
baseline's preemption count fixed (f2a6303: fairshare now preempts as its rule says,
and a week costs more), all 6 preview runs 11.7 s, the first answer 4.5 s (medians of 5).
Those 136 s were mostly greedy plans: the planner kept a fixed 0.3 s of a 0.5 s limit
after the solve, and CP-SAT, left about 0.1 s, found nothing in most epochs. With that
margin a tenth of the limit (``planner.mip.reserve_seconds``), on a slower host
(a fairshare week 4.5 s inside a worker): the quick mip week 212.5 s (143.1 s before the
fix), all 6 preview runs 14.7-15.8 s, an edit's 3 runs 9.0-10.2 s (one run each).
With 0.3 s plans that start from the LP's rounding (``planner.mip.SHORT_LIMIT``), on
the same host: the quick mip week 147.6 s, none of its 1,008 plans the greedy fallback.
On 2026-12-03/04 (five runs between 23:30 and 00:57 UTC, quiet): all 6 preview runs
11.7, 8.3, 9.7, 9.0 and 11.6 s; the fresh what-if 3.5-4.2 times one run in this process
(2.4-2.8 s), so the target holds only while the host is that fast (``docs/app.md``).
Now (a fresh clone of a26a4f1, 2026-12-05 01:05 UTC, medians of 3): all 6 preview runs
8.9 s (8.2, 10.0, 8.9), 3.5 times one run in this process (2.5 s); the quick mip week
129.9 s; every measurement since 2026-12-04 03:20 UTC met 10 s (``docs/app.md``,
*Where it stands*).

Usage::

    python benchmarks/whatif.py                     # preview x3, quick mip week, mip on 0.25 day (about 4 min)
    python benchmarks/whatif.py --mip-days 7        # also the 2 s mip week, whole (about 7 min more on 2 cores)
    python benchmarks/whatif.py --workers 4 --replicates 3

Timings on a shared machine are noisy: quote medians, with the core count. Exit code 1
when the preview with all its replicates misses the 10 s target (the first pair alone is
reported against it too); the mip target is reported, not enforced.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.cli.table import format_table  # noqa: E402

PREVIEW_TARGET_S = 10.0
MIP_TARGET_S = 180.0


def _timed(
    scenario: Any, points: Any, shares: Any, days: float, client: Any, options: Any = None
) -> tuple[float, dict[Any, Any], float]:
    """Wall seconds of one what-if's runs, their results, and the wall seconds until the
    first replicate pair (replicate 0 of each side asked for) was in."""
    from app_streamlit import whatif

    started = time.perf_counter()
    first = {p for p in points if p.replicate == min(q.replicate for q in points)}
    pair_at = [math.nan]

    def finished(point: Any, result: Any, error: Any) -> None:
        first.discard(point)
        if not first and math.isnan(pair_at[0]):
            pair_at[0] = time.perf_counter() - started

    results = whatif.run_points(
        scenario, points, shares, days, client=client, on_point=finished, options=options
    )
    return time.perf_counter() - started, results, pair_at[0]


def _warmed(scenario: Any, shares: Any, days: float, client: Any, replicates: int, after: float) -> float:
    """Wall seconds from Run to the preview's every run in, when Run is pressed ``after``
    seconds after the page opened: the page's warm-up (:mod:`app_streamlit.warmup`) runs
    the current side meanwhile, and Run starts the edited side and waits for the rest."""
    from concurrent.futures import wait

    from app_streamlit import whatif
    from app_streamlit.warmup import Warmup

    points = whatif.points_for("fairshare", replicates)
    current = [p for p in points if p.budgets == "current"]
    warm, cache = Warmup(), {}

    def batch(todo: list[Any], on_point: Any, on_hours: Any) -> None:
        whatif.run_points(scenario, todo, {}, days, client=client, on_point=on_point, on_hours=on_hours)

    warm.start(current, lambda p: p, cache, batch)
    time.sleep(after)
    pressed = time.perf_counter()
    edited = [p for p in points if p.budgets == "edited"]
    whatif.run_points(scenario, edited, shares, days, client=client)
    wait([f for p in current if (f := warm.pending(p)) is not None])
    return time.perf_counter() - pressed


def _from_disk(
    scenario: Any, shares: Any, days: float, client: Any, replicates: int, folder: Path
) -> tuple[float, float]:
    """Wall seconds from Run to the preview's every run in, and to its first replicate
    pair, in a fresh app process whose current side an earlier one left on disk
    (:mod:`app_streamlit.run_cache`): the current side is read back, the edited side runs."""
    from app_streamlit import whatif
    from app_streamlit.run_cache import RunCache

    points = whatif.points_for("fairshare", replicates)
    pressed = time.perf_counter()
    cache = RunCache(folder)  # nothing in memory: what a new process has
    current = {p: cache[("bench", p)] for p in points if p.budgets == "current"}
    assert len(current) == replicates
    edited = [p for p in points if p.budgets == "edited"]
    pair_at = [math.nan]

    def finished(point: Any, result: Any, error: Any) -> None:
        if point.replicate == 0 and math.isnan(pair_at[0]):
            pair_at[0] = time.perf_counter() - pressed

    whatif.run_points(scenario, edited, shares, days, client=client, on_point=finished)
    return time.perf_counter() - pressed, pair_at[0]


def _fallbacks(results: Any) -> str:
    """How many of the runs' plans were the greedy fallback. A stage whose plans are
    mostly the fallback measures the greedy plan, not the MIP (until the planner kept a
    margin of a tenth of short limits, 20 of a quick-stage day's 24 plans were)."""
    from app_streamlit import whatif

    plans, fallbacks = whatif.plan_counts(results)
    return f"{fallbacks:,} of {plans:,} plans" if plans else "no plans reported"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="ai2-like")
    parser.add_argument("--days", type=float, default=7.0, help="simulated days of the preview (default 7)")
    parser.add_argument("--replicates", type=int, default=3, help="replicates per side (the app's default, 3)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="local Dask workers")
    parser.add_argument("--repeats", type=int, default=3, help="preview measurements (median reported)")
    parser.add_argument(
        "--run-after", default="5,15",
        help="seconds between the page opening (the current side's warm-up starting) and Run, "
        "comma-separated (default 5,15; empty: skip)",
    )
    parser.add_argument(
        "--quick-days", type=float, default=7.0,
        help="simulated days of the quick mip stage (0.3 s plans; default 7: the target, measured whole)",
    )
    parser.add_argument("--mip-days", type=float, default=0.25, help="simulated days of the mip runs (0: skip)")
    args = parser.parse_args(argv)

    from distributed import Client

    from app_streamlit import state, whatif
    from scenarios.sweep import start_local_cluster

    loaded = state.load_bundled(args.scenario)
    s = loaded.scenario
    first = next(iter(s.org)).name
    print(
        f"{args.scenario}: {len(s.jobs):,} jobs; {args.replicates} replicates a side; "
        f"{args.workers} local Dask workers on {os.cpu_count()} cores (shared, noisy)"
    )
    rows: list[list[object]] = []
    started = time.perf_counter()
    cluster = start_local_cluster(args.workers, preload=whatif.WORKER_PRELOAD)
    client = Client(cluster)
    rows.append(["local Dask cluster start", "", f"{time.perf_counter() - started:.1f}", "", ""])
    try:
        fresh, pairs, second, inside, disk, disk_pairs, here = [], [], [], [], [], [], []
        folder = Path(tempfile.mkdtemp(prefix="gpuplan-bench-runs-"))
        afters = [float(a) for a in args.run_after.split(",") if a.strip()]
        warmed: dict[float, list[float]] = {after: [] for after in afters}
        # Each repeat measures every row once, in turn: the host's speed drifts over
        # minutes, and rows measured in blocks would compare different hosts.
        for i in range(args.repeats):
            shares, _ = state.shares_from_percents(s, {state.ROOT: {first: 30.0 + i}})
            both = whatif.points_for("fairshare", args.replicates)
            took, done, pair = _timed(s, both, shares, args.days, client)
            fresh.append(took)
            pairs.append(pair)
            inside += [r.seconds for r in done.values()]
            # The host's speed now, for the ratio below: one run in this process, the
            # workers idle (the machine's speed moves by half over minutes).
            here.append(whatif.replicate_run(s, "fairshare", days=args.days, replicate=1).seconds)
            if i == 0:  # what an earlier app process leaves on disk: the current side
                from app_streamlit.run_cache import RunCache

                kept = RunCache(folder)
                for point, result in done.items():
                    if point.budgets == "current":
                        kept[("bench", point)] = result
            edited = [p for p in both if p.budgets == "edited"]
            other, _ = state.shares_from_percents(s, {state.ROOT: {first: 40.0 + i}})
            second.append(_timed(s, edited, other, args.days, client)[0])
            shares, _ = state.shares_from_percents(s, {state.ROOT: {first: 45.0 + i}})
            took, pair = _from_disk(s, shares, args.days, client, args.replicates, folder)
            disk.append(took)
            disk_pairs.append(pair)
            for after in afters:
                shares, _ = state.shares_from_percents(s, {state.ROOT: {first: 50.0 + i}})
                warmed[after].append(_warmed(s, shares, args.days, client, args.replicates, after))
        for name, times, runs in (
            ("preview (fairshare), fresh: first replicate pair in", pairs, 2),
            ("preview (fairshare), fresh: both sides, all replicates", fresh, 2 * args.replicates),
            ("preview (fairshare), next edit: edited side", second, args.replicates),
            ("preview (fairshare), new app process, current side on disk: first pair in", disk_pairs, 1),
            ("preview (fairshare), new app process, current side on disk: all replicates", disk,
             args.replicates),
            *(
                (f"preview (fairshare), fresh, Run {after:g} s after the page opened (current side warmed)",
                 times, 2 * args.replicates)
                for after, times in warmed.items()
            ),
        ):
            median = statistics.median(times)
            rows.append([
                name, f"{args.days:g} d x {runs} runs", f"{median:.1f}",
                ", ".join(f"{t:.1f}" for t in times),
                "yes" if median <= PREVIEW_TARGET_S else "NO",
            ])
        rounds = -(-2 * args.replicates // args.workers)
        rows.append([
            "  one fairshare run, inside its worker", f"{args.days:g} d", f"{statistics.median(inside):.1f}",
            f"at best {rounds} rounds of this per fresh what-if", "",
        ])
        rows.append([
            "  one fairshare run, in this process, workers idle", f"{args.days:g} d",
            f"{statistics.median(here):.1f}",
            f"fresh what-if = {statistics.median(fresh) / statistics.median(here):.1f} of these "
            f"(at best {rounds}: its rounds)", "",
        ])
        ok = statistics.median(fresh) <= PREVIEW_TARGET_S  # the strict reading: replicates included
        # The mip runs (quick and 2 s) all answer one edit: the first program to 30 %.
        shares, _ = state.shares_from_percents(s, {state.ROOT: {first: 30.0}})
        if args.quick_days > 0:
            policy, options = whatif.stage_run(whatif.QUICK_STAGE)
            both = whatif.points_for(policy, args.replicates)
            took, results, pair = _timed(s, both, shares, args.quick_days, client, options)
            per_run = statistics.median(r.seconds for r in results.values())
            rows.append([
                f"quick mip ({options['time_limit']:g} s plans), both sides: first replicate pair in",
                f"{args.quick_days:g} d x 2 runs", f"{pair:.1f}", "", "",
            ])
            rows.append([
                f"quick mip ({options['time_limit']:g} s plans), both sides, all replicates",
                f"{args.quick_days:g} d x {len(both)} runs", f"{took:.1f}",
                f"median run {per_run:.1f} s",
                ("yes" if took <= MIP_TARGET_S else "NO") if args.quick_days >= 7 else "(shorter than the week)",
            ])
            rows.append([
                "  plans that were the greedy fallback (no answer in time)", "", "",
                _fallbacks(results.values()), "",
            ])
        if args.mip_days > 0:
            both = whatif.points_for("mip", args.replicates)
            took, results, _ = _timed(s, both, shares, args.mip_days, client)
            per_run = statistics.median(r.seconds for r in results.values())
            hours = args.mip_days * 24
            week_run = per_run * (7 * 24) / hours
            rounds = -(-len(both) // args.workers)
            week = week_run * rounds
            rows.append([
                "mip, both sides", f"{args.mip_days:g} d x {len(both)} runs", f"{took:.1f}",
                f"median run {per_run:.1f} s = {per_run / hours:.1f} s per simulated h", "",
            ])
            rows.append([
                "  plans that were the greedy fallback (no answer in time)", "", "",
                _fallbacks(results.values()), "",
            ])
            rows.append([
                "mip, one week (extrapolated)", f"7 d x {len(both)} runs", f"{week:.0f}",
                f"{rounds} rounds of {args.workers} runs x {week_run:.0f} s",
                "yes" if week <= MIP_TARGET_S else "NO",
            ])
    finally:
        client.close()
        cluster.close()
        shutil.rmtree(folder, ignore_errors=True)
    print(format_table(["what", "work", "seconds (median)", "each / how", "target met"], rows))
    print(
        f"Targets: preview <= {PREVIEW_TARGET_S:g} s; mip week (the quick stage) <= {MIP_TARGET_S:g} s. "
        "Replicates run in parallel, one per worker: more workers, fewer rounds."
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
