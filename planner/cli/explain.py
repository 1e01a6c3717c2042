"""``gpuplan explain SCENARIO JOB [--at TIME]``: why a job is, or is not, placed."""

from __future__ import annotations

import argparse

from planner.cli.errors import UsageError
from planner.cli.options import require_positive
from planner.cli.plan import add_time_option, load_snapshot
from planner.mip import explain_job, plan_epoch
from planner.mip.backends import BACKENDS
from planner.mip.explain import clock


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``explain`` sub-command."""
    p = subparsers.add_parser(
        "explain",
        help="why a job is, or is not, in the plan",
        description="Plan the epoch at TIME (as `gpuplan plan` does) and say why JOB is "
        "placed (where, when, charged or not) or waits (the pending reason, with numbers).",
    )
    p.add_argument("scenario", help="scenario YAML file (or a bundled name, e.g. tiny)")
    p.add_argument("job", help="the job id")
    add_time_option(p)
    p.add_argument("--backend", default="cpsat", choices=sorted(BACKENDS), help="MIP solver (default cpsat)")
    p.add_argument("--time-limit", type=float, default=10.0, metavar="S",
                   help="solver time limit in seconds (default 10)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``gpuplan explain``; returns the exit code."""
    require_positive("--time-limit", args.time_limit)
    scenario, snap = load_snapshot(args.scenario, args.at)
    known = {j.id: j for j in scenario.jobs}
    if args.job not in known:
        raise UsageError(f"{args.scenario}: no job {args.job!r} in the scenario")
    if args.job not in {s.job.id for s in snap.jobs}:
        job = known[args.job]
        end = job.submit + job.duration if job.duration is not None else None
        when = (
            f"it is submitted at {clock(job.submit)}"
            if job.submit > snap.now
            else f"it would have completed by {clock(end or snap.now)}"
        )
        print(f"job {args.job}: not in the queue at {clock(snap.now)} ({when})")
        return 0
    plan = plan_epoch(snap, backend=args.backend, time_limit=args.time_limit)
    print(explain_job(plan, snap, args.job))
    return 0
