"""The plan view: one epoch's time-slice plan as tables a person can read."""

from __future__ import annotations

from typing import Any

import pandas as pd

from models import PendingReason, Plan, Pool, Scenario
from planner.reasons import REASON_SENTENCES, SINGLE_NODE_GANG_WORDS

HOUR = 3600.0

# Plain words for each pending reason (the enum values are for programs, not people).
REASON_WORDS: dict[PendingReason, str] = REASON_SENTENCES
"""Plain words for each pending reason: ``planner.reasons``' own, so the plan view says
what ``squeue`` and ``gpuplan status`` say."""


def reason_words(reason: PendingReason, job_gpus: int | None, largest_node: int | None) -> str:
    """The plain words for a waiting job's reason, given its size and the largest node
    it may use (the gang reason reads differently for a job that fits on one node)."""
    if (
        reason == PendingReason.NO_GANG_HOLE
        and job_gpus is not None
        and largest_node is not None
        and job_gpus <= largest_node
    ):
        return SINGLE_NODE_GANG_WORDS
    return REASON_WORDS.get(reason, str(reason))


def plan_epoch_at(scenario: Scenario, t: float, *, time_limit: float = 10.0) -> Plan:
    """Plan the epoch starting at ``t`` seconds, from the queue as it would be then.

    This is what ``gpuplan plan --at`` does: ``planner.snapshot.snapshot_at`` builds the
    snapshot with an in-memory ledger (nothing is written anywhere), and
    ``planner.mip.plan_epoch`` solves it.
    """
    from planner.mip import plan_epoch
    from planner.snapshot import snapshot_at

    return plan_epoch(snapshot_at(scenario, t), time_limit=time_limit)


def slices_frame(plan: Plan) -> pd.DataFrame:
    """One row per (slice, job, node) with the lane the job takes in that node's row."""
    rows = []
    for s in plan.slices:
        by_node: dict[str, list[tuple[str, str, int, bool, str, str]]] = {}
        for a in s.assignments:
            per_node = a.gpus if len(a.nodes) == 1 else a.gpus // max(len(a.nodes), 1)
            for node in a.nodes:
                by_node.setdefault(node, []).append(
                    (a.job, a.project, per_node, a.charged, a.cluster, a.gpu_type)
                )
        for node, jobs in by_node.items():
            for lane, (job, project, gpus, charged, cluster, gpu_type) in enumerate(sorted(jobs)):
                rows.append(
                    {
                        "pool": str(Pool(cluster, gpu_type)),
                        "node": node,
                        "start_h": s.start / HOUR,
                        "end_h": s.end / HOUR,
                        "job": job,
                        "project": project,
                        "gpus": gpus,
                        "charged": "yes" if charged else "no (free, preemptible)",
                        "lane": lane,
                        "lanes": len(jobs),
                    }
                )
    columns = ["pool", "node", "start_h", "end_h", "job", "project", "gpus", "charged", "lane", "lanes"]
    return pd.DataFrame(rows, columns=columns)


def pending_frame(plan: Plan, scenario: Scenario) -> pd.DataFrame:
    """Each job left out of the plan, with why, in plain words."""
    jobs = {j.id: j for j in scenario.jobs}
    rows = []
    for p in plan.pending:
        job = jobs.get(p.job)
        words = reason_words(p.reason, job.gpus if job else None, largest_node(scenario, job))
        rows.append(
            {
                "Job": p.job,
                "Project": job.project if job else "",
                "GPUs": job.gpus if job else None,
                "Waiting because": words,
                "Detail": p.detail,
            }
        )
    return pd.DataFrame(rows, columns=["Job", "Project", "GPUs", "Waiting because", "Detail"])


def largest_node(scenario: Scenario, job: Any) -> int | None:
    """The most GPUs on one node the job may use (its GPU types and clusters)."""
    if job is None:
        return None
    sizes = [
        n.gpus
        for n in scenario.nodes
        if (not job.gpu_types or n.pool.gpu_type in job.gpu_types)
        and (not job.clusters or n.pool.cluster in job.clusters)
    ]
    return max(sizes, default=None)


