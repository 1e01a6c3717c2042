"""``gpuplan plan SCENARIO [--at TIME] [--backend cpsat|pulp] [--time-limit S] [--json PATH]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from models import Plan, Scenario, Snapshot, parse_duration
from planner.cli.errors import UsageError
from planner.cli.options import require_positive
from planner.cli.table import format_table
from planner.mip import plan_epoch
from planner.mip.backends import BACKENDS
from planner.mip.explain import clock
from planner.snapshot import snapshot_at
from scenarios import load_scenario


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``plan`` sub-command."""
    p = subparsers.add_parser(
        "plan",
        help="plan one epoch of a scenario and print the time-slice plan",
        description="Plan the epoch that starts at TIME, with the scenario's queue as it "
        "would be then (jobs submitted and not yet due to have finished; nothing running). "
        "Prints the plan per slice and pool, the actions, each project's owed/planned "
        "GPU-hours and why each waiting job waits. Formulation: docs/formulation.md.",
    )
    p.add_argument("scenario", help="scenario YAML file (or a bundled name, e.g. tiny)")
    add_time_option(p)
    p.add_argument("--backend", default="cpsat", choices=sorted(BACKENDS), help="MIP solver (default cpsat)")
    p.add_argument("--time-limit", type=float, default=10.0, metavar="S",
                   help="solver time limit in seconds (default 10)")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the plan as JSON here")
    p.set_defaults(func=run)


def add_time_option(p: argparse.ArgumentParser) -> None:
    """Add ``--at TIME`` (shared with ``explain``)."""
    p.add_argument("--at", default="0s", metavar="TIME",
                   help="epoch start, from the scenario's start: seconds or 90s, 15m, 2h, 3d "
                   "(default 0)")


def parse_at(text: str) -> float:
    """``--at`` as seconds; a bad value is a :class:`UsageError`."""
    try:
        t = parse_duration(text)
    except ValueError as exc:
        raise UsageError(f"--at: {exc}") from None
    if t < 0:
        raise UsageError(f"--at: must not be negative, got {text!r}")
    return t


def load_snapshot(path: str, at: str) -> tuple[Scenario, Snapshot]:
    """The scenario file and its snapshot at ``--at``."""
    scenario = load_scenario(path)
    return scenario, snapshot_at(scenario, parse_at(at))


def run(args: argparse.Namespace) -> int:
    """Run ``gpuplan plan``; returns the exit code."""
    require_positive("--time-limit", args.time_limit)
    scenario, snap = load_snapshot(args.scenario, args.at)
    if args.json:
        _check_json_target(Path(args.json))  # before the solve: it may take its whole limit
    plan = plan_epoch(snap, backend=args.backend, time_limit=args.time_limit)
    if not snap.jobs:
        print(empty_queue_note(scenario, snap.now), file=sys.stderr)
    print(render_plan(plan))
    if args.json:
        try:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(plan.model_dump_json(indent=2))
        except OSError as exc:
            raise UsageError(f"--json: cannot write {args.json}: {exc.strerror}") from None
        print(f"\nplan written to {args.json}")
    return 0


def empty_queue_note(scenario: Scenario, at: float) -> str:
    """Why a plan at ``at`` is empty when no job waits then, and which ``--at`` would not be."""
    submits = [j.submit for j in scenario.jobs]
    if not submits:
        return "note: the scenario has no jobs, so the plan is empty"
    span = f"between {clock(min(submits))} and {clock(max(submits))}"
    return (
        f"note: no job waits at {clock(at)}, so the plan is empty; the scenario's jobs are "
        f"submitted {span} (try an --at in that span)"
    )


def _check_json_target(path: Path) -> None:
    """Refuse a --json path that cannot be a file: a directory, or one under a file."""
    if path.is_dir():
        raise UsageError(f"--json: cannot write {path}: it is a directory")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"--json: cannot write {path}: {parent} is not a folder")
            break


def render_plan(plan: Plan) -> str:
    """The plan as text: header, a table per slice and pool, actions, projects, pending."""
    s = plan.solver
    head = (
        f"Epoch {clock(plan.epoch_start)} - {clock(plan.epoch_end)}: "
        f"{s.backend} {s.status.value}"
        + (f", objective {s.objective:,.0f}" if s.objective is not None else "")
        + (f", gap {s.gap:.2%}" if s.gap is not None else "")
        + f", {s.seconds:.2f}s"
        + (" (GREEDY FALLBACK)" if s.fallback else "")
    )
    out = [head]
    for i, sl in enumerate(plan.slices):
        out.append("")
        out.append(f"Slice {i + 1} ({clock(sl.start)} - {clock(sl.end)})")
        if not sl.assignments:
            out.append("  (nothing planned)")
            continue
        rows: list[list[object]] = []
        for a in sorted(sl.assignments, key=lambda a: (a.cluster, a.gpu_type, a.job)):
            nodes = ", ".join(a.nodes) if len(a.nodes) <= 3 else f"{a.nodes[0]} .. {a.nodes[-1]} ({len(a.nodes)})"
            rows.append([f"{a.cluster}/{a.gpu_type}", a.job, a.project, a.gpus, "yes" if a.charged else "no", nodes])
        out.append(format_table(["pool", "job", "project", "GPUs", "charged", "nodes"], rows))
    if plan.actions:
        out.append("")
        out.append("Actions")
        out.append(format_table(["at", "job", "action"], [[clock(a.at), a.job, a.action] for a in plan.actions]))
    if plan.drained_nodes:
        out.append("")
        out.append("Drained nodes")
        out.append(format_table(["node", "free at"], [[d.node, clock(d.free_at)] for d in plan.drained_nodes]))
    if plan.projects:
        out.append("")
        out.append("Projects (H100-eq GPU-hours this epoch)")
        out.append(
            format_table(
                ["project", "owed", "planned", "charged"],
                [[p.project, p.owed_gpu_h, p.planned_gpu_h, p.charged_gpu_h] for p in plan.projects],
            )
        )
    out.append("")
    if plan.pending:
        out.append(f"Pending ({len(plan.pending)})")
        out.append(format_table(["job", "reason", "detail"], [[p.job, p.reason.value, p.detail] for p in plan.pending]))
    else:
        out.append("Pending: none")
    return "\n".join(out)
