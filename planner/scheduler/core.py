"""The one scheduler: cluster state, a policy, and the events that drive them.

A :class:`Scheduler` is what the simulator and ``gpuplan run`` both run. A *driver* owns
the clock and the world: it tells the scheduler what happened (a job arrived, a job
finished, a maintenance window opened or closed) through :meth:`Scheduler.step`, and the
scheduler fires its own timers (contract ends, ledger charge points, the policy's epoch
and slice boundaries), lets the policy decide, and carries the decisions out on its
model of the cluster: start on nodes, preempt, hold nodes for a gang, release a hold.

- The simulator's driver (:mod:`planner.simulator.engine`) jumps simulated time from one
  event to the next; it knows each job's true duration and tells the scheduler when a
  started job finishes.
- The live driver (:mod:`planner.control`) polls an executor, turns what changed into
  events, and makes the cluster run what the scheduler's model runs.

Every scheduling rule lives in the policies (:mod:`planner.scheduler.legacy`,
:mod:`~planner.scheduler.fairshare`, :mod:`~planner.scheduler.mip`) and every state
change here, so both drivers make the same decisions from the same events. The usage
ledger is written here too, at charge points one slice apart, through
:class:`planner.budgets.UsageMeter`: one implementation of charging (urgent work at
``policy.urgent_charge``) and of owed hours (:meth:`Scheduler.owed_gpus`).

Events at one instant are applied in a fixed order (completions first, so a pass at
``t`` sees every GPU freed at ``t``), then the policy makes one scheduling pass.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from models import Job, JobState, Plan, Pool, ProjectStanding, Scenario, Snapshot
from planner.budgets import UsageMeter
from planner.fairshare import job_rate, org_at, standings, water_fill, window_ratios
from planner.ledger import Ledger
from planner.placement import holds_up_drain, nodes_needed, per_node_gpus, place_gang
from planner.scheduler.state import ClusterState, JobRun, PoolState, wait_class
from planner.snapshot import build_snapshot, maintenance_nodes, maintenance_windows

# Event kinds, in the order they are applied at one instant: free GPUs first.
FINISH, DRAIN_END, DRAIN_START, CONTRACT, SUBMIT, CHARGE, WAKE = range(7)
EVENT_NAMES = ("finish", "drain_end", "drain_start", "contract", "submit", "charge", "wake")

EVENT_COLUMNS = ("t", "event", "job", "project", "pool", "nodes", "gpus", "per_node", "detail")
"""Columns of :attr:`Scheduler.log`, the event and decision log."""

DECISIONS = ("start", "resume", "preempt", "hold", "release")
"""The log's events that are decisions (the rest are what happened to the scheduler)."""


class Event(NamedTuple):
    """Something a driver tells the scheduler happened.

    ``kind`` is :data:`FINISH` (payload: the job's id, or ``(index, token)`` from the
    simulator so a stale completion of an earlier run is ignored), :data:`SUBMIT` (the
    job's id), :data:`DRAIN_START`/:data:`DRAIN_END` (payload ``(tag, node names)``).
    """

    kind: int
    payload: Any


class Policy(Protocol):
    """A scheduling policy the scheduler drives.

    :meth:`attach` is called once; :meth:`enqueue` whenever a job joins the queue
    (arrival, or requeue after preemption); :meth:`on_wake` for the wake-ups the policy
    asked for with :meth:`Scheduler.wake_at`; :meth:`on_contract_end` when a running
    job's minimum runtime passes; :meth:`on_drain` when a node starts draining;
    :meth:`on_finish` after a job completes; :meth:`schedule` once after all events of an
    instant. ``dirty`` tells the pass whether GPUs were freed or victims appeared since
    the last pass (arrivals alone only need the new jobs tried).
    """

    name: str

    def attach(self, engine: Scheduler) -> None: ...

    def enqueue(self, run: JobRun) -> None: ...

    def on_wake(self, tag: Any, now: float) -> None: ...

    def on_contract_end(self, run: JobRun, now: float) -> None: ...

    def on_drain(self, node: str, now: float) -> None: ...

    def on_finish(self, run: JobRun) -> None: ...

    def schedule(self, now: float, dirty: bool, new: list[JobRun]) -> None: ...

    def extra_summary(self) -> dict[str, Any]: ...