def reasons_by_program(pending: pd.DataFrame) -> pd.DataFrame:
    """Waiting jobs counted by program and reason (most first), with the GPUs they ask."""
    columns = ["Program", "Waiting because", "Jobs", "GPUs asked"]
    if not len(pending):
        return pd.DataFrame(columns=columns)
    frame = pending.assign(Program=[str(p).split("/", 1)[0] for p in pending["Project"]])
    grouped = frame.groupby(["Program", "Waiting because"]).agg(Jobs=("Job", "count"), GPUs=("GPUs", "sum"))
    grouped = grouped.rename(columns={"GPUs": "GPUs asked"}).reset_index()
    return grouped.sort_values(["Program", "Jobs"], ascending=[True, False])[columns].reset_index(drop=True)


def drained_frame(plan: Plan) -> pd.DataFrame:
    """Drained nodes and the hour (since the start) their work has moved off."""
    rows = [
        {"Node": d.node, "Free of work at (h after start)": round(d.free_at / HOUR, 2)}
        for d in plan.drained_nodes
    ]
    return pd.DataFrame(rows, columns=["Node", "Free of work at (h after start)"])


def projects_frame(plan: Plan) -> pd.DataFrame:
    """Per project: owed, planned and charged GPU-hours in this epoch."""
    rows = [
        {
            "Project": p.project,
            "Owed (H100-eq GPU-h)": round(p.owed_gpu_h, 1),
            "Planned (H100-eq GPU-h)": round(p.planned_gpu_h, 1),
            "Charged to budget (H100-eq GPU-h)": round(p.charged_gpu_h, 1),
        }
        for p in plan.projects
    ]
    return pd.DataFrame(rows)


def solver_line(plan: Plan) -> str:
    """One sentence on how the plan was found, for a non-expert.

    The gap says how far from the best possible plan this one may be, at most (the
    solver's proven bound); "trivial" means there was nothing to decide.
    """
    s = plan.solver
    status = s.status.value
    if s.fallback:
        return (
            f"Planned in {s.seconds:.1f} s with the simple rule-based fallback: the optimizer "
            f"({s.backend}) found no usable plan in time."
        )
    if status == "trivial":
        return (
            f"Nothing to decide at this moment (every waiting job fits, or none waits): planned "
            f"in {s.seconds:.1f} s. Try a busier hour."
        )
    if status == "optimal" or (s.gap is not None and s.gap < 1e-6):
        quality = "the best plan possible by the planner's rules"
    elif s.gap is not None:
        quality = f"a plan at most {s.gap:.1%} short of the best possible (the optimizer stopped at its time limit)"
    else:
        quality = "a good plan; the optimizer stopped at its time limit without a bound"
    return f"Planned in {s.seconds:.1f} s by the optimizer ({s.backend}): {quality}."


def job_bars(frame: pd.DataFrame) -> pd.DataFrame:
    """One bar per job and stretch of back-to-back slices: its GPUs and nodes.

    ``frame`` is :func:`slices_frame` (one row per slice, job and node). A program's
    Gantt then has a row per job, which a director can read, rather than a row per node.
    """
    columns = ["job", "project", "start_h", "end_h", "gpus", "nodes", "pool", "charged"]
    if not len(frame):
        return pd.DataFrame(columns=columns)
    per_slice = (
        frame.groupby(["job", "project", "start_h", "end_h", "pool", "charged"], as_index=False)
        .agg(gpus=("gpus", "sum"), nodes=("node", "nunique"))
        .sort_values(["job", "start_h"])
    )
    bars: list[dict[str, Any]] = []
    for record in per_slice.to_dict("records"):
        row = {str(k): v for k, v in record.items()}
        last = bars[-1] if bars else None
        if (
            last is not None
            and last["job"] == row["job"]
            and (last["gpus"], last["nodes"]) == (row["gpus"], row["nodes"])
            and abs(float(last["end_h"]) - float(row["start_h"])) < 1e-9
        ):
            last["end_h"] = row["end_h"]
        else:
            bars.append(row)
    return pd.DataFrame(bars, columns=columns)
