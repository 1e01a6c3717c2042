"""Why a queued job is not in the plan (pending reasons), and why one is.

The reason names what kept the job out, checked in this order: its gang fits only
drained nodes (maintenance); the MIP chose it but no node hole of its shape was left
(no gang hole); free GPUs exist but not in its shape (no gang hole); the GPUs are held
by jobs inside their contract (contracts); its project has no headroom, so it could
only run unallocated (budget exhausted); the GPUs went to its own project's
higher-priority work (priority); they went to projects further below their share
(fair-share rank); otherwise every allowed pool is simply full (pool capacity).
"""

from __future__ import annotations

from dataclasses import dataclass

from models import JobState, Pending, PendingReason, Plan, Snapshot, drain_guard
from planner.mip.assemble import Board, Run
from planner.mip.epoch import Epoch, JobClass, SubPool
from planner.mip.objective import project_weight


def pending_reasons(
    epoch: Epoch, runs: list[Run], dropped: set[str], board: Board
) -> list[Pending]:
    """One :class:`Pending` per queued job of the epoch that has no run."""
    placed = {r.state.job.id for r in runs}
    out: list[Pending] = []
    held = _contract_held(epoch)
    holders = _holders(epoch, runs)
    for st in epoch.unfit:
        out.append(
            Pending(
                job=st.job.id,
                reason=PendingReason.POOL_CAPACITY,
                detail=f"a gang of {st.job.gpus} GPUs fits no allowed pool of this snapshot",
            )
        )
    # A reason reads only these fields of a job (and the shared board): classes that
    # agree on them (they may differ in run length or age) share it.
    known: dict[tuple[object, ...], Pending] = {}
    downs: dict[tuple[object, ...], bool] = {}
    split: dict[tuple[int, int, str], _Holders] = {}
    for c in epoch.classes:
        pools = [epoch.pools[p] for p in c.pools]
        # Members of a class share every field the reason depends on: work it out once
        # (whether maintenance ahead rules its start out also depends on its contract).
        key = (c.pools, c.gpus, c.project, c.allocated, c.urgent, c.priority)
        near = any(p.maintained for p in pools)
        shared: Pending | None = known.get(key)
        for st in c.jobs:
            if st.job.id in placed:
                continue
            if near:
                guard = drain_guard(st.job, True, st.remaining)
                dkey = (*key, guard, c.run)
                down = downs.get(dkey)
                if down is None:
                    down = downs[dkey] = _down_ahead(epoch, board, c, st, pools, guard)
                if down:
                    out.append(_maintenance_ahead(board, st, pools, guard))
                    continue
            if st.job.id in dropped:
                where = ", ".join(f"{p.cluster}/{p.gpu_type}" for p in pools)
                out.append(
                    Pending(
                        job=st.job.id,
                        reason=PendingReason.NO_GANG_HOLE,
                        detail=f"chosen by the solver, but no hole of {st.job.gpus} GPUs "
                        f"in the shape of its gang was left on {where}",
                    )
                )
                continue
            if shared is None:
                shared = _reason(epoch, st, pools, board, held, holders, split)
                known[key] = shared
                out.append(shared)
            else:
                out.append(Pending(job=st.job.id, reason=shared.reason, detail=shared.detail))
    return out


def _down_ahead(
    epoch: Epoch, board: Board, cls: JobClass, st: JobState, pools: list[SubPool], guard: float
) -> bool:
    """Whether GPUs enough for ``st``'s gang are free in some slice, but in every such
    slice only on nodes that go down for maintenance before its run in the epoch, or its
    ``guard`` (:func:`models.drain_guard`), would end (placement keeps a start off those)."""
    job = st.job
    fits = [(p, k) for p in pools for k in range(epoch.slices)
            if board.pool_free(p, k) >= p.taken(job.gpus)]
    return bool(fits) and all(
        _usable_free(epoch, board, p, k, k + cls.length(k, epoch.slices), guard)
        < p.taken(job.gpus)
        for p, k in fits
    )


def _maintenance_ahead(board: Board, st: JobState, pools: list[SubPool], guard: float) -> Pending:
    job = st.job
    names = ", ".join(f"{p.cluster}/{p.gpu_type}" for p in pools)
    most = max(board.pool_free(p, 0) for p in pools)
    # Funded non-resumable work runs out, and a drain would throw its progress away.
    span = (f"its minimum runtime of {job.min_runtime / 3600:g} h" if guard <= job.min_runtime
            else f"its remaining {guard / 3600:.1f} h of work (it is not resumable)")
    return Pending(
        job=job.id,
        reason=PendingReason.MAINTENANCE,
        detail=f"needs {job.gpus} GPUs; {most} are free on {names}, but on nodes whose "
        f"maintenance starts before its run in this epoch, or {span}, would end",
    )


