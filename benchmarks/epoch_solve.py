"""Time one epoch's solve over families of snapshots (``benchmarks/families.py``).

For each family (``--family NAME`` or ``all``) and each seed, one snapshot is drawn and
planned with ``plan_epoch``. One row per (family, backend): runs, jobs, job classes,
variables, seconds (median and slowest), the gap of the plan as placed (median and
worst: ``SolverInfo.gap``) and as charged (median and worst: the plan's own charging,
``SolverInfo.charged_objective``, against the same bound), the phase that ended the
search in the worst run, and the peak memory (resident set, planner and solver process,
so far in this run), the share of the owed work the plan delivers ("del/owed":
per project ``min(planned, owed)`` over the owed total, owed from the snapshot's
standings), and the target column says "met" only when every run met it on both
gaps and on time.

Targets (issue 17): 3,000 jobs within 1% of the bound in 10 s on every family; the
``scale`` family (30,000 jobs) within 1% in 60 s under 4 GiB.

The machine these figures come from has 2 cores shared with other work: timings are
noisy; compare before and after in one run (``--code DIR`` runs another checkout's
planner on the same snapshots).

Usage::

    .venv/bin/python benchmarks/epoch_solve.py --family all          # 12 seeds each, about 16 min
    .venv/bin/python benchmarks/epoch_solve.py --family all --quick
    .venv/bin/python benchmarks/epoch_solve.py --family warm cold --seeds 5
    .venv/bin/python benchmarks/epoch_solve.py --family cold --seeds 12 --first-seed 13  # seeds 13-24
    .venv/bin/python benchmarks/epoch_solve.py --family scale --seeds 1
    .venv/bin/python benchmarks/epoch_solve.py --family warm --code /tmp/base   # before
    .venv/bin/python benchmarks/epoch_solve.py --family scale --seeds 3 --lanes 1  # no lanes
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

#: family -> (seconds, gap) the issue asks for.
TARGETS: dict[str, tuple[float, float]] = {"scale": (60.0, 0.01)}
DEFAULT_TARGET = (10.0, 0.01)
GIB = 1024**3


def _rss_peak() -> int:
    """Peak resident set (bytes) of this process plus its live children (the solver)."""
    total = 0
    pids = [str(os.getpid())]
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as fh:
                pids += fh.read().split()
    except OSError:
        pass
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", nargs="+", default=["all"], help="family names, or all")
    ap.add_argument("--backend", nargs="+", default=["cpsat"])
    ap.add_argument("--time-limit", type=float, default=None, help="default: the family's target")
    ap.add_argument("--gap", type=float, default=0.01)
    # 12 by default: with 3, warm read "met" while seeds 4 and 5 miss; with 8, cold while
    # seed 9 misses (docs/formulation-passes.md, fifteenth pass).
    ap.add_argument("--seeds", type=int, default=12, help="snapshots per family (seeds 1..N; default 12)")
    ap.add_argument("--first-seed", type=int, default=1,
                    help="the first seed (default 1): a second round on seeds the first did not run")
    ap.add_argument("--quick", action="store_true", help="2 seeds per family")
    ap.add_argument("--jobs", type=int, default=None, help="override the family's job count")
    ap.add_argument("--code", type=Path, default=None, help="the checkout whose planner to run")
    ap.add_argument("--verbose", action="store_true", help="print each run's solver message")
    ap.add_argument(
        "--lanes", type=int, default=None,
        help="parts of a decomposed epoch planned at once (default: one per core; 1: one "
        "after another)",
    )
    ap.add_argument(
        "--greedy", action="store_true", help="also print the greedy plan's delivered/owed"
    )
    args = ap.parse_args(argv)
    if args.seeds < 1 or args.first_seed < 0:
        ap.error("--seeds must be at least 1 and --first-seed at least 0")  # exits with code 2
    root = args.code.resolve() if args.code else Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(root))
    from families import NAMES, family_snapshot

    from planner.mip import plan_epoch

    names = list(NAMES) if "all" in args.family else args.family
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        print(f"epoch_solve: unknown family {unknown[0]!r} (known: {', '.join(NAMES)}, all)", file=sys.stderr)
        return 2
    if "all" in args.family:
        names.remove("scale")  # 30,000 jobs: ask for it by name
    seeds = range(args.first_seed, args.first_seed + (2 if args.quick else args.seeds))
    print(
        f"planner from {root}; 2-core machine shared with other work, timings noisy; "
        f"seeds {seeds.start}..{seeds.stop - 1}"
    )
    header = (
        f"{'family':>15} {'backend':>7} {'runs':>4} {'jobs':>6} {'classes':>7} {'vars':>7} "
        f"{'sec med':>7} {'max':>6} {'gap med':>7} {'worst':>6} {'charged':>7} {'worst':>6} "
        f"{'RSS GiB':>7} {'del/owed':>8} {'ended by (worst run)':<28} target"
    )
    print(header)
    for name in names:
        limit_s, limit_gap = TARGETS.get(name, DEFAULT_TARGET)
        time_limit = args.time_limit or limit_s
        snaps = [(seed, family_snapshot(name, seed, args.jobs)) for seed in seeds]
        for backend in args.backend:
            times: list[float] = []
            gaps: list[float] = []
            charged: list[float] = []
            classes: list[int] = []
            delivered: list[float] = []
            nvars: list[int] = []
            ended = ""
            worst = -1.0
            for seed, snap in snaps:
                t0 = time.perf_counter()
                extra = {} if args.lanes is None else {"lanes": args.lanes}
                plan = plan_epoch(snap, backend=backend, time_limit=time_limit, rel_gap=args.gap,
                                  **extra)
                times.append(time.perf_counter() - t0)
                info = plan.solver
                gap = info.gap if info.gap is not None and not info.fallback else float("inf")
                cg = (
                    (info.bound - info.charged_objective) / max(abs(info.bound), 1.0)
                    if info.charged_objective is not None and info.bound is not None
                    else float("inf")
                )
                gaps.append(gap)
                charged.append(cg)
                delivered.append(_delivered(snap, plan))
                parts = info.message.split(",")
                try:
                    nvars.append(int(parts[0].split()[0]))
                    classes.append(int(parts[2].split()[0]))
                except (IndexError, ValueError):
                    pass
                if max(gap, cg) > worst:
                    worst = max(gap, cg)
                    ended = _ended_by(info.message)
                if args.verbose:
                    print(
                        f"    seed {seed}: {times[-1]:.2f}s gap {gap:.2%} charged {cg:.2%} "
                        f"(objective {info.objective}, bound {info.bound}): {info.message}"
                    )
                else:  # progress: a family's row comes only after all its seeds
                    print(f"  {name} {backend} seed {seed} of {len(snaps)}: {times[-1]:.1f}s gap {gap:.2%}",
                          file=sys.stderr, flush=True)
            ok = all(
                t <= limit_s and g <= limit_gap and c <= limit_gap
                for t, g, c in zip(times, gaps, charged, strict=True)
            )
            jobs = statistics.median(len(s.jobs) for _, s in snaps)
            print(
                f"{name:>15} {backend:>7} {len(times):>4} {jobs:>6,.0f} "
                f"{statistics.median(classes) if classes else 0:>7,.0f} "
                f"{statistics.median(nvars) if nvars else 0:>7,.0f} "
                f"{statistics.median(times):>7.2f} {max(times):>6.2f} "
                f"{statistics.median(gaps):>7.2%} {max(gaps):>6.2%} "
                f"{statistics.median(charged):>7.2%} {max(charged):>6.2%} "
                f"{_rss_peak() / GIB:>7.2f} {statistics.median(delivered):>8.1%} "
                f"{ended[:28]:<28} {'met' if ok else 'MISSED'}",
                flush=True,
            )
        if args.greedy:
            from models import SolverInfo, SolveStatus
            from planner.mip.epoch import build_epoch
            from planner.mip.greedy import greedy_plan, greedy_runs

            shares = []
            for _, snap in snaps:
                epoch = build_epoch(snap)
                info = SolverInfo(backend="greedy", status=SolveStatus.FEASIBLE)
                shares.append(_delivered(snap, greedy_plan(epoch, greedy_runs(epoch, None), info)))
            print(f"{name:>15} {'greedy':>7} {len(shares):>4} delivered/owed median {statistics.median(shares):.1%}")
    return 0


def _delivered(snap: Any, plan: Any) -> float:
    """Work the plan delivers within each project's owed share, over all owed work.

    Per project ``min(planned, owed)`` H100-eq GPU-hours, owed from the snapshot's own
    standings (water-filled over the whole epoch, independent of any decomposition).
    """
    hours = snap.policy.epoch / 3600.0
    planned = {p.project: p.planned_gpu_h for p in plan.projects}
    owed = {p: st.owed_gpus * hours for p, st in snap.standing.items()}
    total = sum(owed.values())
    return sum(min(planned.get(p, 0.0), o) for p, o in owed.items()) / total if total else 1.0


def _ended_by(message: str) -> str:
    """The "ended by" clause of a solver message (see ``plan_epoch``), or ''."""
    key = "ended by "
    at = message.find(key)
    if at < 0:
        return ""
    return message[at + len(key) :].split(";")[0]


if __name__ == "__main__":
    sys.exit(main())
