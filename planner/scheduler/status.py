"""The live scheduler seen from outside: a :class:`models.LiveStatus` of a :class:`Scheduler`.

``gpuplan run`` builds one after each decision; ``gpuplan status``, the metrics endpoint,
the app's live page and the reason each job shows in ``squeue`` all read it. Everything
here is read off the scheduler's own state (its standings, its queue in the order it
would start jobs, its last plan's pending reasons, its event log), so what users are
told is what the scheduler acts on.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from models import (
    JobLine,
    LiveStatus,
    PendingReason,
    Pool,
    PoolStatus,
    Preemption,
    ProjectStatus,
    QueuedJob,
    SchedulerCounters,
    effective_shares,
)
from planner import reasons
from planner.fairshare import org_at
from planner.scheduler.core import Scheduler, current_plan
from planner.scheduler.queues import within_project
from planner.scheduler.state import JobRun

RECENT_PREEMPTIONS = 50
"""How many of the latest preemptions a status lists."""


def queue_order(core: Scheduler, ratio: dict[str, float]) -> list[JobRun]:
    """Queued jobs in the order the scheduler would start them: funded work first,
    projects by fair-share ratio (lowest first), then the order inside a project."""
    queued = [r for r in core.runs if r.status == "queued"]
    return sorted(queued, key=lambda r: (not r.job.allocated, ratio.get(r.job.project, 0.0),
                                         r.job.project, *within_project(r), r.index))


def _because(detail: str, nodes: str) -> str:
    """A preemption's cause, from the scheduler's log detail, in plain words."""
    if detail == "maintenance":
        return reasons.because_maintenance(nodes.split(",") if nodes else [])
    for prefix in ("fair share: ", "fast lane: "):
        if detail.startswith(prefix):
            job, _, project = detail[len(prefix):].partition(" (")
            return reasons.because_fair_share([(job, project.rstrip(")"))])
    if detail.startswith("plan: ") and "needs its nodes" in detail:
        job = detail[len("plan: "):].split(" ")[0]
        return f"the plan starts {job} on its nodes"
    if detail.startswith("plan: "):
        return reasons.because_fair_share()
    return detail or "the scheduler moved it"


def _pending(core: Scheduler) -> dict[str, tuple[PendingReason, str]]:
    """The last plan's reason for each job it left waiting (``mip`` only)."""
    plan = current_plan(core.policy)
    return {p.job: (p.reason, p.detail) for p in (plan.pending if plan is not None else ())}


def _reason(core: Scheduler, run: JobRun, ahead: int,
            pending: dict[str, tuple[PendingReason, str]]) -> PendingReason:
    """Why ``run`` waits: the plan's reason when it has one, else read off the cluster."""
    if run.job.id in pending:
        return pending[run.job.id][0]
    if ahead:
        return PendingReason.FAIR_SHARE_RANK
    cl = core.cluster
    pools = [p for p in cl.pools if run.job.allows(p.cluster, p.gpu_type)]
    if pools and all(all(n in cl.drained for n in cl.pools[p].size) for p in pools):
        return PendingReason.MAINTENANCE
    free = sum(cl.free[n] for p in pools for n in cl.pools[p].open_free)
    if free >= run.job.gpus:
        # A policy may keep a start clear of maintenance for longer than the contract.
        fence_for = getattr(core.policy, "fence_for", None)
        guard = fence_for(run) if fence_for is not None else run.job.min_runtime
        takeable = sum(sum(core.open_free(cl.pools[p], guard).values()) for p in pools)
        if takeable < run.job.gpus:
            return PendingReason.MAINTENANCE  # the free GPUs' nodes go down within its guard
        return PendingReason.NO_GANG_HOLE
    holders = [core.runs[i] for p in pools for n in cl.pools[p].size for i in cl.jobs_on[n]]
    if holders and not any(core.past_contract(h) for h in holders):
        return PendingReason.CONTRACTS
    return PendingReason.POOL_CAPACITY