@dataclass
class Accounting:
    """Time integrals kept while the clock advances (hour bins from time 0)."""

    busy_gpu_s: list[float] = field(default_factory=list)
    available_gpu_s: list[float] = field(default_factory=list)
    available_h100_s: list[float] = field(default_factory=list)
    # (job index, start, end, H100-eq GPUs, charged) of every finished run segment
    segments: list[tuple[int, float, float, float, bool]] = field(default_factory=list)


class Scheduler:
    """One policy scheduling one scenario's cluster, from time ``start`` on.

    Parameters
    ----------
    scenario
        Clusters, org, policy; its jobs are registered up front (in file order, so job
        indices and every tie-break are the same for both drivers).
    policy
        The decision rules (:func:`planner.scheduler.make_policy`).
    ledger
        Where usage is recorded and standings are read from; a new in-memory one when
        not given.
    start
        Scenario time the scheduler starts at.
    charged_until
        Where the ledger's records end, when before ``start`` (a restarted live run):
        the first charge covers ``[charged_until, ...)`` so jobs found running are
        charged for the time no scheduler watched them.
    jobs
        Only these of the scenario's jobs (default: all).
    """

    def __init__(
        self,
        scenario: Scenario,
        policy: Policy,
        *,
        ledger: Ledger | None = None,
        start: float = 0.0,
        charged_until: float | None = None,
        jobs: Iterable[Job] | None = None,
    ) -> None:
        self.scenario = scenario
        self.policy = policy
        self.now = start
        self.cluster = ClusterState(scenario)
        self.runs: list[JobRun] = []
        self.by_id: dict[str, JobRun] = {}
        for job in scenario.jobs if jobs is None else jobs:
            self.add_job(job)
        self.running: dict[int, JobRun] = {}
        self.log: list[tuple[Any, ...]] = []
        self.acct = Accounting()
        self.projects = list(scenario.projects)
        self.demand_h100: dict[str, float] = {p: 0.0 for p in self.projects}
        self.drain_windows: list[dict[str, Any]] = []
        self.touched: set[str] = set()  # nodes whose jobs changed (for VictimIndex)
        self.preemptible_gpus = 0  # running GPUs whose contract has passed (cheap pass gate)
        # The same GPUs per pool, by (project, charged, resumable): what a policy's victim
        # rule may take there, bounded without a node scan (queues.victims_may_open).
        self.preemptible_by: dict[Pool, dict[tuple[str, bool, bool], int]] = {}
        self.charge_hooks: list[Callable[[float], None]] = []
        self.start_hooks: list[Callable[[JobRun], None]] = []
        self.ledger = ledger if ledger is not None else Ledger(":memory:")
        self.meter = UsageMeter(scenario.policy)
        self.charged_from = start if charged_until is None else min(charged_until, start)
        self._timers: list[tuple[float, int, int, Any]] = []
        self._seq = 0
        self._busy_nd = 0.0  # counted GPUs running on non-drained nodes
        self._node_busy: dict[str, float] = {n: 0.0 for n in self.cluster.nodes}
        self._windows_on: dict[str, int] = {}  # maintenance windows open on each node
        # Every maintenance window's start and node, in time order (for :meth:`fenced`).
        self._window_starts = sorted(
            (s, n) for n, spans in maintenance_windows(scenario).items() for s, _ in spans
        )
        self._fence_at = 0  # the first of them not yet opened
        self._fence: dict[float, frozenset[str]] = {}  # by contract, at ``_fence_now``
        self._fence_now = math.nan
        self._last_t = start
        self.charge_every = scenario.policy.slice_length
        self._push(self.charge_every * (math.floor(start / self.charge_every) + 1), CHARGE, None)
        policy.attach(self)

    # -- jobs and rates ----------------------------------------------------------------

    def add_job(self, job: Job) -> JobRun:
        """Register ``job`` (not yet submitted); its index is its registration order."""
        if job.id in self.by_id:
            raise ValueError(f"job {job.id!r} is registered twice")
        run = JobRun(job=job, index=len(self.runs), cls=wait_class(job))
        self.runs.append(run)
        self.by_id[job.id] = run
        return run

    def rate_of(self, pool: Pool) -> float:
        """H100-equivalent rate of the pool's GPU type."""
        return self.scenario.rate(pool.gpu_type)

    def job_h100(self, run: JobRun) -> float:
        """The job's demand in H100-equivalents (at its pool's rate, or the cheapest
        allowed GPU type's while it waits: the fair-share module's rule)."""
        if run.pool is not None:
            return run.job.gpus * self.rate_of(run.pool)
        return run.job.gpus * float(job_rate(self.scenario, run.job))

    def past_contract(self, run: JobRun) -> bool:
        """Whether the running job's minimum runtime has passed (it may be moved off)."""
        return self.now >= run.contract_end

    def fenced(self, contract: float) -> frozenset[str]:
        """Nodes a start protected for ``contract`` seconds may not take now: their
        maintenance window opens before the contract would end
        (:func:`planner.placement.holds_up_drain`), and the drain would wait for it."""
        starts = self._window_starts
        i = self._fence_at
        while i < len(starts) and starts[i][0] <= self.now:
            i += 1
        self._fence_at = i
        if (contract <= 0 or i == len(starts) or starts[i][0] >= self.now + contract
                or not self.scenario.policy.maintenance_fence):
            return frozenset()  # the common case: no window opens within the contract
        if self._fence_now != self.now:
            self._fence_now = self.now
            self._fence.clear()
        found = self._fence.get(contract)
        if found is None:
            names = set()
            for s, n in starts[i:]:
                if not holds_up_drain(s, self.now, contract):
                    break  # in time order: every later window opens after the contract
                names.add(n)
            found = self._fence[contract] = frozenset(names)
        return found

    def open_free(self, ps: PoolState, contract: float) -> Mapping[str, int]:
        """The pool's free GPUs that a start protected for ``contract`` seconds may take
        now (``ps.open_free`` less :meth:`fenced` nodes)."""
        fenced = self.fenced(contract)
        if not fenced:
            return ps.open_free
        return {n: f for n, f in ps.open_free.items() if n not in fenced}

    # -- fair share: the one place standings and owed shares are computed ----------------

    def demand(self) -> dict[str, float]:
        """H100-equivalent GPUs each project's queued and running work wants now."""
        return {p: d for p, d in self.demand_h100.items() if d > 1e-9}

    def owed_gpus(self, at: float | None = None) -> dict[str, float]:
        """Each project's owed H100-equivalent GPUs: the org in force at ``at`` (default
        now) water-filled over the demand now and the capacity not drained now."""
        org = org_at(self.scenario, self.now if at is None else at)
        return water_fill(org, self.demand(), self.cluster.available_h100)

    def _owed_from_submitted(self, at: float) -> dict[str, float]:
        """:meth:`owed_gpus` at ``at`` over the queued and running work submitted by then."""
        demand: dict[str, float] = {}
        for run in self.runs:
            if run.status in ("queued", "running") and run.job.submit <= at:
                demand[run.job.project] = demand.get(run.job.project, 0.0) + run.h100_demand
        return water_fill(org_at(self.scenario, at), demand, self.cluster.available_h100)

    def standings(self) -> dict[str, ProjectStanding]:
        """Every project's standing now, from the ledger (budgets are shares of the whole
        cluster, drained nodes included; owed shares of what is not drained)."""
        return standings(
            org_at(self.scenario, self.now), self.demand(), self.cluster.available_h100,
            self.ledger, self.now, self.scenario.policy,
            budget_capacity=self.cluster.capacity_h100,
        )

    def ratios(self) -> dict[str, float]:
        """Each project's fair-share ratio now (the ``ratio`` of :meth:`standings`;
        projects left out have ratio 0)."""
        return window_ratios(self.ledger, self.now, self.scenario.policy)

    def snapshot(
        self, standing: dict[str, ProjectStanding] | None = None
    ) -> Snapshot:
        """The frozen snapshot of the queue and the running jobs now, for the planner."""
        now = self.now
        jobs: list[JobState] = []
        for run in self.runs:
            if run.status == "queued":
                jobs.append(JobState(job=run.job, status="queued", progress=run.progress,
                                     restarts=run.restarts))
            elif run.status == "running":
                assert run.pool is not None
                jobs.append(JobState(
                    job=run.job, status="running", progress=run.done_work(now),
                    run_start=run.run_start, cluster=run.pool.cluster,
                    gpu_type=run.pool.gpu_type, nodes=run.nodes, charged=run.charged,
                    restarts=run.restarts,
                ))
        return build_snapshot(self.scenario, now, jobs,
                              standing if standing is not None else self.standings())

    # -- timers ------------------------------------------------------------------------

    def _push(self, t: float, kind: int, payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self._timers, (t, kind, self._seq, payload))

    def wake_at(self, t: float, tag: Any) -> None:
        """Ask for :meth:`Policy.on_wake` at time ``t``."""
        self._push(t, WAKE, tag)

    def next_timer(self) -> float:
        """When the scheduler next needs a :meth:`step` with no event (``inf``: never)."""
        return self._timers[0][0] if self._timers else math.inf

    # -- the log -----------------------------------------------------------------------

    def record(self, event: str, run: JobRun | None, detail: str = "", nodes: Iterable[str] = ()) -> None:
        """Append a row to the event log (:data:`EVENT_COLUMNS`)."""
        if run is None:
            self.log.append((self.now, event, "", "", "", ",".join(nodes), 0, 0, detail))
            return
        pool = str(run.pool) if run.pool is not None else ""
        where = ",".join(nodes) if nodes else ",".join(run.nodes)
        self.log.append(
            (self.now, event, run.job.id, run.job.project, pool, where, run.job.gpus,
             run.per_node, detail)
        )

    # -- the step ----------------------------------------------------------------------

    def step(self, now: float, events: Sequence[Event] = ()) -> bool:
        """Apply ``events`` and the timers due by ``now``, then one scheduling pass.

        Returns whether anything happened (no event and no due timer: no pass, so a
        driver that polls often makes the same decisions as one that only wakes for
        events).
        """
        if now < self.now:
            raise ValueError(f"time runs backwards: step at {now} after {self.now}")
        items: list[tuple[int, int, Any]] = [(e.kind, i, e.payload) for i, e in enumerate(events)]
        timers = self._timers
        while timers and timers[0][0] <= now:
            _, kind, seq, payload = heapq.heappop(timers)
            items.append((kind, len(events) + seq, payload))
        if not items:
            return False
        items.sort(key=lambda x: (x[0], x[1]))
        self._advance(now)
        self.now = now
        dirty = False
        new: list[JobRun] = []
        for kind, _, payload in items:
            if kind == FINISH:
                run = self._finished_run(payload)
                if run is not None:
                    self._finish(run)
                    dirty = True
            elif kind == SUBMIT:
                run = self.by_id[payload]
                if run.status == "future":
                    self._submit(run)
                    new.append(run)
            elif kind == CONTRACT:
                run = self.runs[payload[0]]
                if run.status == "running" and run.token == payload[1] and self.past_contract(run):
                    self._count_preemptible(run)
                    self.touched.update(run.nodes)
                    self.policy.on_contract_end(run, now)
                    dirty = True
            elif kind == DRAIN_START:
                self._drain_start(*payload)
                dirty = True
            elif kind == DRAIN_END:
                self._drain_end(*payload)
                dirty = True
            elif kind == CHARGE:
                self.charge()
                self._push(now + self.charge_every, CHARGE, None)
            elif kind == WAKE:
                self.policy.on_wake(payload, now)
                dirty = True
        self.policy.schedule(now, dirty, new)
        self._check_drains()
        return True

    def _finished_run(self, payload: Any) -> JobRun | None:
        if isinstance(payload, tuple):
            run = self.runs[payload[0]]
            return run if run.status == "running" and run.token == payload[1] else None
        found = self.by_id.get(payload)
        return found if found is not None and found.status == "running" else None

    def _submit(self, run: JobRun) -> None:
        run.status = "queued"
        # Its arrival: a restarted live run takes the jobs already waiting in again, and
        # their waits count from when they came, not from the restart.
        run.queued_at = min(self.now, run.job.submit)
        run.h100_demand = self.job_h100(run)
        self.demand_h100[run.job.project] += run.h100_demand
        self.record("submit", run)
        self.policy.enqueue(run)

    # -- accounting ----------------------------------------------------------------------

    def _advance(self, t: float) -> None:
        """Integrate busy and available GPU time from the last instant up to ``t``."""
        t0 = self._last_t
        if t <= t0:
            return
        a = self.acct
        busy, avail, avail_h = self._busy_nd, self.cluster.available_gpus, self.cluster.available_h100
        while t0 < t:
            h = max(int(t0 // 3600), 0)
            t1 = min(t, (h + 1) * 3600.0)
            while len(a.busy_gpu_s) <= h:
                a.busy_gpu_s.append(0.0)
                a.available_gpu_s.append(0.0)
                a.available_h100_s.append(0.0)
            dt = t1 - t0
            a.busy_gpu_s[h] += busy * dt
            a.available_gpu_s[h] += avail * dt
            a.available_h100_s[h] += avail_h * dt
            t0 = t1
        self._last_t = t

    def _meter_run(self, run: JobRun, until: float) -> None:
        """Add ``run``'s usage since the last charge point (or its start) to the meter."""
        since = max(run.run_start, self.charged_from)
        if until > since:
            self.meter.add(run.job.project, run.job.gpus, run.rate, until - since,
                           urgent=run.job.urgent, allocated=run.charged)

    def charge(self) -> None:
        """Write ``[charged_from, now)``'s delivered, charged and owed GPU-hours to the
        ledger (every charge point, and when a live run stops)."""
        start, end = self.charged_from, self.now
        if end <= start:
            return
        for run in self.running.values():
            self._meter_run(run, end)
        if end - start > self.charge_every + 1e-6:
            # Time no scheduler watched (a live run restarted after an outage): owed slice
            # by slice, from the work submitted by then; a job that arrived during the
            # outage is not owed for the time before it came.
            t = start
            while t < end - 1e-9:
                t1 = min(t + self.charge_every, end)
                self.meter.owe(self._owed_from_submitted(t), t1 - t)
                t = t1
        else:
            self.meter.owe(self.owed_gpus(at=start), end - start)
        self.ledger.record(self.meter.flush(start, end))
        self.charged_from = end
        for hook in self.charge_hooks:
            hook(end)

    def flush(self, now: float) -> None:
        """Charge everything up to ``now`` (a live run that stops records its last
        minutes; the next run goes on from there)."""
        self._advance(now)
        self.now = max(self.now, now)
        self.charge()

    # -- state changes (the only places that mutate jobs and nodes) ----------------------

    def start(
        self,
        run: JobRun,
        pool: Pool,
        nodes: tuple[str, ...],
        *,
        charged: bool = True,
        protected: bool = False,
        detail: str = "",
    ) -> None:
        """Start (or resume) ``run`` on ``nodes`` of ``pool`` now."""
        assert run.status == "queued", (run.job.id, run.status)
        self._occupy(run, pool, nodes, run_start=self.now, charged=charged, protected=protected)
        if math.isnan(run.first_start):
            run.first_start = self.now
        else:
            run.restarts += 1
        self.record("start" if run.restarts == 0 else "resume", run, detail)
        for hook in self.start_hooks:
            hook(run)

    def adopt(self, run: JobRun, pool: Pool, nodes: tuple[str, ...], run_start: float,
              *, restarts: int = 0, charged: bool = True) -> None:
        """Take a job found running (a restarted live run) into the model as it is.

        Its contract counts from ``run_start``; it is charged when funded, unless
        ``charged`` is false (the run was started as free work and stays so).
        """
        if run.status == "future":
            self._submit(run)
        self._occupy(run, pool, nodes, run_start=run_start, charged=charged, protected=False)
        run.first_start = run_start if math.isnan(run.first_start) else run.first_start
        run.restarts = restarts
        self.record("adopt", run, f"running since {run_start:.0f}")
        if run.job.min_runtime > 0 and self.past_contract(run):
            self._count_preemptible(run)

    def started_at(self, run: JobRun, t: float) -> None:
        """The cluster reports ``run`` began at ``t``, a moment after the decision to start
        it: its contract and its charging count from there, as the executor's do."""
        if run.status != "running" or not run.run_start < t <= self.now:
            return
        if run.job.min_runtime > 0 and self.past_contract(run):
            return  # already counted as preemptible; leave it so
        if run.first_start == run.run_start:
            run.first_start = t
        run.run_start = t
        if run.job.min_runtime > 0:
            # The timer at the old contract end finds the contract not yet passed.
            self._push(run.contract_end, CONTRACT, (run.index, run.token))

    def _occupy(self, run: JobRun, pool: Pool, nodes: tuple[str, ...], *, run_start: float,
                charged: bool, protected: bool) -> None:
        for n in nodes:
            if n in self.cluster.drained:
                raise RuntimeError(f"job {run.job.id} placed on drained node {n}")
        size = self.cluster.nodes[nodes[0]].size
        per_node = per_node_gpus(run.job.gpus, nodes, size)
        if len(nodes) != nodes_needed(run.job.gpus, size):
            raise RuntimeError(f"job {run.job.id}: {len(nodes)} nodes for a gang of {run.job.gpus}")
        self.cluster.take(nodes, per_node, run.index)
        self.touched.update(nodes)
        counted = run.job.gpus / len(nodes)
        for n in nodes:
            self._node_busy[n] += counted
            if n not in self.cluster.drained:
                self._busy_nd += counted
        run.status = "running"
        run.pool = pool
        run.nodes = nodes
        run.per_node = per_node
        run.rate = self.rate_of(pool)
        run.run_start = run_start
        run.charged = charged and run.job.allocated
        run.protected = protected
        run.token += 1
        self.running[run.index] = run
        # Demand follows the GPU type the job actually got.
        self.demand_h100[run.job.project] += run.job.gpus * run.rate - run.h100_demand
        run.h100_demand = run.job.gpus * run.rate
        if run.job.min_runtime > 0:
            if run.contract_end > self.now:
                self._push(run.contract_end, CONTRACT, (run.index, run.token))
        else:
            self._count_preemptible(run)

    def _count_preemptible(self, run: JobRun) -> None:
        """Put the running ``run``'s GPUs in :attr:`preemptible_gpus` (its contract passed)."""
        if not run.counted:
            run.counted = True
            self.preemptible_gpus += run.job.gpus
            assert run.pool is not None
            by = self.preemptible_by.setdefault(run.pool, {})
            key = (run.job.project, run.charged, run.job.resumable)
            by[key] = by.get(key, 0) + run.job.gpus

    def _stop(self, run: JobRun, ran: bool = True) -> None:
        assert run.status == "running"
        if ran:
            self._meter_run(run, self.now)
        self.cluster.give(run.nodes, run.per_node, run.index)
        self.touched.update(run.nodes)
        counted = run.job.gpus / len(run.nodes)
        for n in run.nodes:
            self._node_busy[n] -= counted
            if n not in self.cluster.drained:
                self._busy_nd -= counted
        if ran:
            self.acct.segments.append(
                (run.index, run.run_start, self.now, run.job.gpus * run.rate, run.charged)
            )
        # Only what was counted: a run that ends at the instant its contract does stops
        # (finish events come first) before its contract timer would have counted it.
        if run.counted:
            run.counted = False
            self.preemptible_gpus -= run.job.gpus
            assert run.pool is not None
            by = self.preemptible_by[run.pool]
            key = (run.job.project, run.charged, run.job.resumable)
            left = by[key] - run.job.gpus
            if left:
                by[key] = left
            else:
                del by[key]
        del self.running[run.index]
        run.token += 1

    def preempt(self, run: JobRun, reason: str) -> None:
        """Stop ``run`` and requeue it: resumable work keeps its progress less the overhead."""
        done = run.done_work(self.now)
        self.record("preempt", run, reason)
        self._stop(run)
        run.preemptions += 1
        if run.job.resumable:
            overhead = self.scenario.policy.restart_overhead
            lost = min(done, overhead)
            run.progress = done - lost
        else:
            lost = done
            run.progress = 0.0
        run.lost_h100_s += lost * run.job.gpus * run.rate
        run.status = "queued"
        run.pool = None
        run.nodes = ()
        self.record("requeue", run, reason)
        self.policy.enqueue(run)

    def unstart(self, run: JobRun, reason: str) -> None:
        """Take back a start the cluster refused: the job never ran, so it goes back to
        the queue as it was (no preemption, no progress lost, nothing charged, its start
        and restart counts as before), and the log says ``start_failed``."""
        self.record("start_failed", run, reason)
        self._stop(run, ran=False)
        if run.restarts > 0:
            run.restarts -= 1
        else:
            run.first_start = math.nan
        run.status = "queued"
        run.pool = None
        run.nodes = ()
        self.policy.enqueue(run)

    def _finish(self, run: JobRun) -> None:
        self.record("finish", run)
        self._stop(run)
        run.progress = run.job.duration or run.done_work(self.now)
        run.status = "done"
        run.end = self.now
        self.demand_h100[run.job.project] -= run.h100_demand
        self.policy.on_finish(run)

    # -- maintenance -------------------------------------------------------------------

    def _drain_start(self, tag: Any, names: tuple[str, ...]) -> None:
        for n in names:
            self._windows_on[n] = self._windows_on.get(n, 0) + 1
            self._busy_nd -= self._node_busy[n] if n not in self.cluster.drained else 0.0
            self.cluster.drain(n)
        # The runs on the nodes at the drain's start: the nodes are free once all have
        # left (work placed there after the window ended does not count).
        blocking = {(i, self.runs[i].token) for n in names for i in self.cluster.jobs_on[n]}
        window = {"index": tag, "start": self.now, "nodes": names, "free_at": math.nan,
                  "blocking": blocking}
        self.drain_windows.append(window)
        self.record("drain_start", None, _tag_text(tag), names)
        for n in names:
            self.policy.on_drain(n, self.now)

    def _drain_end(self, tag: Any, names: tuple[str, ...]) -> None:
        for n in names:
            # A node in two windows that overlap opens only when the last one ends.
            left = self._windows_on.get(n, 0) - 1
            self._windows_on[n] = max(left, 0)
            if left > 0:
                continue
            if n in self.cluster.drained:
                self.cluster.undrain(n)
                self._busy_nd += self._node_busy[n]
        self.record("drain_end", None, _tag_text(tag), names)

    def _check_drains(self) -> None:
        for w in self.drain_windows:
            if not math.isnan(w["free_at"]):
                continue
            w["blocking"] = {(i, tok) for i, tok in w["blocking"] if self.runs[i].token == tok}
            if not w["blocking"]:
                w["free_at"] = self.now
                self.record("drained", None, _tag_text(w["index"]), w["nodes"])

    def finish_only(self, now: float, events: Sequence[Event]) -> None:
        """Apply the completions among ``events`` at ``now``, and nothing else (no timer,
        no scheduling pass): the simulation's last instant, its horizon, where a job that
        ends is done, not cut off, but nothing starts any more."""
        self._advance(now)
        self.now = max(self.now, now)
        for e in events:
            if e.kind == FINISH:
                run = self._finished_run(e.payload)
                if run is not None:
                    self._finish(run)

    def close_books(self, at: float) -> None:
        """Bring the time integrals to ``at`` and close the running segments there (the
        end of a simulation: they end at the horizon, not as completions)."""
        self._advance(at)
        self.now = at
        for run in list(self.running.values()):
            self.acct.segments.append(
                (run.index, run.run_start, at, run.job.gpus * run.rate, run.charged)
            )
        self._check_drains()


def _tag_text(tag: Any) -> str:
    return f"maintenance[{tag}]" if isinstance(tag, int) else str(tag)


def maintenance_events(scenario: Scenario) -> list[tuple[float, Event]]:
    """The scenario's maintenance windows as timed drain events, in window order."""
    out: list[tuple[float, Event]] = []
    for i, (m, names) in enumerate(zip(scenario.maintenance, maintenance_nodes(scenario), strict=True)):
        out.append((m.start, Event(DRAIN_START, (i, names))))
        out.append((m.end, Event(DRAIN_END, (i, names))))
    return out


def candidate_pools(engine: Scheduler, job: Job) -> Iterator[tuple[Pool, PoolState]]:
    """The pools ``job`` may run on that could hold its gang now, in cluster order."""
    for pool, ps, max_size in engine.cluster.allowed_pools(job):
        if ps.can_fit(job.gpus, max_size):
            yield pool, ps


def try_place(
    engine: Scheduler, run: JobRun, prefer: tuple[str, ...] = (), contract: float = 0.0
) -> tuple[Pool, tuple[str, ...]] | None:
    """Nodes for ``run`` in the first allowed pool with a hole of its shape, or ``None``.

    A start that will be protected for ``contract`` seconds keeps off nodes whose
    maintenance opens before then (:meth:`Scheduler.fenced`).
    """
    job = run.job
    gpus = job.gpus
    cl = engine.cluster
    fenced = engine.fenced(contract)
    # Whether a hole exists depends on the shape and the free GPUs alone (``prefer`` only
    # picks among holes): a pass asks again for the same shape (for the next project,
    # funded then unallocated) while no GPU came back (starts in between only take
    # GPUs), and gets the same no; on pools of one node size, so does a bigger gang. A
    # fence only takes holes away, so the memo holds under one, but a fenced search
    # does not write it.
    key = (job.gpu_types, job.clusters)
    memo = cl.no_hole.get(key)
    grown = cl.grown
    if memo is not None and memo[0] == grown and (
        gpus == memo[1] or (gpus > memo[1] and cl.uniform_pools(job))
    ):
        return None
    for pool, ps, max_size in cl.allowed_pools(job):  # candidate_pools, inlined
        if ps.can_fit(gpus, max_size):
            free = engine.open_free(ps, contract) if fenced else ps.open_free  # hot path
            nodes = place_gang(free, ps.size, gpus, prefer)
            if nodes is not None:
                return pool, nodes
    if fenced:
        return None
    if memo is None or memo[0] != grown or gpus < memo[1]:
        cl.no_hole[key] = (grown, gpus)
    return None


def current_plan(policy: Policy) -> Plan | None:
    """The plan ``policy`` executes now (``mip``); ``None`` for the policies without one,
    or before the first plan."""
    plan = getattr(policy, "plan", None)
    return plan if isinstance(plan, Plan) else None


__all__ = [
    "CHARGE", "CONTRACT", "DECISIONS", "DRAIN_END", "DRAIN_START", "EVENT_COLUMNS", "FINISH",
    "SUBMIT", "WAKE", "Accounting", "Event", "Policy", "Scheduler", "candidate_pools",
    "current_plan", "maintenance_events", "try_place",
]
