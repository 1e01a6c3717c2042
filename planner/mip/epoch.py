"""The geometry of one epoch: slices, pools with their drains, running jobs, job classes.

Both the MIP formulation and the greedy plan read the snapshot through this module, so
they agree on what a slice, a pool and a job's run are. Everything here is plain data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from models import JobState, Snapshot, keeps_running
from planner.placement import gpus_taken, holds_up_drain, nodes_needed

#: Work is counted in tenths of an H100-equivalent GPU-slice, so rates such as 2.6 stay
#: integral (the CP-SAT backend takes integers only).
WORK_SCALE = 10


@dataclass
class SubPool:
    """Nodes of one size inside a pool ``(cluster, gpu_type)``.

    A pool with several node sizes is split, so that a gang's shape is exact; a job still
    stays inside one pool, as the contract asks.
    """

    index: int
    cluster: str
    gpu_type: str
    gpus_per_node: int
    rate: float
    nodes: list[str]
    #: Per slice, the nodes that may not take new work (a maintenance window overlaps it).
    drained: list[frozenset[str]]
    #: Per node with any, when its maintenance windows open after the epoch's start (in
    #: the epoch, and the next one after it).
    drain_opens: dict[str, tuple[float, ...]] = field(default_factory=dict)

    @property
    def rate_q(self) -> int:
        """Work quanta one GPU of this pool does in one slice."""
        return max(round(self.rate * WORK_SCALE), 1)

    @property
    def maintained(self) -> bool:
        """Whether maintenance reaches this pool at all: a node drained in some slice,
        or a window opening after the epoch's start."""
        return bool(self.drain_opens) or any(self.drained)

    def fenced(self, node: str, start: float, contract: float) -> bool:
        """Whether a start on ``node`` at ``start`` protected for ``contract`` seconds
        would hold a drain up (:func:`planner.placement.holds_up_drain`)."""
        return any(holds_up_drain(w, start, contract) for w in self.drain_opens.get(node, ()))

    def keeps_off(self, node: str, first: int, last: int, start: float, contract: float) -> bool:
        """Whether a start running slices ``first .. last-1`` (from ``start``, protected
        for ``contract`` seconds) may not take ``node``: it is drained in one of those
        slices, or its maintenance opens within the contract."""
        return (any(node in self.drained[k] for k in range(first, last))
                or self.fenced(node, start, contract))

    def open_nodes(self, k: int) -> int:
        """Nodes that may hold work in slice ``k``."""
        return len(self.nodes) - len(self.drained[k])

    def capacity(self, k: int) -> int:
        """GPUs that may hold work in slice ``k`` (drained nodes excluded)."""
        return self.open_nodes(k) * self.gpus_per_node

    def fits(self, gpus: int) -> bool:
        """Whether a gang of ``gpus`` fits this sub-pool at all, drains ignored."""
        return nodes_needed(gpus, self.gpus_per_node) <= len(self.nodes)

    def taken(self, gpus: int) -> int:
        """GPUs a gang of ``gpus`` occupies here (whole nodes when it spans several)."""
        return gpus_taken(gpus, self.gpus_per_node)

    def multi(self, gpus: int) -> bool:
        """Whether a gang of ``gpus`` spans several nodes here."""
        return gpus > self.gpus_per_node

    def held(self, gpus: int, nodes: int) -> int:
        """GPUs a job of ``gpus`` holds on ``nodes`` of its nodes here: those nodes
        whole when it spans several, else its own GPUs (none when ``nodes`` is 0).
        The model's rows and placement's board count a running job by this one rule."""
        if self.multi(gpus):
            return nodes * self.gpus_per_node
        return gpus if nodes else 0


@dataclass
class Running:
    """A running job and the slices it may still run in.

    It runs slices ``0 .. end-1`` for some ``end`` in ``[must, may]``: ``must`` covers its
    contract, ``may`` its remaining work, capped by a drain of one of its nodes once the
    contract allows it to move off.
    """

    state: JobState
    pool: int
    must: int
    may: int
    finish: int  # slices until it completes (S when it runs past the epoch)
    #: GPUs it holds on nodes that are open (not drained) in each slice.
    open_gpus: list[int]
    #: Whole open nodes it holds in each slice (multi-node gangs only).
    open_nodes: list[int]
    multi: bool

    @property
    def id(self) -> str:
        """The job's id."""
        return self.state.job.id

    @property
    def preemptible(self) -> bool:
        """Whether the plan may stop it before it finishes."""
        return self.may > self.must