def _usable_free(
    epoch: Epoch, board: Board, pool: SubPool, first: int, last: int, contract: float
) -> int:
    """Free GPUs of ``pool`` in slice ``first`` on nodes a start there may take: open in
    every slice to ``last``, and no window within ``contract`` (:meth:`SubPool.fenced`).
    Only nodes with a window can be ruled out: the pool's free count less theirs."""
    t0 = epoch.slice_start(first)
    windowed = set(pool.drain_opens).union(*pool.drained)
    return board.pool_free(pool, first) - sum(
        board.free[n][first] for n in windowed if pool.keeps_off(n, first, last, t0, contract)
    )


def _contract_held(epoch: Epoch) -> dict[tuple[int, int], int]:
    """GPUs per (pool, slice) held by running jobs inside their contract."""
    held: dict[tuple[int, int], int] = {}
    for r in epoch.running:
        for k in range(min(r.must, r.may)):
            held[(r.pool, k)] = held.get((r.pool, k), 0) + r.open_gpus[k]
    return held


def _holders(epoch: Epoch, runs: list[Run]) -> dict[tuple[int, int], list[Run]]:
    out: dict[tuple[int, int], list[Run]] = {}
    for run in runs:
        for k in range(run.first, run.last):
            out.setdefault((run.pool, k), []).append(run)
    return out


def _reason(
    epoch: Epoch,
    st: JobState,
    pools: list[SubPool],
    board: Board,
    held: dict[tuple[int, int], int],
    holders: dict[tuple[int, int], list[Run]],
    split: dict[tuple[int, int, str], _Holders],
) -> Pending:
    job = st.job
    S = epoch.slices
    names = ", ".join(f"{p.cluster}/{p.gpu_type}" for p in pools)
    open_fit = [
        (p, k)
        for p in pools
        for k in range(S)
        if p.capacity(k) >= p.taken(job.gpus)
        and (not p.multi(job.gpus) or p.open_nodes(k) * p.gpus_per_node >= p.taken(job.gpus))
    ]
    if not open_fit:
        drained = sum(len(p.drained[0]) for p in pools)
        return Pending(
            job=job.id,
            reason=PendingReason.MAINTENANCE,
            detail=f"needs {job.gpus} GPUs; with {drained} node(s) drained for maintenance "
            f"no allowed pool ({names}) has that many open",
        )
    free_best = max(board.pool_free(p, k) for p, k in open_fit)
    if any(board.pool_free(p, k) >= p.taken(job.gpus) for p, k in open_fit):
        return Pending(
            job=job.id,
            reason=PendingReason.NO_GANG_HOLE,
            detail=f"needs {job.gpus} GPUs; up to {free_best} are free on {names}, but not "
            f"on nodes of its gang's shape for the slices it needs",
        )
    if all(p.capacity(k) - held.get((p.index, k), 0) < p.taken(job.gpus) for p, k in open_fit):
        most = max(p.capacity(k) - held.get((p.index, k), 0) for p, k in open_fit)
        return Pending(
            job=job.id,
            reason=PendingReason.CONTRACTS,
            detail=f"needs {job.gpus} GPUs; at most {most} on {names} are not held by "
            f"jobs inside their minimum runtime",
        )
    left = board.budget.get(job.project, 0)
    if job.allocated and left < min(epoch.charge_q(job.gpus, p, job.urgent) for p in pools):
        head = epoch.snapshot.standing.get(job.project)
        gpu_h = head.headroom_gpu_h if head is not None else 0.0
        return Pending(
            job=job.id,
            reason=PendingReason.BUDGET_EXHAUSTED,
            detail=f"project {job.project} has used its headroom of {gpu_h:.1f} GPU-h this "
            f"epoch; it could only run unallocated, and the GPUs went to funded work",
        )
    # Who holds the GPUs it could have had (first slice of its best pool)?
    p, k = min(open_fit, key=lambda pk: (pk[1], -pk[0].capacity(pk[1])))
    there = split.get((p.index, k, job.project))
    if there is None:
        there = split[(p.index, k, job.project)] = _Holders.of(epoch, holders.get((p.index, k), []), job.project)
    own = [
        gpus for urgent, priority, gpus in there.own if (urgent, priority) > (job.urgent, job.priority)
    ]
    if own and sum(own) >= there.others_gpus:
        return Pending(
            job=job.id,
            reason=PendingReason.PRIORITY,
            detail=f"{p.cluster}/{p.gpu_type} went to {len(own)} job(s) of {job.project} "
            f"that are urgent or of higher priority",
        )
    if there.ahead is not None:
        return Pending(
            job=job.id,
            reason=PendingReason.FAIR_SHARE_RANK,
            detail=f"{p.cluster}/{p.gpu_type} went to projects ranked ahead by fair share "
            f"({there.ahead})",
        )
    return Pending(
        job=job.id,
        reason=PendingReason.POOL_CAPACITY,
        detail=f"needs {job.gpus} GPUs; every allowed pool ({names}) is full in every slice",
    )


