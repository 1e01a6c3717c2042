"""``mip``: our epoch planner driving the simulated cluster.

- **Decision points.** At each epoch boundary the policy freezes a snapshot (queued and
  running jobs, drains, standings from the run's ledger) and calls
  :func:`planner.mip.plan_epoch`; with ``replan_slices=True`` it also re-plans at every
  slice boundary (the epoch window then starts there).
- **Execution, slice by slice.** At a slice start, running jobs the plan knew about but
  does not keep are preempted when their contract allows (never inside the minimum
  runtime of charged work, never non-resumable funded work the plan keeps); planned
  jobs that are not running start on their planned nodes (or, if those are taken, on
  another hole of the same pool). *Lazy stops*: work the plan stops (free work, or
  charged work past its contract) is not preempted but runs on as backfilled work until
  a planned start needs its GPUs, and such a start first takes idle GPUs no other
  planned start needs. *Early starts*: GPUs freed in mid-slice go at once to the job
  the plan starts on them at a later slice of the epoch.
- **Backfill between decision points.** Queued jobs start greedily on idle GPUs of nodes
  the rest of the epoch's plan does not need, in fair-share order (no preemption), so a
  debug job need not wait for the next slice and GPUs freed by early completions do not
  idle. Backfilled work yields its nodes when a planned start needs them (if its
  contract allows); the next plan sees it as running and decides.
- **Holes for large gangs.** A multi-node gang of a project running below its owed
  share that has waited an epoch gets a *hold*: the whole nodes of one allowed pool that
  free soonest (empty, then unallocated work, then contracts ending first). The plan sees
  held nodes as drained (no new work; work past its contract moves off as under
  maintenance, non-resumable funded work runs out), backfill keeps off them, and the gang
  starts there as soon as they are all free. Without it, every GPU a completion frees is
  refilled by small work with hours of contract, and the gang (whose every waiting hour
  adds its GPUs to its project's owed share) waits for days.
- **Debug fast lane.** A funded debug-class job (8 GPUs or fewer, minimum runtime 15 min
  or less) takes idle GPUs no funded planned start wants before its declared end; when
  no pool has such room, also idle GPUs planned starts want (``fast_lane_keeps``; the
  start waits for it, or takes other room). Finding none, it may, like under
  ``fairshare``, preempt work past its contract that is unallocated, or resumable work
  of a project with a higher fair-share ratio; otherwise it would wait up to a whole
  slice for the next decision point. Once it has waited a slice, resumable work past
  its contract of any project may make room, but no multi-node gang among the victims
  that opens.
- **Maintenance ahead.** A start keeps off a node whose announced window opens within
  its contract, and funded non-resumable work, which runs out, within its declared
  remaining time (:func:`models.drain_guard`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple, get_args

import numpy as np

from models import NodeState, Plan, Pool, drain_guard, keeps_running, spare_seconds
from planner.placement import per_node_gpus, place_gang
from planner.scheduler.core import Scheduler, candidate_pools
from planner.scheduler.queues import (
    Shape,
    ShapeQueues,
    VictimIndex,
    fair_share_rank,
    victim_level,
    within_project,
)
from planner.scheduler.state import JobRun

FastLaneKeeps = Literal["funded", "gangs", "none"]
"""Which of the plan's reservations the debug fast lane leaves alone when no pool has room
without them: every funded start's (``funded``), only funded multi-node gangs'
(``gangs``), or none (the default; docs/metrics.md, "The fast lane over the plan's
reservations")."""
FAST_LANE_KEEPS: tuple[FastLaneKeeps, ...] = get_args(FastLaneKeeps)

class Reservation(NamedTuple):
    """GPUs of one node a planned, still queued start needs from ``at`` on."""

    at: float
    gpus: int
    funded: bool
    gang: bool  # the start spans more than one node


class MipPolicy:
    """Epoch plans from :func:`planner.mip.plan_epoch`, executed slice by slice."""

    name = "mip"

    def __init__(
        self,
        backend: str = "cpsat",
        time_limit: float = 10.0,
        rel_gap: float = 0.01,
        replan_slices: bool = False,
        fast_lane: bool = True,
        holds: bool = True,
        hold_fraction: float = 0.25,
        hold_min_gpus: int = 32,
        funded_lane: bool = True,
        early_starts: bool = True,
        lazy_stops: bool = True,
        fast_lane_keeps: FastLaneKeeps = "none",
        lanes: int | None = None,
    ) -> None:
        if lanes is not None and (isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1):
            raise ValueError(f"lanes: expected a whole number of 1 or more, got {lanes!r}")
        if fast_lane_keeps not in FAST_LANE_KEEPS:
            raise ValueError(
                f"fast_lane_keeps: expected one of {', '.join(FAST_LANE_KEEPS)}, got {fast_lane_keeps!r}"
            )
        self.backend = backend
        self.time_limit = time_limit
        self.rel_gap = rel_gap
        # Processes a decomposed epoch is planned in (None: one per core); runs side by
        # side on the cores (a sweep's workers) plan in one each.
        self.lanes = lanes
        self.replan_slices = replan_slices
        self.plan: Plan | None = None
        self.plan_seconds: list[float] = []
        self.plan_wall: list[float] = []
        self.fallbacks = 0
        self.deviations = 0
        self.known_running: set[int] = set()  # jobs running when the current plan was made
        # Per node, the plan's starts still to come this epoch
        self.reserved: dict[str, list[Reservation]] = {}
        self.ratio: dict[str, float] = {}
        self.order: list[str] = []
        self.inside: set[str] = set()  # projects running within their owed share (this slice)
        self.owed: dict[str, float] = {}
        self.planned: set[str] = set()  # jobs the plan runs from the current slice on
        # Queued jobs the plan starts in a later slice of this epoch: (slice start, its
        # assignment), in slice order.
        self.later: list[tuple[float, Any]] = []
        self._stale = False  # a planned start happened since the reservations were made
        # Per kind of lane wake-up ("young": a restarted job stops being spared; "fast":
        # a debug job's wider victims open), the one asked for last (see _wake_once).
        self._wakes: dict[str, float] = {}
        self.queue = ShapeQueues(within_project)
        self.funded_queue = ShapeQueues(within_project)
        self.slice_index = 0
        self.want: dict[str, Any] = {}
        self.failed_starts: set[str] = set()  # planned starts that found no room (this slice)
        self.fast: dict[int, JobRun] = {}  # queued funded debug-class jobs
        self.fast_since: dict[int, float] = {}  # when each joined the queue (this time)
        self.fast_lane = fast_lane
        self.use_holds = holds
        self.hold_fraction = hold_fraction
        # Gangs of at least this many GPUs may get a hold (and need more than one node).
        self.hold_min_gpus = hold_min_gpus
        self.funded_lane = funded_lane
        self.early_starts = early_starts
        self.lazy_stops = lazy_stops
        # The plan's reservations the fast lane respects (docs/metrics.md, "The fast
        # lane over the plan's reservations").
        self.fast_lane_keeps = fast_lane_keeps
        self.holds: dict[int, tuple[Pool, tuple[str, ...]]] = {}  # gang index -> its hole
        self.held: set[str] = set()

    def attach(self, engine: Scheduler) -> None:
        self.engine = engine
        self.ratio = {p: 0.0 for p in engine.projects}
        self.order = list(engine.projects)
        pol = engine.scenario.policy
        self.epoch = pol.epoch
        self.slice_len = pol.slice_length
        self.spare_s = spare_seconds(self.slice_len)  # how long a restarted job is spared
        self.slices = pol.slices
        engine.wake_at(engine.now, ("epoch", 0))
        self.victims = VictimIndex(engine, self._level, self._cost)

    def enqueue(self, run: JobRun) -> None:
        # A requeued job is no longer one the plan saw running: if backfill restarts it,
        # it is backfilled work.
        self.known_running.discard(run.index)
        self.queue.push(run.job.project, run)
        if self.fast_lane and run.cls == "debug" and run.job.allocated:
            self.fast[run.index] = run
            self.fast_since[run.index] = self.engine.now
        elif run.job.allocated:
            # The funded lane's candidates, apart: walking the whole queue past thousands
            # of free or fast-lane jobs on every pass stalled long runs.
            self.funded_queue.push(run.job.project, run)

    def on_contract_end(self, run: JobRun, now: float) -> None:
        if any(n in self.engine.cluster.drained for n in run.nodes):
            self._move_off(run, "maintenance")

    def on_drain(self, node: str, now: float) -> None:
        e = self.engine
        for i in sorted(e.cluster.jobs_on[node]):
            run = e.runs[i]
            if run.status == "running" and self._may_preempt(run):
                e.preempt(run, "maintenance")

    def _move_off(self, run: JobRun, reason: str) -> None:
        if run.status == "running":
            self.engine.preempt(run, reason)

    def _may_preempt(self, run: JobRun, for_plan: bool = False) -> bool:
        """The contract: charged work runs out its minimum runtime; the plan never
        preempts non-resumable funded work once charged or past its spare time
        (:func:`models.keeps_running`; maintenance may, once the contract passed)."""
        e = self.engine
        if not run.charged:
            return not (for_plan and self._kept(run))
        if not e.past_contract(run):
            return False
        return run.job.resumable or not for_plan

    def _kept(self, run: JobRun) -> bool:
        """Whether the plan lets ``run`` finish (:func:`models.keeps_running`)."""
        return keeps_running(run.job, run.charged, run.done_work(self.engine.now), self.slice_len)

    def fence_for(self, run: JobRun) -> float:
        """Seconds a start of ``run`` between plans keeps clear of maintenance windows
        (:func:`_contract`): the status reads waits off the cluster with it."""
        return _contract(run, run.job.allocated)

    def on_finish(self, run: JobRun) -> None:
        pass

    def extra_summary(self) -> dict[str, Any]:
        s = np.array(self.plan_seconds)
        return {
            "plan_seconds_p50": float(np.percentile(s, 50)) if len(s) else None,
            "plan_seconds_p99": float(np.percentile(s, 99)) if len(s) else None,
            "plans": len(s),
            "fallbacks": self.fallbacks,
            "deviations": self.deviations,
        }

    # -- decision points ---------------------------------------------------------------

    def on_wake(self, tag: Any, now: float) -> None:
        kind, k = tag
        if kind == "spare":
            return  # a spared victim may be displaced again: the pass that follows tries
        if kind == "epoch" or self.replan_slices:
            self._plan(now)
            self.slice_index = 0
        else:
            self.slice_index = k
        self._execute(now)
        self._rank_free_victims()
        nxt = now + self.slice_len
        if kind == "epoch" and not self.replan_slices:
            for i in range(1, self.slices):
                self.engine.wake_at(now + i * self.slice_len, ("slice", i))
            self.engine.wake_at(now + self.epoch, ("epoch", 0))
        elif self.replan_slices:
            self.engine.wake_at(nxt, ("slice", 0))

    def _plan(self, now: float) -> None:
        from planner.mip import plan_epoch

        e = self.engine
        st = e.standings()
        self.ratio, self.order = fair_share_rank(e.projects, st)
        self.owed = {p: s.owed_gpus for p, s in st.items()}
        self.victims.invalidate()
        snap = e.snapshot(st)
        if self.use_holds:
            self._update_holds(now, {p: s.owed_gpus for p, s in st.items()})
            if self.held:
                # The plan treats held nodes as drained from now on: no new work there.
                snap = snap.model_copy(update={"nodes": tuple(
                    NodeState(node=ns.node, drain_start=now, drain_end=None)
                    if ns.node.name in self.held and ns.drain_start is None else ns
                    for ns in snap.nodes
                )})
        t0 = time.perf_counter()
        plan = plan_epoch(snap, backend=self.backend, time_limit=self.time_limit,
                          rel_gap=self.rel_gap, previous=self.plan, lanes=self.lanes)
        self.plan_wall.append(time.perf_counter() - t0)
        self.plan_seconds.append(plan.solver.seconds)
        self.fallbacks += int(plan.solver.fallback)
        e.record("plan", None, f"{plan.solver.backend} {plan.solver.status.value} "
                 f"{plan.solver.seconds:.2f}s{' fallback' if plan.solver.fallback else ''}")
        self.plan = plan
        self.known_running = {js_run.index for js_run in e.running.values()}

    def _execute(self, now: float) -> None:
        """Apply slice ``slice_index`` of the current plan."""
        e = self.engine
        plan = self.plan
        if plan is None:
            return
        k = self._current_slice()
        sl = plan.slices[k]
        want = {a.job: a for a in sl.assignments}
        self.want = want
        self.failed_starts = set()
        # 1. Stop what the plan no longer runs (jobs it saw running; backfilled work stays
        #    until a planned start needs its nodes). With lazy stops, work the plan may
        #    stop is treated as backfilled work instead: it runs on until a planned start
        #    needs its GPUs (held and drained nodes must empty).
        for run in list(e.running.values()):
            if run.job.id in want or run.index not in self.known_running:
                continue
            if not self._may_preempt(run, for_plan=True):
                self.deviations += 1
            elif self.lazy_stops and not any(
                n in self.held or n in e.cluster.drained for n in run.nodes
            ):
                self.known_running.discard(run.index)
            else:
                e.preempt(run, f"plan: slice {k}")
        if self.lazy_stops:
            self._reserve(k)  # the starts' GPUs, for placing a start off free work
        # 2. Start what it runs.
        for a in sl.assignments:
            planned = e.by_id.get(a.job)
            if planned is not None and planned.status == "queued":
                self._start_planned(planned, a)
        self._reserve(k)

    def _reserve(self, k: int) -> None:
        """Per node, when and how many GPUs the plan's starts in slices ``k``.. need."""
        e = self.engine
        assert self.plan is not None
        self.reserved = {}
        self.later = []
        self._stale = False
        seen: set[str] = set()
        # Every job the plan runs from this slice on: the funded lane leaves them to it.
        self.planned = {a.job for later in self.plan.slices[k:] for a in later.assignments}
        for later in self.plan.slices[k:]:
            at = max(later.start, e.now)
            for a in later.assignments:
                r = e.by_id.get(a.job)
                # Only queued jobs need room: running ones never migrate.
                if a.job in seen or r is None or r.status != "queued":
                    continue
                seen.add(a.job)
                if later.start > e.now:
                    self.later.append((later.start, a))
                per_node = per_node_gpus(a.gpus, a.nodes, e.cluster.nodes[a.nodes[0]].size)
                need = Reservation(at, per_node, a.charged, len(a.nodes) > 1)
                for n in a.nodes:
                    self.reserved.setdefault(n, []).append(need)

    def _start_planned(self, run: JobRun, a: Any) -> bool:
        e = self.engine
        cl = e.cluster
        pool = Pool(a.cluster, a.gpu_type)
        ps = cl.pools.get(pool)
        if ps is None:
            return False
        nodes = tuple(a.nodes)
        size = cl.nodes[nodes[0]].size if nodes and nodes[0] in cl.nodes else 0
        per_node = per_node_gpus(run.job.gpus, nodes, size)
        contract = _contract(run, a.charged)
        fenced = e.fenced(contract)
        ok = bool(nodes) and all(
            n in cl.nodes and n not in cl.drained and n not in fenced and cl.free[n] >= per_node
            for n in nodes
        )
        if not ok and not any(n in fenced for n in nodes):
            # Make room from backfilled work the plan did not know about.
            blockers = {i for n in nodes if n in cl.jobs_on for i in cl.jobs_on[n]}
            # Only backfilled work the plan does not run in this slice: a planned job
            # placed on other nodes a moment ago is not evicted again.
            movable = [e.runs[i] for i in blockers
                       if i not in self.known_running and e.runs[i].job.id not in self.want]
            # With lazy stops, idle GPUs no other planned start needs come before evicting
            # anyone: the plan cannot move running work, so it often puts a gang on the
            # nodes of work it stops while whole nodes idle elsewhere (measured on
            # ai2-like: 86% of the plan's preemptions, the victim back minutes later).
            idle = self._idle_hole(run, ps, contract) if movable and self.lazy_stops else None
            if idle is not None:
                nodes, ok = idle, True
            elif movable and all(self._may_preempt(v, for_plan=True) for v in movable):
                for v in movable:
                    e.preempt(v, f"plan: {run.job.id} needs its nodes")
                ok = all(
                    n in cl.nodes and n not in cl.drained and cl.free[n] >= per_node for n in nodes
                )
        if not ok:
            alt = place_gang(self._open_off_held(ps, contract), ps.size, run.job.gpus, prefer=nodes)
            if alt is None:
                if run.job.id not in self.failed_starts:
                    self.failed_starts.add(run.job.id)
                    self.deviations += 1
                return False
            nodes = alt
        e.start(run, pool, nodes, charged=a.charged, detail=_planned_detail(a, run))
        self._stale = True
        return True

    def _reserved_gpus(self, node: str, before: float, keeps: FastLaneKeeps | None = None) -> int:
        """GPUs of ``node`` the plan's queued starts need before ``before`` (for the fast
        lane, ``keeps``, only those of the starts it keeps: the rest wait for a debug
        job)."""
        rs = self.reserved.get(node, ())
        if keeps is None:
            return sum(r.gpus for r in rs if r.at < before)
        if keeps == "funded":
            return sum(r.gpus for r in rs if r.at < before and r.funded)
        if keeps == "gangs":
            return sum(r.gpus for r in rs if r.at < before and r.funded and r.gang)
        return 0

    def _idle_hole(self, run: JobRun, ps: Any, contract: float) -> tuple[str, ...] | None:
        """Nodes of ``ps`` off held nodes where ``run`` fits on GPUs idle now that no other
        planned start of this epoch needs (this start's own reservation, on its planned
        nodes, counts too: conservative)."""
        free = self._open_off_held(ps, contract)
        return place_gang(self._unreserved(free, run, until=math.inf), ps.size, run.job.gpus)

    def _open_off_held(self, ps: Any, contract: float) -> Mapping[str, int]:
        """The free GPUs of ``ps`` a start protected for ``contract`` seconds may take
        (:meth:`Scheduler.open_free`), held nodes left out."""
        free = self.engine.open_free(ps, contract)
        if not self.held:
            return free
        return {n: f for n, f in free.items() if n not in self.held}

    def _current_slice(self) -> int:
        assert self.plan is not None
        return min(self.slice_index, len(self.plan.slices) - 1)

    def _start_early(self) -> None:
        """Start planned work of a later slice of this epoch now, on its planned nodes,
        when they are free now and no earlier start of the plan needs those GPUs.

        The plan works in whole slices: GPUs a completion frees in mid-slice are reserved
        for the start the plan puts there at the next boundary, and backfill may not take
        them (any start would be evicted minutes later). The job the plan chose for them
        can take them now instead of leaving them idle (measured on bursty-debug: idle
        GPUs grew through every slice, from 12 to 19 of 128 on average).
        """
        e = self.engine
        cl = e.cluster
        started = False
        for at, a in self.later:
            run = e.by_id.get(a.job)
            if run is None or run.status != "queued" or a.job in self.want:
                continue
            nodes = tuple(a.nodes)
            fenced = e.fenced(_contract(run, a.charged))
            if not nodes or any(
                n not in cl.nodes or n in cl.drained or n in self.held or n in fenced
                for n in nodes
            ):
                continue
            per_node = per_node_gpus(run.job.gpus, nodes, cl.nodes[nodes[0]].size)
            if all(cl.free[n] - self._reserved_gpus(n, at) >= per_node for n in nodes):
                e.start(run, Pool(a.cluster, a.gpu_type), nodes, charged=a.charged,
                        detail=_planned_detail(a, run) + " early")
                started = True
        if started:
            self._reserve(self._current_slice())

    # -- holes for large gangs ----------------------------------------------------------

    def _release_at(self, run: JobRun, now: float) -> float:
        """When the plan could have ``run``'s GPUs: unallocated work at once, resumable
        funded work at its contract's end, non-resumable funded work the plan keeps
        (:meth:`_kept`) at its finish."""
        if not run.charged and not self._kept(run):
            return now
        if run.job.resumable:
            return max(now, run.contract_end)
        return run.run_start + run.remaining

    def _update_holds(self, now: float, owed: dict[str, float]) -> None:
        """Keep the holds of gangs still waiting; give new ones to the most under-served
        projects' oldest waiting large gangs, while a project's running work plus its held
        gangs plus half the next gang stay within its owed share."""
        e = self.engine
        cl = e.cluster
        kept = {
            i: h for i, h in self.holds.items()
            if e.runs[i].status == "queued" and not any(n in cl.drained for n in h[1])
        }
        for i in self.holds.keys() - kept.keys():
            e.record("release", e.runs[i], "hold dropped", self.holds[i][1])
        self.holds = kept
        self.held = {n for _, nodes in self.holds.values() for n in nodes}
        running: dict[str, float] = {}
        for run in e.running.values():
            running[run.job.project] = running.get(run.job.project, 0.0) + run.job.gpus * run.rate
        # What each project has, or will have once its held gangs start.
        claimed = dict(running)
        for i in self.holds:
            r = e.runs[i]
            claimed[r.job.project] = claimed.get(r.job.project, 0.0) + e.job_h100(r)
        candidates: list[tuple[float, float, int]] = []
        for run in e.runs:
            job = run.job
            if (run.status != "queued" or job.gpus < self.hold_min_gpus
                    or run.index in self.holds or now - job.submit < self.epoch):
                continue
            share = owed.get(job.project, 0.0)
            if share <= 0 or claimed.get(job.project, 0.0) + 0.5 * e.job_h100(run) > share:
                continue
            candidates.append((running.get(job.project, 0.0) / share, job.submit, run.index))
        candidates.sort()
        held_in: dict[Pool, int] = {}
        for _, nodes in self.holds.values():
            pool = cl.nodes[nodes[0]].pool
            held_in[pool] = held_in.get(pool, 0) + len(nodes)
        for _, _, i in candidates:
            run = e.runs[i]
            project = run.job.project
            gang = e.job_h100(run)
            if claimed.get(project, 0.0) + 0.5 * gang > owed.get(project, 0.0):
                continue
            hole = self._pick_hole(run, now, held_in)
            if hole is None:
                continue
            self.holds[i] = hole
            self.held.update(hole[1])  # the next pick must not take these nodes
            e.record("hold", run, f"hole of {len(hole[1])} nodes in {hole[0]}", hole[1])
            claimed[project] = claimed.get(project, 0.0) + gang
            held_in[hole[0]] = held_in.get(hole[0], 0) + len(hole[1])
        self.held = {n for _, nodes in self.holds.values() for n in nodes}

    def _pick_hole(
        self, run: JobRun, now: float, held_in: dict[Pool, int]
    ) -> tuple[Pool, tuple[str, ...]] | None:
        """Whole nodes of one allowed pool, the soonest free, for the gang ``run``."""
        e = self.engine
        cl = e.cluster
        job = run.job
        best: tuple[float, Pool, tuple[str, ...]] | None = None
        for pool in cl.pools:
            if not job.allows(pool.cluster, pool.gpu_type):
                continue
            size = cl.max_size[pool]
            if job.gpus <= size or job.gpus % size:
                continue  # single-node or ragged gangs: the plan places those
            need = job.gpus // size
            fenced = e.fenced(_contract(run, job.allocated))
            names = [n for n, info in cl.nodes.items() if info.pool == pool and n not in cl.drained
                     and n not in self.held and n not in fenced and info.size == size]
            cap = int(self.hold_fraction * len(names)) - held_in.get(pool, 0)
            if need > cap:
                continue
            when = sorted(
                (max((self._release_at(e.runs[i], now) for i in cl.jobs_on[n]), default=now), n)
                for n in names
            )[:need]
            if len(when) < need:
                continue
            ready = when[-1][0]
            if best is None or ready < best[0]:
                best = (ready, pool, tuple(sorted(n for _, n in when)))
        return None if best is None else (best[1], best[2])

    def _start_holds(self) -> None:
        """Start each held gang whose hole is all free."""
        e = self.engine
        cl = e.cluster
        for i, (pool, nodes) in list(self.holds.items()):
            run = e.runs[i]
            if run.status != "queued":
                del self.holds[i]
                continue
            fenced = e.fenced(_contract(run, run.job.allocated))
            if all(cl.free[n] == cl.nodes[n].size and n not in cl.drained and n not in fenced
                   for n in nodes):
                del self.holds[i]
                e.start(run, pool, nodes, charged=run.job.allocated,
                        detail=("charged" if run.job.allocated else "unallocated") + " held hole")
        self.held = {n for _, nodes in self.holds.values() for n in nodes}

    # -- backfill ----------------------------------------------------------------------

    def _level(self, v: JobRun) -> float:
        """Victim level for the lanes: a requester of ratio r may preempt v if > r."""
        return victim_level(self.engine, self.ratio, v)

    def _cost(self, v: JobRun) -> float:
        # Free work of projects above their owed share first, then free work inside its
        # project's share (it is what that project is owed), then charged work of the
        # lowest standing; within a tier the least work lost (a non-resumable job loses
        # its progress: on a week of ai2-like 8 such preemptions by the lanes lost as
        # many GPU-hours as 800 of resumable work), then the fewest GPUs.
        if not v.charged:
            tier = 0.0 if v.job.project not in self.inside else 1e11
        else:
            tier = 1e12 - min(self.ratio[v.job.project], 1e3) * 1e8
        lost_gpu_h = 0.0 if v.job.resumable else v.done_work(self.engine.now) * v.job.gpus / 3600
        return tier + min(lost_gpu_h, 5e4) * 1e3 + v.job.gpus

    def _rank_free_victims(self) -> None:
        """Which projects run within their owed share once the slice's plan is applied:
        their free work is the last free work the lanes displace."""
        e = self.engine
        running: dict[str, float] = {}
        for r in e.running.values():
            running[r.job.project] = running.get(r.job.project, 0.0) + r.job.gpus * r.rate
        inside = {p for p, owed in self.owed.items() if running.get(p, 0.0) <= owed + 1e-9}
        if inside != self.inside:
            self.inside = inside
            self.victims.invalidate()

    def _spared(self, v: JobRun) -> bool:
        """Work the lanes leave alone: restarted a moment ago (:meth:`_young`), or
        non-resumable with more than that much progress to lose. The plan weighs such a
        loss against what the GPUs would do; a lane only sees a job waiting (on a week
        of ai2-like, 10 lane preemptions of such work lost 1,188 GPU-hours, as much as
        1,600 of resumable work)."""
        if not v.job.resumable and v.done_work(self.engine.now) > self.spare_s:
            return True
        return self._young(v)

    def _young(self, v: JobRun) -> bool:
        """Restarted less than a slice ago (at least a quarter hour,
        :func:`models.spare_seconds`): the lanes leave it alone, so no job is preempted
        twice within a slice (a first start may be displaced at once). A pass is asked
        for when the first spared job becomes a victim again."""
        now = self.engine.now
        # One expression for the end of the spared time, compared and woken at: with
        # float times, ``now - run_start < slice`` can hold at ``run_start + slice``
        # itself, and the wake for that instant then repeats forever.
        until = v.run_start + self.spare_s
        if v.restarts > 0 and now < until:
            self._wake_once("young", until)
            return True
        return False

    def _wake_once(self, kind: str, at: float) -> None:
        """Ask for a pass at ``at`` unless a wake-up of this kind is already due before
        it: only the first such instant needs one, and its pass asks again for the next."""
        pending = self._wakes.get(kind, -math.inf)
        if at < pending or pending <= self.engine.now:
            self._wakes[kind] = at
            self.engine.wake_at(at, ("spare", 0))

    def _displace(self, run: JobRun, threshold: float, why: str,
                  spare: Callable[[JobRun], bool] | None = None) -> bool:
        """Start ``run`` in the room of the cheapest eligible victims, off held nodes and
        never evicting work restarted less than a slice ago; the victims leave this
        slice's plan (the next plan decides when they run again)."""
        e = self.engine
        fenced = e.fenced(_contract(run, run.job.allocated))
        found = self.victims.find(run, threshold, exclude=self.held | fenced if fenced else self.held,
                                  spare=spare or self._spared)
        if found is None:
            return False
        freed = tuple(n for v in found[1] for n in v.nodes)
        for v in found[1]:
            e.preempt(v, f"{why}: {run.job.id} ({run.job.project})")
            self.want.pop(v.job.id, None)
        placed = self._place_off_held(run, prefer=freed)
        if placed is None:
            return False
        e.start(run, *placed, charged=run.job.allocated,
                detail=("charged" if run.job.allocated else "unallocated") + f" {why}")
        return True

    def _place_off_held(
        self, run: JobRun, prefer: tuple[str, ...] = ()
    ) -> tuple[Pool, tuple[str, ...]] | None:
        """A hole for ``run`` off held nodes, on the ``prefer`` nodes when they fit."""
        e = self.engine
        contract = _contract(run, run.job.allocated)
        for pool, ps in candidate_pools(e, run.job):
            nodes = place_gang(self._open_off_held(ps, contract), ps.size, run.job.gpus, prefer)
            if nodes is not None:
                return pool, nodes
        return None

    def _fast_lane(self) -> None:
        """Funded debug jobs between plans: idle GPUs first, then the cheapest victims
        of a higher ratio than the job's project; once a job has waited a slice (at
        least a quarter hour, :func:`models.spare_seconds`), resumable work past its
        contract of any project, but no multi-node gang among the victims that opens
        (a debug job would idle most of its nodes)."""
        e = self.engine
        waiting = [r for r in self.fast.values() if r.status == "queued"]
        self.fast = {r.index: r for r in waiting}
        self.fast_since = {i: t for i, t in self.fast_since.items() if i in self.fast}
        if not waiting:
            return
        waiting.sort(key=lambda r: (self.ratio[r.job.project], within_project(r), r.index))
        for run in waiting:
            if run.job.id in self.want:
                continue  # the plan starts it on its nodes
            own = self.ratio[run.job.project]
            due = self.fast_since.get(run.index, e.now) + self.spare_s
            waited = e.now >= due

            def spare(v: JobRun, own: float = own) -> bool:
                return (v.charged and len(v.nodes) > 1 and self.ratio[v.job.project] <= own) or self._spared(v)

            # Idle GPUs first, including those only a planned start of free work wants
            # (it can wait; a debug job cannot), then the cheapest victims.
            if self._backfill(run, fast=True) or (
                e.preemptible_gpus and (
                    self._displace(run, -math.inf, "fast lane", spare=spare) if waited
                    else self._displace(run, own, "fast lane"))
            ):
                del self.fast[run.index]
            elif not waited:
                self._wake_once("fast", due)  # its wider victims open then

    def _funded_lane(self) -> None:
        """Between plans, funded work of a project running below its owed share may
        displace free work of projects running above theirs (never free work inside its
        project's share, which is what that project is owed), instead of waiting next to
        it for the next plan."""
        e = self.engine
        running: dict[str, float] = {}
        free_work = False
        for r in e.running.values():
            running[r.job.project] = running.get(r.job.project, 0.0) + r.job.gpus * r.rate
            free_work = free_work or not r.charged
        if not free_work:
            return
        # Owed shares now (arrivals since the plan count), and who runs within them.
        owed = e.owed_gpus()
        inside = {p for p in e.projects if running.get(p, 0.0) <= owed.get(p, 0.0) + 1e-9}

        def spare(v: JobRun) -> bool:
            return v.charged or v.job.project in inside or self._spared(v)

        dead: set[Shape] = set()
        skip: set[int] = set()
        groups = self.funded_queue.groups  # live: a preempted victim may queue again
        for project in self.order:
            if not groups.get(project) or running.get(project, 0.0) >= owed.get(project, 0.0):
                continue
            # The shapes this project may not try: those no victim search found room for
            # (for every later project too), and those that would take it above its owed
            # share. A queued job's H100-equivalent demand is its shape's, and the
            # project's running work only grows here, so once one job of a shape is over,
            # every later one is (walked one by one: 126,792 such jobs in a day of
            # ai2-like with 0.5 s plans, against 6,390 tried).
            here = set(dead)
            for shape, run in self.funded_queue.iter_group(e, project, here, skip):
                if running.get(project, 0.0) + e.job_h100(run) > owed.get(project, 0.0) + 1e-9:
                    here.add(shape)
                elif run.job.id in self.planned or run.index in self.fast:
                    skip.add(run.index)
                elif self._displace(run, self.ratio[project], "funded lane", spare=spare):
                    running[project] = running.get(project, 0.0) + run.job.gpus * (run.rate or 1.0)
                else:
                    dead.add(shape)
                    here.add(shape)
                if e.preemptible_gpus == 0:
                    return

    def schedule(self, now: float, dirty: bool, new: list[JobRun]) -> None:
        e = self.engine
        if self.holds:
            self._start_holds()
        if self.fast:
            self._fast_lane()
        if dirty:
            # Planned starts that found no room at the slice boundary may fit now.
            for job_id, a in list(self.want.items()):
                run = e.by_id.get(job_id)
                if run is not None and run.status == "queued":
                    self._start_planned(run, a)
            if self._stale and self.plan is not None:
                # A planned job started (maybe on other nodes): its reservation is gone.
                self._reserve(self._current_slice())
            if self.early_starts and self.later and e.cluster.total_free > 0:
                self._start_early()
        if not dirty and not new:
            return
        if e.cluster.total_free > 0:
            # Greedy backfill: fair-share order, idle GPUs the plan does not need, no
            # preemption.
            dead: set[Shape] = set()
            skip: set[int] = set()
            groups = self.queue.groups
            for project in self.order:
                if not groups.get(project):
                    continue  # nothing queued (what iter_group would find first)
                for shape, run in self.queue.iter_group(e, project, dead, skip):
                    if run.job.id in self.want:
                        skip.add(run.index)  # planned now: only on its planned nodes
                    elif not self._backfill(run):
                        dead.add(shape)
                    if e.cluster.total_free == 0:
                        break
                if e.cluster.total_free == 0:
                    break
        if self.funded_lane and e.preemptible_gpus:
            self._funded_lane()

    def _unreserved(
        self, free: Mapping[str, int], run: JobRun, keeps: FastLaneKeeps | None = None,
        until: float | None = None,
    ) -> dict[str, int]:
        """Free GPUs ``run`` may backfill: those no planned start needs before the plan
        could take them back from it (or before ``until``, when given).

        Unallocated work may be preempted at any time, but a start the plan makes within
        the next slice would evict it again minutes later and it would pay the restart
        overhead for nothing (measured: free 32-GPU gangs restarted 20 times a day), so it
        uses GPUs not needed within a slice; resumable funded work only GPUs not needed
        before its minimum runtime ends; non-resumable funded work (which the plan never
        preempts) none that are reserved. In the fast lane (``keeps`` given), a debug job
        also takes GPUs wanted only after its declared end, and those of the planned
        starts ``keeps`` does not keep: a debug job is short, the start it delays waits
        for it to end, or takes other room.
        """
        fast = keeps is not None
        if keeps == "none":
            return dict(free)
        job = run.job
        now = self.engine.now
        if until is None:
            if not job.allocated:
                until = now + self.slice_len
            else:
                until = now + job.min_runtime if job.resumable else math.inf
            if fast and math.isfinite(run.remaining):
                until = min(until, now + run.remaining)
        out: dict[str, int] = {}
        res = self.reserved
        for n, f in free.items():
            need = self._reserved_gpus(n, until, keeps) if n in res else 0
            if f > need:
                out[n] = f - need
        return out

    def _backfill(self, run: JobRun, fast: bool = False) -> bool:
        """Start ``run`` on idle GPUs it may take (:meth:`_unreserved`). In the fast lane,
        a debug job takes GPUs of planned starts ``fast_lane_keeps`` leaves to it only
        when no pool has room without them: each start it delays idles the rest of its
        reservation until the debug job ends."""
        e = self.engine
        job = run.job
        passes: tuple[FastLaneKeeps | None, ...] = (None,)
        if fast:
            passes = ("funded",) if self.fast_lane_keeps == "funded" else ("funded", self.fast_lane_keeps)
        for keeps in passes:
            for pool, ps in candidate_pools(e, job):
                free = self._open_off_held(ps, _contract(run, job.allocated))
                if self.reserved:
                    free = self._unreserved(free, run, keeps)
                nodes = place_gang(free, ps.size, job.gpus)
                if nodes is not None:
                    e.start(run, pool, nodes, charged=job.allocated,
                            detail=("charged" if job.allocated else "unallocated") + " backfill")
                    return True
            if not self.reserved:
                break
        return False


def _contract(run: JobRun, charged: bool) -> float:
    """Seconds a start of ``run`` keeps clear of maintenance windows
    (:func:`models.drain_guard`): its minimum runtime when charged (here unallocated
    work may be preempted at any time), and funded non-resumable work's declared
    remaining time, as the plan lets it run out."""
    return drain_guard(run.job, charged, run.remaining)


def _planned_detail(a: Any, run: JobRun) -> str:
    """The start event's detail of a job started as the plan's assignment ``a`` says."""
    return "charged" if a.charged and run.job.allocated else "unallocated"