@dataclass
class JobClass:
    """Queued jobs the formulation cannot tell apart (aggregated into integer counts)."""

    index: int
    project: str
    gpus: int
    pools: tuple[int, ...]
    priority: int
    urgent: bool
    allocated: bool
    run: int  # slices of work left (restart overhead included), capped at the epoch
    resuming: bool
    aging: int
    jobs: list[JobState] = field(default_factory=list)

    def length(self, start: int, slices: int) -> int:
        """Slices a member started in slice ``start`` runs: to completion or epoch end."""
        return min(self.run, slices - start)


@dataclass
class Epoch:
    """One epoch of a snapshot, cut into slices, with its pools, running jobs and queue."""

    snapshot: Snapshot
    start: float
    end: float
    slices: int
    slice_len: float
    pools: list[SubPool]
    running: list[Running]
    classes: list[JobClass]
    #: Queued jobs that fit no allowed pool even with every node open.
    unfit: list[JobState]
    #: Quanta of H100-eq work each project is owed in the epoch.
    target_q: dict[str, int]
    #: Quanta each project may still charge (its headroom).
    headroom_q: dict[str, int]
    urgent_charge: float

    def slice_start(self, k: int) -> float:
        """Start time of slice ``k``."""
        return self.start + k * self.slice_len

    def slice_end(self, k: int) -> float:
        """End time of slice ``k``."""
        return self.start + (k + 1) * self.slice_len

    def charge_q(self, gpus: int, pool: SubPool, urgent: bool) -> int:
        """Quanta of budget one slice of a job's run charges."""
        return self.charge_of(self.work_q(gpus, pool), urgent)

    def charge_of(self, work_q: int, urgent: bool) -> int:
        """Quanta of budget one slice of ``work_q`` quanta of work charges."""
        factor = self.urgent_charge if urgent else 1.0
        return max(round(work_q * factor), 1)

    def work_q(self, gpus: int, pool: SubPool) -> int:
        """Quanta of H100-eq work one slice of a job's run delivers."""
        return gpus * pool.rate_q


#: Aging buckets, in epochs waited: under 1, under 4, under 24, longer.
AGING_EDGES = (1.0, 4.0, 24.0)


def aging_bucket(waited: float, epoch: float) -> int:
    """Which aging bucket a job that waited ``waited`` seconds is in (0 .. 3)."""
    epochs = waited / epoch if epoch > 0 else 0.0
    return sum(1 for edge in AGING_EDGES if epochs >= edge)


def remaining_with_restart(state: JobState, restart_overhead: float) -> float | None:
    """Seconds a queued job needs once started: its remaining work plus restart overhead.

    A non-resumable job starts over: all of its duration.
    """
    if not state.job.resumable:
        return state.job.duration
    rest = state.remaining
    if rest is None:
        return None
    return rest + (restart_overhead if resumes(state) else 0.0)


def resumes(state: JobState) -> bool:
    """Whether starting this queued job resumes earlier progress (and pays the overhead)."""
    return state.status == "queued" and state.job.resumable and state.progress > 0


def build_epoch(snapshot: Snapshot) -> Epoch:
    """Cut ``snapshot``'s epoch into slices and classify its jobs."""
    policy = snapshot.policy
    slices = policy.slices
    slice_len = policy.slice_length
    start = snapshot.now
    end = start + policy.epoch
    pools = _sub_pools(snapshot, start, slice_len, slices)
    node_pool: dict[str, SubPool] = {n: p for p in pools for n in p.nodes}
    running: list[Running] = []
    queued: list[JobState] = []
    for state in snapshot.jobs:
        if state.status == "running" and state.nodes and state.nodes[0] in node_pool:
            running.append(_running(state, node_pool, start, slice_len, slices))
        elif state.status == "queued":
            queued.append(state)
    classes, unfit = _classes(queued, pools, snapshot, slice_len, slices)
    slice_h = slice_len / 3600.0
    target_q: dict[str, int] = {}
    headroom_q: dict[str, int] = {}
    for project, st in snapshot.standing.items():
        target_q[project] = round(st.owed_gpus * slices * WORK_SCALE)
        headroom_q[project] = max(math.floor(st.headroom_gpu_h / slice_h * WORK_SCALE + 1e-9), 0)
    return Epoch(
        snapshot=snapshot,
        start=start,
        end=end,
        slices=slices,
        slice_len=slice_len,
        pools=pools,
        running=running,
        classes=classes,
        unfit=unfit,
        target_q=target_q,
        headroom_q=headroom_q,
        urgent_charge=policy.urgent_charge,
    )


