"""``gpuplan run SCENARIO --executor slurm|dryrun``: the live control loop."""

from __future__ import annotations

import argparse
import sys
import time

from models import Plan, Snapshot
from planner.cli.errors import UsageError
from planner.cli.options import require_positive
from planner.cli.run_checks import prepare_run
from planner.cli.table import format_table
from scenarios import load_scenario


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "run",
        help="run the control loop against a cluster (or a dry run)",
        description="Repeat, epoch after epoch: observe the cluster, build the snapshot, "
        "plan, apply each slice at its boundary, record usage in the ledger. Scenario jobs "
        "are submitted (held) when their submit time comes. Scenario time counts from the "
        "first run on the ledger (kept with the submitted jobs in LEDGER.run.json), so a "
        "restarted run continues "
        "where it stopped and loses no usage.",
    )
    p.add_argument("scenario", nargs="?", metavar="SCENARIO",
                   help="scenario YAML file (or a bundled scenario name); its clusters, org, "
                   "policy, and the jobs to submit")
    p.add_argument("--executor", default="dryrun",
                   help="executor name: dryrun (default), slurm, or an installed plugin's")
    p.add_argument("--executor-option", "-o", action="append", default=[], metavar="KEY=VALUE",
                   help="option for the executor (repeatable); dryrun: log=PATH; slurm: "
                   "partition=, command=, node_map=planner=slurm,..., retries=, backoff=")
    p.add_argument("--epochs", type=int, default=1, help="epochs to run (default 1)")
    p.add_argument("--slice-seconds", type=float, default=None,
                   help="slice length in seconds (default: the policy's epoch / slices)")
    p.add_argument("--ledger", default=None,
                   help="usage ledger file (SQLite; created if missing). Without it usage "
                   "is kept in memory and lost at exit")
    p.add_argument("--backend", default="cpsat", help="MIP backend (default cpsat)")
    p.add_argument("--time-limit", type=float, default=10.0,
                   help="seconds the planner may take per epoch (default 10)")
    p.add_argument("--list-executors", action="store_true",
                   help="list the registered executors and exit")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from planner.control import ControlLoop
    from planner.executors import ExecutorError, default_registry
    from planner.mip import plan_epoch
    from planner.mip.backends import get_backend

    registry = default_registry()
    if args.list_executors:
        rows: list[list[object]] = [[name, registry.origin(name)] for name in registry.names()]
        print(format_table(["executor", "from"], rows))
        for problem in registry.problems:
            print(f"warning: {problem}", file=sys.stderr)
        return 0
    if args.scenario is None:
        raise UsageError("run: a SCENARIO is required (or --list-executors)")
    if args.epochs < 1:
        raise UsageError(f"--epochs must be at least 1, got {args.epochs}")
    if args.slice_seconds is not None:
        require_positive("--slice-seconds", args.slice_seconds)
    require_positive("--time-limit", args.time_limit)
    options: dict[str, str] = {}
    for item in args.executor_option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--executor-option {item!r}: expected KEY=VALUE")
        options[key] = value
    try:
        backend = get_backend(args.backend)
    except KeyError as exc:
        raise UsageError(f"--backend: {exc.args[0]}") from None
    scenario = load_scenario(args.scenario)
    try:
        executor = registry.create(args.executor, scenario, options)
    except (ExecutorError, ValueError) as exc:
        raise UsageError(str(exc)) from None

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if args.ledger is None:
        progress("note: no --ledger given; usage is kept in memory only")
    try:
        # Every check that can be made before acting; creates nothing when one fails.
        setup = prepare_run(args.executor, args.ledger, time.time(), observe=executor.observe)
    except BaseException:
        close = getattr(executor, "close", None)
        if callable(close):
            close()
        raise
    ledger, run_state = setup.ledger, setup.run_state

    def plan(snapshot: Snapshot, previous: Plan | None) -> Plan:
        return plan_epoch(snapshot, backend=backend, time_limit=args.time_limit, previous=previous)

    loop = ControlLoop(scenario, executor, ledger, plan=plan, run_state=run_state,
                       slice_seconds=args.slice_seconds, progress=progress)
    try:
        summary = loop.run(args.epochs)
    except RuntimeError as exc:  # the executor's commands failing for good
        print(f"gpuplan: error: {exc}", file=sys.stderr)
        return 1
    finally:
        close = getattr(executor, "close", None)
        if callable(close):
            close()
    totals: dict[str, list[float]] = {}
    for record in [*summary.catch_up, *(u for s in summary.slices for u in s.usage)]:
        row = totals.setdefault(record.project, [0.0, 0.0, 0.0])
        row[0] += record.allocated_gpu_h
        row[1] += record.unallocated_gpu_h
        row[2] += record.owed_gpu_h
    failed = sum(len(s.report.failed) for s in summary.slices if s.report is not None)
    print(f"{args.epochs} epoch(s), {len(summary.slices)} slices on {executor.name}; "
          f"{len(summary.submitted)} jobs submitted; {failed} failed actions")
    if totals:
        print(format_table(
            ["project", "allocated GPU-h", "unallocated GPU-h", "owed GPU-h"],
            [[p, *v] for p, v in sorted(totals.items())],
        ))
    setup.close()
    return 0
