"""How far past its deadline the Lagrangian bound's exact parts phase can run.

After its last neighbourhood search the planner solves the parts the Lagrangian bound
left open as integer programs (``planner.mip.relax.solve_open_parts``). HiGHS does not
stop at its time limit inside its root's cut rounds, so each part's MIP runs in a
process the planner stops at the deadline (``relax.PARTS_PROCESS``).

For each (family, seed), this draws the epoch, computes its LP and Lagrangian bound, and
solves each open part of at least ``--min-vars`` variables alone, with the deadline
``--deadline`` seconds after its start: once in this process (as before the parts
process) and once in the parts process. One row per epoch and way: the parts, how many
closed, the seconds in all, and the worst and median seconds past the deadline.

Usage::

    .venv/bin/python benchmarks/exact_parts.py                       # the three slow parts
    .venv/bin/python benchmarks/exact_parts.py --epoch cold:1 --deadline 2

The machine these figures come from has 2 cores shared with other work: compare the
two ways in one run.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

#: The epochs whose parts ran 0.6-1.25 s past a 0.25 s limit (docs/formulation-passes.md,
#: *Sixteenth pass*).
SLOW = ("gang-heavy:1", "many-projects:28", "urgent-heavy:1")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epoch", nargs="+", default=list(SLOW), help="FAMILY:SEED epochs (default: the slow three)")
    ap.add_argument("--deadline", type=float, default=0.3, help="seconds from a part's start to its deadline")
    ap.add_argument("--min-vars", type=int, default=300, help="only parts of at least this many variables")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from families import NAMES, family_snapshot

    from planner.mip import LAGRANGIAN_DEEPER, relax
    from planner.mip.backends import lp_backend
    from planner.mip.backends.isolate import STARTUP
    from planner.mip.epoch import build_epoch
    from planner.mip.formulation import apply

    epochs = []
    for spec in args.epoch:
        name, _, seed = spec.partition(":")
        if name not in NAMES or not seed.isdigit():
            print(f"exact_parts: --epoch {spec!r} is not FAMILY:SEED (families: {', '.join(NAMES)})", file=sys.stderr)
            return 2
        epochs.append((name, int(seed)))
    lp = lp_backend()
    if lp is None or not lp.capabilities.integer_parts:
        print("exact_parts: no LP backend that solves integer parts is installed", file=sys.stderr)
        return 2

    print(f"{'epoch':>18} {'way':>8} {'parts':>5} {'closed':>6} {'seconds':>7} {'past med':>8} {'past max':>8}")
    for name, seed in epochs:
        print(f"{name}:{seed}: LP and Lagrangian bound", file=sys.stderr, flush=True)
        form = apply(build_epoch(family_snapshot(name, seed)))
        session = lp.open_lp(form.model)
        if not session.run(60.0):
            print(f"exact_parts: {name}:{seed}: no LP optimum in 60 s", file=sys.stderr)
            continue
        lag = relax.lagrangian_bound(
            form.model, form.coupling_rows(), session.values(), session.duals(), time.perf_counter() + 3.0, lp,
            deeper=LAGRANGIAN_DEEPER,
        )
        parts = [p for p in lag.open_parts if len(p.idx) >= args.min_vars]
        for way in ("here", "process"):
            past: list[float] = []
            closed = 0
            t_all = time.perf_counter()
            for k, part in enumerate(parts):
                print(f"  {way}: part {k + 1} of {len(parts)}", file=sys.stderr, flush=True)
                if way == "process":
                    # A part stopped at its deadline leaves a fresh process starting.
                    if not relax.PARTS_PROCESS.wait_ready(STARTUP):
                        print(f"exact_parts: the parts process did not start in {STARTUP:.0f} s", file=sys.stderr)
                        return 2
                else:
                    relax.PARTS_PROCESS.close()  # no parts process: solved here, as before it
                one = dataclasses.replace(lag, open_parts=(part,))
                t0 = time.perf_counter()
                out = relax.solve_open_parts(form.model, one, t0 + args.deadline, lp)
                past.append(max(time.perf_counter() - t0 - args.deadline, 0.0))
                closed += out.closed - lag.closed
            seconds = time.perf_counter() - t_all
            med = statistics.median(past) if past else 0.0
            print(f"{name + ':' + str(seed):>18} {way:>8} {len(parts):>5} {closed:>6} {seconds:>7.2f} "
                  f"{med:>8.2f} {max(past, default=0.0):>8.2f}", flush=True)
    relax.PARTS_PROCESS.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
