"""``gpuplan status``: the live run's standings, queue and preemptions, read without touching it.

It reads two files, both read-only: the ledger (the GPU-hours over the lookback) and the
status file ``LEDGER.status.json`` that ``gpuplan run`` replaces after each decision
(the queue with reasons, the scheduler's sort key, the last preemptions). The hours come
from the ledger over the lookback window ending at the status's time, so they agree
with the ledger by construction.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime

from models import LiveStatus, ProjectStatus
from planner.cli.errors import UsageError
from planner.cli.table import format_table

LEDGER_ENV = "GPUPLAN_LEDGER"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``status`` sub-command."""
    p = subparsers.add_parser(
        "status",
        help="the live run: projects, the queue with reasons, recent preemptions",
        description="Read the ledger and the live status file next to it (LEDGER.status.json, "
        "written by `gpuplan run --ledger LEDGER`) and print the projects' standings, the "
        "queue with each job's reason and the recent preemptions. Nothing is written: the "
        "run is not disturbed. `--job J` says why job J waits (or how it runs).",
    )
    p.add_argument("--ledger", default=None, metavar="PATH",
                   help=f"the run's ledger file (default: ${LEDGER_ENV})")
    p.add_argument("--json", action="store_true", help="print the (filtered) status as JSON")
    p.add_argument("--project", default=None, metavar="P",
                   help="only project P and the projects under it (a program)")
    p.add_argument("--user", default=None, metavar="U", help="only the jobs of user U")
    p.add_argument("--job", default=None, metavar="J", help="why job J waits, or how it runs")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``gpuplan status``; returns the exit code."""
    from planner.fairshare import fair_share_ratio
    from planner.ledger import Ledger, LedgerError, run_lock_held
    from planner.status_file import StatusFileError, read_status, status_path

    path = args.ledger or os.environ.get(LEDGER_ENV)
    if not path:
        raise UsageError(f"status: give the run's ledger with --ledger PATH (or set ${LEDGER_ENV})")
    try:
        ledger = Ledger.open_read_only(path)
    except LedgerError as exc:
        raise UsageError(str(exc)) from None
    try:
        status = read_status(status_path(path))
        totals = ledger.window_totals(status.at - status.lookback_s, status.at)
    except StatusFileError as exc:
        raise UsageError(str(exc)) from None
    finally:
        ledger.close()
    # A crashed or stopped run leaves its last status behind: say so, not "live".
    ended = run_lock_held(path) is False
    stale = ("no run holds the ledger's lock: this is the last status written by a run "
             "that is no longer running" if ended else None)

    # The hours are the ledger's; share, ratio and headroom are what the scheduler used.
    rows = {p.project: p for p in status.projects}
    for project, t in totals.items():
        base = rows.get(project) or ProjectStatus(
            project=project, share=0.0, owed_gpu_h=0.0, delivered_gpu_h=0.0, charged_gpu_h=0.0,
            unallocated_gpu_h=0.0, ratio=fair_share_ratio(t.charged_gpu_h, t.owed_gpu_h),
            headroom_gpu_h=0.0,
        )
        rows[project] = base.model_copy(update={
            "owed_gpu_h": t.owed_gpu_h, "delivered_gpu_h": t.allocated_gpu_h,
            "charged_gpu_h": t.charged_gpu_h, "unallocated_gpu_h": t.unallocated_gpu_h,
        })
    status = status.model_copy(update={"projects": tuple(rows[p] for p in sorted(rows))})
    if args.project is not None and not any(_under(p.project, args.project) for p in status.projects):
        known = ", ".join(sorted({p.project.split("/")[0] for p in status.projects})) or "none"
        print(f"gpuplan: project {args.project} is not known to the live run (status of "
              f"{_when(status.wall)}; programs: {known})", file=sys.stderr)
        return 1
    status = _filtered(status, args.project, args.user, args.job)
    if args.user is not None and not (status.queue or status.jobs or status.preemptions):
        print(f"note: user {args.user} has no queued, running or recently preempted job in "
              "the live run", file=sys.stderr)

    if args.job is not None and not _knows(status, args.job):
        print(f"gpuplan: job {args.job} is not known to the live run (status of "
              f"{_when(status.wall)}); it may have finished or not been submitted yet",
              file=sys.stderr)
        return 1
    if args.json:
        if stale is not None:
            print(f"note: {stale}", file=sys.stderr)
        print(json.dumps(status.model_dump(mode="json"), indent=2))
    elif args.job is not None:
        print(_job_text(status, args.job, stale))
    else:
        print(_tables(status, path, stale))
    return 0


def _under(project: str, prefix: str | None) -> bool:
    return prefix is None or project == prefix or project.startswith(prefix.rstrip("/") + "/")


def _filtered(status: LiveStatus, project: str | None, user: str | None, job: str | None) -> LiveStatus:
    def keep(p: str, u: str, j: str) -> bool:
        return _under(p, project) and (user is None or u == user) and (job is None or j == job)

    queue = tuple(q for q in status.queue if keep(q.project, q.user, q.job))
    preemptions = tuple(p for p in status.preemptions if keep(p.project, p.user, p.job))
    jobs = tuple(j for j in status.jobs if keep(j.project, j.user, j.job))
    projects = tuple(p for p in status.projects if _under(p.project, project))
    if user is not None or job is not None:
        mine = {x.project for x in queue} | {x.project for x in preemptions} | {x.project for x in jobs}
        projects = tuple(p for p in projects if p.project in mine)
    return status.model_copy(update={
        "queue": queue, "preemptions": preemptions, "jobs": jobs, "projects": projects,
    })


def _knows(status: LiveStatus, job: str) -> bool:
    names = {x.job for x in status.queue} | {x.job for x in status.preemptions}
    return job in names | {x.job for x in status.jobs}


def _when(wall: float) -> str:
    return datetime.fromtimestamp(wall).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def _at(status: LiveStatus, t: float) -> str:
    """A scenario time as wall-clock ``HH:MM:SS`` when the origin is known."""
    from planner.reasons import wait_text

    if status.origin is None:
        return f"+{wait_text(t)}"
    return datetime.fromtimestamp(status.origin + t).strftime("%H:%M:%S")


def _header(status: LiveStatus, ledger: str, stale: str | None = None) -> str:
    from planner.reasons import wait_text, window_text

    age = max(time.time() - status.wall, 0.0)
    s = status.scheduler
    plan = [f"last plan {s.plan_seconds:.2f} s" if s.plan_seconds is not None else "no plan yet"]
    if s.gap is not None:
        plan.append(f"gap {s.gap * 100:.1f} %")
    plan.append(f"{s.fallbacks_total} fallback(s)")
    who = " ".join(x for x in (status.policy and f"policy {status.policy}",
                               status.executor and f"on {status.executor}") if x)
    kind = "live status" if stale is None else "last status"
    return (
        f"{ledger}: {kind} of {_when(status.wall)} ({wait_text(age)} ago), scenario time "
        f"{wait_text(status.at)}{'; ' + who if who else ''}\n"
        + (f"{stale}\n" if stale is not None else "")
        + f"{', '.join(plan)}; GPU-hours are H100-equivalent, {window_text(status.lookback_s)}"
    )


def _project_rows(status: LiveStatus) -> list[list[object]]:
    return [
        [p.project, f"{p.share * 100:.1f} %", p.owed_gpu_h, p.delivered_gpu_h, p.charged_gpu_h,
         p.unallocated_gpu_h, round(p.ratio, 2), p.headroom_gpu_h, p.running_gpus, p.waiting_gpus]
        for p in sorted(status.projects, key=lambda p: (p.ratio, p.project))
    ]


PROJECT_HEADERS = ["PROJECT", "SHARE", "OWED_GPU_H", "DELIVERED_GPU_H", "CHARGED_GPU_H",
                   "UNALLOC_GPU_H", "RATIO", "HEADROOM_GPU_H", "RUN_GPUS", "WAIT_GPUS"]
QUEUE_HEADERS = ["POS", "JOB", "PROJECT", "USER", "GPUS", "WAIT", "REASON"]
PREEMPT_HEADERS = ["AT", "JOB", "PROJECT", "USER", "REASON"]


def _tables(status: LiveStatus, ledger: str, stale: str | None = None) -> str:
    from planner.reasons import wait_text

    out = [_header(status, ledger, stale), "", "projects (lowest ratio goes first)"]
    out.append(format_table(PROJECT_HEADERS, _project_rows(status)) if status.projects else "(none)")
    out += ["", "queue"]
    queue = [[q.position, q.job, q.project, q.user or "-", q.gpus, wait_text(q.wait_s), q.text]
             for q in sorted(status.queue, key=lambda q: q.position)]
    out.append(format_table(QUEUE_HEADERS, queue) if queue else "(empty)")
    out += ["", "recent preemptions"]
    pre = [[_at(status, p.at), p.job, p.project, p.user or "-", p.reason]
           for p in sorted(status.preemptions, key=lambda p: p.at, reverse=True)]
    out.append(format_table(PREEMPT_HEADERS, pre) if pre else "(none)")
    return "\n".join(out)


def _job_text(status: LiveStatus, job: str, stale: str | None = None) -> str:
    from planner.reasons import wait_text, window_text

    line = status.job_line(job)
    queued = next((q for q in status.queue if q.job == job), None)
    project = line.project if line else (queued.project if queued else "")
    user = line.user if line else (queued.user if queued else "")
    head = f"job {job}"
    about = [x for x in (project and f"project {project}", user and f"user {user}",
                         queued and f"{queued.gpus} GPUs") if x]
    if about:
        head += f" ({', '.join(about)})"
    lines = [head]
    if line is not None:
        lines.append(f"state: {line.text}")
    if queued is not None:
        if line is None or line.text != queued.text:
            lines.append(f"state: {queued.text}")
        lines.append(
            f"queue: position {queued.position}, waiting "
            f"{wait_text(queued.wait_s)}"
            + (f", pending reason {queued.reason.value}" if queued.reason is not None else "")
        )
    p = status.project(project) if project else None
    if p is not None:
        lines.append(
            f"project {p.project}: share {p.share * 100:.1f} %, owed {p.owed_gpu_h:.1f} and "
            f"delivered {p.delivered_gpu_h:.1f} GPU-h {window_text(status.lookback_s)}, ratio "
            f"{p.ratio:.2f} (lower goes first), headroom {p.headroom_gpu_h:.1f} GPU-h"
        )
    for pre in status.preemptions:
        lines.append(f"preempted at {_at(status, pre.at)}: {pre.reason}")
    if stale is None:
        lines.append(f"(live status of {_when(status.wall)})")
    else:
        lines.append(f"(last status of {_when(status.wall)}; {stale})")
    return "\n".join(lines)
