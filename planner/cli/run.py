"""``gpuplan run SCENARIO --executor slurm|dryrun``: the live control loop."""

from __future__ import annotations

import argparse
import signal
import sys
import time
import traceback

from planner.cli.errors import UsageError
from planner.cli.options import require_positive
from planner.cli.run_checks import prepare_run
from planner.cli.table import format_table
from scenarios import load_scenario


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "run",
        help="run the control loop against a cluster (or a dry run)",
        description="Run the scheduler as a service against a cluster (or a dry run): "
        "poll the cluster every --poll seconds, hand arrivals, completions and drains to the "
        "scheduler, apply its decisions at once, and record usage in the ledger. The "
        "scheduler is the one the simulator measures (--policy legacy|fairshare|mip). "
        "Scenario jobs are submitted (held) when their submit time comes. Scenario time "
        "counts from the first run on the ledger (kept with the submitted jobs in "
        "LEDGER.run.json), so a restarted run continues where it stopped and loses no "
        "usage. SIGTERM or SIGINT stops it cleanly; it runs until then, or for --epochs.",
    )
    p.add_argument("scenario", nargs="?", metavar="SCENARIO",
                   help="scenario YAML file (or a bundled scenario name); its clusters, org, "
                   "policy, and the jobs to submit")
    p.add_argument("--executor", default="dryrun",
                   help="executor name: dryrun (default), slurm, or an installed plugin's")
    p.add_argument("--executor-option", "-o", action="append", default=[], metavar="KEY=VALUE",
                   help="option for the executor (repeatable); dryrun: log=PATH; slurm: "
                   "partition=, command=, node_map=planner=slurm,..., retries=, backoff=")
    p.add_argument("--policy", default="mip", choices=("legacy", "fairshare", "mip"),
                   help="scheduling policy (default mip)")
    p.add_argument("--epochs", type=int, default=None,
                   help="stop after this many epochs of time (default: run until stopped)")
    p.add_argument("--poll", type=float, default=5.0, metavar="S",
                   help="seconds between observations of the cluster (default 5)")
    p.add_argument("--slice-seconds", type=float, default=None,
                   help="slice length in seconds (default: the policy's epoch / slices)")
    p.add_argument("--ledger", default=None,
                   help="usage ledger file (SQLite; created if missing). Without it usage "
                   "is kept in memory and lost at exit")
    p.add_argument("--backend", default="cpsat", help="MIP backend (default cpsat)")
    p.add_argument("--time-limit", type=float, default=10.0,
                   help="mip: seconds the planner may take per epoch (default 10)")
    p.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                   help="serve Prometheus metrics at http://127.0.0.1:PORT/metrics "
                   "(docs/executors.md lists them)")
    p.add_argument("--list-executors", action="store_true",
                   help="list the registered executors and exit")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from planner.control import ControlLoop
    from planner.executors import ClusterState, ExecutorError, default_registry
    from planner.executors.protocol import checked_call
    from planner.ledger import real_ledger_path
    from planner.mip.backends import get_backend
    from planner.status_file import StatusBoard, status_path

    registry = default_registry()
    if args.list_executors:
        rows: list[list[object]] = [[name, registry.origin(name)] for name in registry.names()]
        print(format_table(["executor", "from"], rows))
        for problem in registry.problems:
            print(f"warning: {problem}", file=sys.stderr)
        return 0
    if args.scenario is None:
        raise UsageError("run: a SCENARIO is required (or --list-executors)")
    if args.epochs is not None and args.epochs < 1:
        raise UsageError(f"--epochs must be at least 1, got {args.epochs}")
    if args.slice_seconds is not None:
        require_positive("--slice-seconds", args.slice_seconds)
    require_positive("--time-limit", args.time_limit)
    require_positive("--poll", args.poll)
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        raise UsageError(f"--metrics-port must be 0 to 65535, got {args.metrics_port}")
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

    def observe() -> ClusterState:
        return checked_call(args.executor, "observe", executor.observe, ClusterState)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    def close_executor() -> None:
        close = getattr(executor, "close", None)
        if callable(close):
            close()

    if args.ledger is None:
        progress("note: no --ledger given; usage is kept in memory only")
    elif args.ledger.strip():
        # The lock, run state and status are named after the real file: through a link,
        # a second run would otherwise take a second lock on the same ledger.
        args.ledger = real_ledger_path(args.ledger)
    board = StatusBoard(status_path(args.ledger) if args.ledger is not None else None)
    server = None
    if args.metrics_port is not None:
        # Bound before the ledger and the run state are made: a port in use must leave
        # nothing behind (a run state would fix the next run's time origin).
        from planner.metrics_export import serve

        try:
            server = serve(args.metrics_port, board.latest)
        except OSError as exc:
            close_executor()
            raise UsageError(f"--metrics-port {args.metrics_port}: cannot listen: {exc.strerror}") from None
    try:
        # Every check that can be made before acting; creates nothing when one fails.
        setup = prepare_run(args.executor, args.ledger, time.time(), observe=observe)
    except BaseException:
        close_executor()
        if server is not None:
            server.close()
        raise
    ledger, run_state = setup.ledger, setup.run_state
    if server is not None:
        progress(f"metrics at {server.url}")

    policy_options: dict[str, object] = {}
    if args.policy == "mip":
        policy_options = {"backend": backend, "time_limit": args.time_limit}
    loop = ControlLoop(scenario, executor, ledger, policy=args.policy,
                       policy_options=policy_options, run_state=run_state,
                       slice_seconds=args.slice_seconds, poll=args.poll, progress=progress,
                       status=board, executor_name=args.executor)

    stopping = False

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        name = signal.Signals(signum).name
        if stopping:
            # A call into the executor that hangs would otherwise hold the stop forever.
            progress(f"received {name} again: stopping now, without waiting for the executor")
            raise KeyboardInterrupt
        stopping = True
        progress(f"received {name}: stopping (send it again to stop at once)")
        loop.request_stop()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        summary = loop.run(args.epochs)
    except KeyboardInterrupt:  # the second signal: usage up to now was recorded on the way
        setup.close()
        return 130
    except RuntimeError as exc:  # the executor failing for good (ExecutorFailure names it)
        if args.debug:
            traceback.print_exc()
        print(f"gpuplan: error: {exc}", file=sys.stderr)
        setup.close()
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if server is not None:
            server.close()
        close_executor()
    totals: dict[str, list[float]] = {}
    for record in ledger.records():
        if record.start < summary.charged_from - 1e-9:
            continue  # an earlier run's
        row = totals.setdefault(record.project, [0.0, 0.0, 0.0])
        row[0] += record.allocated_gpu_h
        row[1] += record.unallocated_gpu_h
        row[2] += record.owed_gpu_h
    done = ", ".join(f"{n} {k}" for k, n in sorted(summary.counts.items())) or "no decisions"
    print(f"{summary.end - summary.start:.0f}s on {executor.name} under {args.policy}: "
          f"{len(summary.submitted)} jobs submitted; {done}; {summary.failed_total} failed actions")
    if totals:
        print(format_table(
            ["project", "allocated GPU-h", "unallocated GPU-h", "owed GPU-h"],
            [[p, *v] for p, v in sorted(totals.items())],
        ))
    setup.close()
    return 0