def _sub_pools(snapshot: Snapshot, start: float, slice_len: float, slices: int) -> list[SubPool]:
    groups: dict[tuple[str, str, int], list[str]] = {}
    drained: dict[tuple[str, str, int], list[set[str]]] = {}
    drain_opens: dict[tuple[str, str, int], dict[str, tuple[float, ...]]] = {}
    for ns in snapshot.nodes:
        n = ns.node
        key = (n.cluster, n.gpu_type, n.gpus)
        groups.setdefault(key, []).append(n.name)
        per_slice = drained.setdefault(key, [set() for _ in range(slices)])
        opens = tuple(t for t in (ns.drain_start, ns.next_drain) if t is not None and t > start
                      and snapshot.policy.maintenance_fence)
        if opens:
            drain_opens.setdefault(key, {})[n.name] = opens
        if ns.drain_start is None:
            continue
        for k in range(slices):
            s0, s1 = start + k * slice_len, start + (k + 1) * slice_len
            if ns.drain_start < s1 and (ns.drain_end is None or ns.drain_end > s0):
                per_slice[k].add(n.name)
    out: list[SubPool] = []
    for i, key in enumerate(sorted(groups)):
        cluster, gpu_type, gpn = key
        rate = snapshot.gpu_types[gpu_type].rate if gpu_type in snapshot.gpu_types else 1.0
        out.append(
            SubPool(
                index=i,
                cluster=cluster,
                gpu_type=gpu_type,
                gpus_per_node=gpn,
                rate=rate,
                nodes=groups[key],
                drained=[frozenset(d) for d in drained[key]],
                drain_opens=drain_opens.get(key, {}),
            )
        )
    return out


def slices_for(seconds: float | None, slice_len: float, slices: int) -> int:
    """Slices needed to do ``seconds`` of work, capped at the epoch (None: the epoch)."""
    if seconds is None:
        return slices
    return min(math.ceil(seconds / slice_len - 1e-9), slices)


def _running(
    state: JobState,
    node_pool: dict[str, SubPool],
    start: float,
    slice_len: float,
    slices: int,
) -> Running:
    pool = node_pool[state.nodes[0]]
    job = state.job
    finish = slices_for(state.remaining, slice_len, slices)
    if (state.charged and not job.resumable) or keeps_running(job, state.charged, state.progress, slice_len):
        must = finish  # non-resumable funded work is never preempted: it would lose all its progress
    elif not state.charged:
        # Unallocated work is protected by no contract: any boundary may preempt it.
        must = 0
    else:
        left = max(state.contract_end - start, 0.0)
        must = min(slices_for(left, slice_len, slices), finish)
    may = finish
    for k in range(slices):
        if any(n in pool.drained[k] for n in state.nodes):
            # Drained: it moves off at the first boundary its contract allows.
            may = min(may, max(k, must))
            break
    multi = pool.multi(job.gpus)
    open_gpus: list[int] = []
    open_nodes: list[int] = []
    for k in range(slices):
        open_here = [n for n in state.nodes if n not in pool.drained[k]]
        open_nodes.append(len(open_here) if multi else 0)
        open_gpus.append(pool.held(job.gpus, len(open_here)))
    return Running(
        state=state,
        pool=pool.index,
        must=must,
        may=may,
        finish=finish,
        open_gpus=open_gpus,
        open_nodes=open_nodes,
        multi=multi,
    )


def _classes(
    queued: Sequence[JobState],
    pools: list[SubPool],
    snapshot: Snapshot,
    slice_len: float,
    slices: int,
) -> tuple[list[JobClass], list[JobState]]:
    policy = snapshot.policy
    by_key: dict[tuple[object, ...], JobClass] = {}
    unfit: list[JobState] = []
    for state in sorted(queued, key=lambda s: (s.job.submit, s.job.id)):
        job = state.job
        allowed = tuple(
            p.index for p in pools if job.allows(p.cluster, p.gpu_type) and p.fits(job.gpus)
        )
        if not allowed:
            unfit.append(state)
            continue
        need = remaining_with_restart(state, policy.restart_overhead)
        run = max(slices_for(need, slice_len, slices), 1)
        key = (
            job.project,
            job.gpus,
            allowed,
            job.priority,
            job.urgent,
            job.allocated,
            run,
            resumes(state),
            aging_bucket(snapshot.now - job.submit, policy.epoch),
        )
        cls = by_key.get(key)
        if cls is None:
            cls = JobClass(
                index=len(by_key),
                project=job.project,
                gpus=job.gpus,
                pools=allowed,
                priority=job.priority,
                urgent=job.urgent,
                allocated=job.allocated,
                run=run,
                resuming=resumes(state),
                aging=aging_bucket(snapshot.now - job.submit, policy.epoch),
            )
            by_key[key] = cls
        cls.jobs.append(state)
    return list(by_key.values()), unfit