@dataclass(frozen=True)
class _Holders:
    """The runs holding one pool in one slice, seen from one project: its own runs
    (urgent, priority, GPUs each), the other projects' GPUs, and which of those projects
    are ranked ahead by fair share (shown as in a reason; ``None`` when no other
    project holds any)."""

    own: list[tuple[bool, int, int]]
    others_gpus: int
    ahead: str | None

    @classmethod
    def of(cls, epoch: Epoch, runs: list[Run], project: str) -> _Holders:
        others = [r for r in runs if r.state.job.project != project]
        own = [
            (r.state.job.urgent, r.state.job.priority, r.state.job.gpus)
            for r in runs
            if r.state.job.project == project
        ]
        if not others:
            return cls(own, 0, None)
        standing = epoch.snapshot.standing

        def weight(name: str) -> float:
            """A project's fair-share weight."""
            return project_weight(standing[name].ratio) if name in standing else 1.0

        mine = weight(project)
        holders_projects = {r.state.job.project for r in others}
        ahead = {p for p in holders_projects if weight(p) >= mine}
        projects = sorted(ahead or holders_projects)
        shown = ", ".join(projects[:3]) + (" ..." if len(projects) > 3 else "")
        return cls(own, sum(r.state.job.gpus for r in others), shown)


def explain_job(plan: Plan, snapshot: Snapshot, job_id: str) -> str:
    """A few lines saying why ``job_id`` is or is not in ``plan``.

    Raises ``KeyError`` when the snapshot has no such job.
    """
    states = {s.job.id: s for s in snapshot.jobs}
    if job_id not in states:
        raise KeyError(job_id)
    st = states[job_id]
    job = st.job
    lines = [
        f"job {job.id}: project {job.project}, {job.gpus} GPUs, "
        f"min runtime {job.min_runtime / 60:g} min, "
        f"{'resumable' if job.resumable else 'not resumable'}"
        + (", urgent" if job.urgent else "")
        + (f", priority {job.priority}" if job.priority else "")
        + f"; {st.status}"
    ]
    standing = snapshot.standing.get(job.project)
    if standing is not None:
        lines.append(
            f"project {job.project}: owed {standing.owed_gpus:.1f} H100-eq GPUs, "
            f"ratio {standing.ratio:.2f} over the lookback, "
            f"headroom {standing.headroom_gpu_h:.1f} GPU-h"
        )
    slices = [
        (s, a) for s in plan.slices for a in s.assignments if a.job == job_id
    ]
    if slices:
        first, a = slices[0]
        last = slices[-1][0]
        lines.append(
            f"placed: {a.cluster}/{a.gpu_type} on {', '.join(a.nodes)} from "
            f"{_clock(plan, first.start)} to {_clock(plan, last.end)} "
            f"({len(slices)} of {len(plan.slices)} slices), "
            + _charging(sum(1 for _, x in slices if x.charged), len(slices))
        )
    for action in plan.actions:
        if action.job == job_id:
            lines.append(f"action: {action.action} at {_clock(plan, action.at)}")
            if action.action == "preempt":
                lines.append(f"why preempted: {_why_preempted(plan, snapshot, st, action.at)}")
    for p in plan.pending:
        if p.job == job_id:
            lines.append(f"pending: {p.reason.value}: {p.detail}")
    if not slices and not any(p.job == job_id for p in plan.pending):
        lines.append("not in this epoch's plan")
    if plan.solver.fallback:
        lines.append(f"note: greedy fallback plan ({plan.solver.message or plan.solver.status})")
    return "\n".join(lines)


def _charging(charged: int, slices: int) -> str:
    if charged == slices:
        return "charged to its budget"
    if charged == 0:
        return "unallocated (not charged: no budget headroom left, or free work)"
    return f"charged in {charged} of its {slices} slices, then unallocated (headroom used up)"


def _why_preempted(plan: Plan, snapshot: Snapshot, st: JobState, at: float) -> str:
    """Why a running job stops at ``at``: maintenance, or who takes its GPUs."""
    nodes = {n.node.name: n for n in snapshot.nodes}
    drained = [n for n in st.nodes if n in nodes and nodes[n].drained_at(at)]
    if drained:
        return (
            f"node {', '.join(drained)} is drained for maintenance from "
            f"{_clock(plan, nodes[drained[0]].drain_start or at)} and its contract allows it "
            f"to move off"
        )
    after = plan.slice_at(at)
    takers = sorted(
        {
            (a.project, a.job)
            for a in (after.assignments if after is not None else ())
            if set(a.nodes) & set(st.nodes)
        }
    )
    contract = (
        "it runs unallocated (not charged), which funded work may preempt"
        if not st.charged
        else f"its minimum runtime ended at {_clock(plan, st.contract_end)}"
    )
    if takers:
        shown = ", ".join(f"{j} ({p})" for p, j in takers[:4]) + (" ..." if len(takers) > 4 else "")
        return f"{contract}; its nodes go to {shown}, ranked ahead by fair share"
    return f"{contract}; the plan values other work on its pool more"


def clock(t: float) -> str:
    """Seconds from the scenario's start as ``1d02h15m`` (days only when needed)."""
    total = int(round(t))
    d, rest = divmod(total, 86400)
    h, rest = divmod(rest, 3600)
    m = rest // 60
    return (f"{d}d" if d else "") + f"{h:02d}h{m:02d}m"


def _clock(plan: Plan, t: float) -> str:
    return clock(t)