def live_status(
    core: Scheduler,
    *,
    wall: float,
    origin: float,
    policy: str,
    executor: str,
    counters: SchedulerCounters,
) -> LiveStatus:
    """The status of ``core`` now; ``origin`` is the POSIX time of scenario time 0."""
    now = core.now
    posix_now = origin + now
    sc = core.scenario
    pol = sc.policy
    standing = core.standings()
    ratio = {p: (standing[p].ratio if p in standing else 0.0) for p in core.projects}
    shares = effective_shares(org_at(sc, now))
    totals = core.ledger.window_totals(now - pol.lookback, now)
    running_gpus: dict[str, int] = {}
    waiting_gpus: dict[str, int] = {}
    for run in core.runs:
        if run.status == "running":
            running_gpus[run.job.project] = running_gpus.get(run.job.project, 0) + run.job.gpus
        elif run.status == "queued":
            waiting_gpus[run.job.project] = waiting_gpus.get(run.job.project, 0) + run.job.gpus
    projects = []
    for p in core.projects:
        t = totals.get(p)
        st = standing.get(p)
        projects.append(ProjectStatus(
            project=p, share=shares.get(p, 0.0),
            owed_gpu_h=t.owed_gpu_h if t else 0.0,
            delivered_gpu_h=t.allocated_gpu_h if t else 0.0,
            charged_gpu_h=t.charged_gpu_h if t else 0.0,
            unallocated_gpu_h=t.unallocated_gpu_h if t else 0.0,
            ratio=ratio[p], headroom_gpu_h=st.headroom_gpu_h if st else 0.0,
            running_gpus=running_gpus.get(p, 0), waiting_gpus=waiting_gpus.get(p, 0),
        ))

    pending = _pending(core)
    queue: list[QueuedJob] = []
    lines: list[JobLine] = []
    order = queue_order(core, ratio)
    seen_projects: dict[str, int] = {}
    last_preempt = _last_preemptions(core.log)
    ends = _contract_ends(core)
    for position, run in enumerate(order, start=1):
        job = run.job
        before_mine = seen_projects.get(job.project, 0)
        ahead = sum(n for proj, n in seen_projects.items()
                    if proj != job.project and ratio.get(proj, 0.0) < ratio[job.project])
        reason = _reason(core, run, ahead, pending)
        facts = reasons.WaitFacts(
            project=job.project, gpus=job.gpus, ratio=ratio[job.project], lookback_s=pol.lookback,
            jobs_ahead=ahead, pools=[str(p) for p in core.cluster.pools
                                     if job.allows(p.cluster, p.gpu_type)],
            headroom_gpu_h=standing[job.project].headroom_gpu_h if job.project in standing else None,
            ahead_in_project=before_mine,
            contracts_end=_first_contract_end(ends, run, origin),
        )
        text = reasons.waiting(reason, facts, now=posix_now)
        queue.append(QueuedJob(
            job=job.id, project=job.project, user=job.user, gpus=job.gpus,
            submitted=run.queued_at, wait_s=max(now - run.queued_at, 0.0), position=position,
            reason=reason, text=text,
        ))
        if job.id in last_preempt:
            at, because = last_preempt[job.id]
            lines.append(JobLine(job=job.id, project=job.project, user=job.user, state="preempted",
                                 text=reasons.preempted(origin + at, because, now=posix_now)
                                 + "; " + text))
        else:
            lines.append(JobLine(job=job.id, project=job.project, user=job.user, state="waiting",
                                 text=text))
        seen_projects[job.project] = before_mine + 1
    for run in core.running.values():
        job = run.job
        end = origin + run.contract_end
        protected = job.min_runtime > 0 and now < run.contract_end
        lines.append(JobLine(
            job=job.id, project=job.project, user=job.user,
            state="running_contract" if protected else "running_preemptible",
            text=reasons.running(end, posix_now, charged=run.charged),
        ))

    preemptions = [
        Preemption(job=r[2], project=r[3], user=core.by_id[r[2]].job.user if r[2] in core.by_id else "",
                   at=r[0], reason=_because(r[8], r[5]))
        for r in _rows(core.log, "preempt")[-RECENT_PREEMPTIONS:]
    ]
    pools = []
    cl = core.cluster
    for pool, ps in cl.pools.items():
        capacity = sum(ps.size.values())
        free = sum(cl.free[n] for n in ps.size)
        drained = sum(ps.size[n] for n in ps.size if n in cl.drained)
        pools.append(PoolStatus(cluster=pool.cluster, gpu_type=pool.gpu_type,
                                capacity_gpus=capacity, busy_gpus=capacity - free,
                                drained_gpus=drained))
    return LiveStatus(
        at=now, wall=wall, origin=origin, lookback_s=pol.lookback, policy=policy,
        executor=executor, projects=tuple(projects), queue=tuple(queue),
        preemptions=tuple(preemptions), pools=tuple(pools), scheduler=counters,
        jobs=tuple(lines),
    )


def _rows(log: Iterable[tuple[Any, ...]], event: str) -> list[tuple[Any, ...]]:
    return [r for r in log if r[1] == event]


def _last_preemptions(log: list[tuple[Any, ...]]) -> dict[str, tuple[float, str]]:
    """Each job's latest preemption (time, cause in words)."""
    out: dict[str, tuple[float, str]] = {}
    for r in log:
        if r[1] == "preempt":
            out[r[2]] = (r[0], _because(r[8], r[5]))
        elif r[1] in ("start", "resume"):
            out.pop(r[2], None)
    return out


def _contract_ends(core: Scheduler) -> dict[Pool, float]:
    """Per pool, when the first contract still running there ends (scenario time)."""
    out: dict[Pool, float] = {}
    for run in core.running.values():
        if run.pool is not None and run.job.min_runtime > 0 and run.contract_end > core.now:
            out[run.pool] = min(out.get(run.pool, math.inf), run.contract_end)
    return out


def _first_contract_end(ends: dict[Pool, float], run: JobRun, origin: float) -> float | None:
    """POSIX time the first contract on the job's pools ends (``None``: none running)."""
    mine = [t for p, t in ends.items() if run.job.allows(p.cluster, p.gpu_type)]
    return origin + min(mine) if mine else None


def job_class_latency(run: JobRun) -> float:
    """Seconds from arrival to first start of a started job (``nan`` before it starts)."""
    if math.isnan(run.first_start):
        return math.nan
    return max(run.first_start - run.queued_at, 0.0)
