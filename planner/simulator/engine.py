"""The discrete-event core: a heap of events, jumping straight to the next one.

Events are submissions, completions, contract ends (a running job's minimum runtime
passing), maintenance starts and ends, ledger charge points and the policy's own wake-ups
(epoch and slice boundaries). All events at one instant are applied first, then the
policy makes one scheduling pass. The engine owns every state change (start, preempt,
finish), writes the event log and keeps the accounting that :mod:`metrics` turns into
results; policies only decide.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from models import Job, Pool, Scenario
from planner.placement import nodes_needed, place_gang
from planner.simulator.state import ClusterState, JobRun, PoolState, wait_class

# Event kinds, in the order they are applied at one instant: free GPUs first, so a pass
# at time t sees everything that happened at t.
FINISH, DRAIN_END, DRAIN_START, CONTRACT, SUBMIT, CHARGE, WAKE = range(7)

EVENT_COLUMNS = ("t", "event", "job", "project", "pool", "nodes", "gpus", "per_node", "detail")


class Policy(Protocol):
    """A scheduling policy the engine drives.

    The engine calls :meth:`attach` once, :meth:`enqueue` whenever a job joins the queue
    (submission or requeue after preemption), :meth:`on_wake` for the wake-ups the
    policy asked for with :meth:`Engine.wake_at`, :meth:`on_contract_end` when a running
    job's minimum runtime passes, and :meth:`schedule` once after all events of an
    instant; :meth:`on_finish` after a job completes. ``dirty`` tells the pass whether GPUs were freed or victims appeared since
    the last pass (a submission alone only needs the new jobs tried).
    """

    name: str

    def attach(self, engine: Engine) -> None: ...

    def enqueue(self, run: JobRun) -> None: ...

    def on_wake(self, tag: Any, now: float) -> None: ...

    def on_contract_end(self, run: JobRun, now: float) -> None: ...

    def on_drain(self, node: str, now: float) -> None: ...

    def on_finish(self, run: JobRun) -> None: ...

    def schedule(self, now: float, dirty: bool, new: list[JobRun]) -> None: ...

    def extra_summary(self) -> dict[str, Any]: ...


@dataclass
class Accounting:
    """Time integrals kept while the clock advances (hour bins)."""

    busy_gpu_s: list[float] = field(default_factory=list)
    available_gpu_s: list[float] = field(default_factory=list)
    available_h100_s: list[float] = field(default_factory=list)
    # (job index, start, end, H100-eq GPUs, charged) of every run segment
    segments: list[tuple[int, float, float, float, bool]] = field(default_factory=list)


class Engine:
    """One simulation run of ``policy`` on ``scenario`` up to ``horizon`` seconds."""

    def __init__(
        self,
        scenario: Scenario,
        policy: Policy,
        horizon: float,
        *,
        progress: bool = False,
    ) -> None:
        self.scenario = scenario
        self.policy = policy
        self.horizon = horizon
        self.now = 0.0
        self.cluster = ClusterState(scenario)
        self.runs: list[JobRun] = []
        self.by_id: dict[str, JobRun] = {}
        for i, job in enumerate(scenario.jobs):
            if job.submit >= horizon:
                continue
            if job.duration is None:
                raise ValueError(
                    f"workloads.jobs[{i}] (id {job.id!r}).duration: the simulator needs a duration"
                )
            run = JobRun(job=job, index=len(self.runs), cls=wait_class(job))
            self.runs.append(run)
            self.by_id[job.id] = run
        self.running: dict[int, JobRun] = {}
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = 0
        self.log: list[tuple[Any, ...]] = []
        self.acct = Accounting()
        self._busy_nd = 0.0  # counted GPUs running on non-drained nodes
        self._node_busy: dict[str, float] = {n: 0.0 for n in self.cluster.nodes}
        self._last_t = 0.0
        # Per project: running H100-eq GPUs (allocated, unallocated) and what accrued
        # since the last charge point, for the ledger.
        self.projects = list(scenario.projects)
        self._run_rate: dict[str, list[float]] = {p: [0.0, 0.0, 0.0] for p in self.projects}
        self._accrued: dict[str, list[float]] = {p: [0.0, 0.0, 0.0] for p in self.projects}
        self._rate_t: dict[str, float] = {p: 0.0 for p in self.projects}
        self.demand_h100: dict[str, float] = {p: 0.0 for p in self.projects}
        self.drain_windows: list[dict[str, Any]] = []
        self.progress = progress
        self.touched: set[str] = set()  # nodes whose jobs changed (for VictimIndex)
        self.preemptible_gpus = 0  # running GPUs whose contract has passed (cheap pass gate)
        self.charge_hooks: list[Callable[[float], None]] = []
        from planner.ledger import Ledger

        self.ledger = Ledger(":memory:")

    # -- rates -------------------------------------------------------------------------

    def rate_of(self, pool: Pool) -> float:
        """H100-equivalent rate of the pool's GPU type."""
        return self.scenario.rate(pool.gpu_type)

    def job_h100(self, run: JobRun) -> float:
        """The job's demand in H100-equivalents (at its cheapest allowed GPU type)."""
        return run.job.gpus * self._job_rate(run)

    def _job_rate(self, run: JobRun) -> float:
        if run.pool is not None:
            return self.rate_of(run.pool)
        rate = _demand_rate(self.scenario, run)
        return rate

    # -- event queue -------------------------------------------------------------------

    def push(self, t: float, kind: int, payload: Any) -> None:
        """Schedule an event of ``kind`` at ``t`` (ties: kind order, then FIFO)."""
        self._seq += 1
        heapq.heappush(self._heap, (t, kind, self._seq, payload))

    def wake_at(self, t: float, tag: Any) -> None:
        """Ask for :meth:`Policy.on_wake` at time ``t`` (ignored past the horizon)."""
        if t < self.horizon:
            self.push(t, WAKE, tag)

    def record(self, event: str, run: JobRun | None, detail: str = "", nodes: Iterable[str] = ()) -> None:
        """Append a row to the event log (:data:`EVENT_COLUMNS`)."""
        if run is None:
            self.log.append((self.now, event, "", "", "", ",".join(nodes), 0, 0, detail))
            return
        pool = str(run.pool) if run.pool is not None else ""
        self.log.append(
            (self.now, event, run.job.id, run.job.project, pool, ",".join(run.nodes),
             run.job.gpus, run.per_node, detail)
        )

    # -- clock -------------------------------------------------------------------------

    def _advance(self, t: float) -> None:
        """Integrate busy and available GPU time from the last instant up to ``t``."""
        t0 = self._last_t
        if t <= t0:
            return
        a = self.acct
        busy, avail, avail_h = self._busy_nd, self.cluster.available_gpus, self.cluster.available_h100
        while t0 < t:
            h = int(t0 // 3600)
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

    def _project_rate(self, run: JobRun | None, project: str, sign: float) -> None:
        """Bring the project's accrual up to now, then add (or remove) ``run``'s rate."""
        acc, rate = self._accrued[project], self._run_rate[project]
        dt = self.now - self._rate_t[project]
        if dt > 0:
            for k in range(3):
                acc[k] += rate[k] * dt
        self._rate_t[project] = self.now
        if run is None:
            return
        h100 = run.job.gpus * run.rate
        if run.charged:
            urgent = self.scenario.policy.urgent_charge if run.job.urgent else 1.0
            rate[0] += sign * h100
            rate[1] += sign * h100 * urgent
        else:
            rate[2] += sign * h100

    def _flush_accrued(self) -> dict[str, list[float]]:
        """GPU-hours (allocated, charged, unallocated) per project since the last flush."""
        out: dict[str, list[float]] = {}
        for p in self.projects:
            self._project_rate(None, p, 0.0)
            out[p] = [v / 3600.0 for v in self._accrued[p]]
            self._accrued[p] = [0.0, 0.0, 0.0]
        return out

    def _charge(self, start: float, end: float) -> None:
        """Write the interval's delivered and owed GPU-hours to the ledger."""
        from planner.fairshare import org_at, water_fill
        from planner.ledger import Usage

        accrued = self._flush_accrued()
        hours = (end - start) / 3600.0
        demand = {p: d for p, d in self.demand_h100.items() if d > 1e-9}
        owed = water_fill(org_at(self.scenario, start), demand, self.cluster.available_h100)
        rows = []
        for p in self.projects:
            # Rates are sums of + and - float terms: clamp rounding noise below zero.
            a, c, u = (max(v, 0.0) for v in accrued[p])
            o = owed.get(p, 0.0) * hours
            if a or u or o:
                rows.append(Usage(p, start, end, allocated_gpu_h=a, charged_gpu_h=c,
                                  unallocated_gpu_h=u, owed_gpu_h=o))
        self.ledger.record(rows)
        for hook in self.charge_hooks:
            hook(end)

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
        for n in nodes:
            if n in self.cluster.drained:
                raise RuntimeError(f"job {run.job.id} placed on drained node {n}")
        size = self.cluster.nodes[nodes[0]].size
        per_node = run.job.gpus if len(nodes) == 1 else size
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
        run.run_start = self.now
        run.charged = charged and run.job.allocated
        run.protected = protected
        run.token += 1
        if math.isnan(run.first_start):
            run.first_start = self.now
        else:
            run.restarts += 1
        self.running[run.index] = run
        # Demand follows the GPU type the job actually got.
        self.demand_h100[run.job.project] += run.job.gpus * run.rate - run.h100_demand
        run.h100_demand = run.job.gpus * run.rate
        self._project_rate(run, run.job.project, 1.0)
        self.push(self.now + run.remaining, FINISH, (run.index, run.token))
        if run.job.min_runtime > 0:
            self.push(self.now + run.job.min_runtime, CONTRACT, (run.index, run.token))
        else:
            self.preemptible_gpus += run.job.gpus
        self.record("start" if run.restarts == 0 else "resume", run, detail)

    def _stop(self, run: JobRun) -> None:
        assert run.status == "running"
        self.cluster.give(run.nodes, run.per_node, run.index)
        self.touched.update(run.nodes)
        counted = run.job.gpus / len(run.nodes)
        for n in run.nodes:
            self._node_busy[n] -= counted
            if n not in self.cluster.drained:
                self._busy_nd -= counted
        self._project_rate(run, run.job.project, -1.0)
        self.acct.segments.append(
            (run.index, run.run_start, self.now, run.job.gpus * run.rate, run.charged)
        )
        if self.past_contract(run):
            self.preemptible_gpus -= run.job.gpus
        del self.running[run.index]
        run.token += 1

    def past_contract(self, run: JobRun) -> bool:
        """Whether the running job's minimum runtime has passed (it may be moved off)."""
        return self.now >= run.contract_end

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

    def _finish(self, run: JobRun) -> None:
        self.record("finish", run)
        self._stop(run)
        run.progress = run.job.duration or 0.0
        run.status = "done"
        run.end = self.now
        self.demand_h100[run.job.project] -= run.h100_demand
        self.policy.on_finish(run)

    # -- the loop ----------------------------------------------------------------------

    def run(self) -> None:
        """Replay the workload to the horizon: pop each instant's events, then one pass."""
        sc = self.scenario
        for run in self.runs:
            self.push(run.job.submit, SUBMIT, run.index)
        for i, m in enumerate(sc.maintenance):
            if m.start >= self.horizon:
                continue
            names = _maintenance_nodes(sc, m)
            self.push(m.start, DRAIN_START, (i, names))
            self.push(m.end, DRAIN_END, (i, names))
        charge_every = sc.policy.slice_length
        self.push(charge_every, CHARGE, None)
        self.policy.attach(self)
        bar = None
        if self.progress:
            from tqdm import tqdm

            bar = tqdm(total=round(self.horizon / 3600.0), unit="h", desc=self.policy.name,
                       leave=False, mininterval=0.5)
        shown = 0
        heap = self._heap
        while heap and heap[0][0] < self.horizon:
            t = heap[0][0]
            self._advance(t)
            self.now = t
            dirty = False
            new: list[JobRun] = []
            while heap and heap[0][0] == t:
                _, kind, _, payload = heapq.heappop(heap)
                if kind == FINISH:
                    run = self.runs[payload[0]]
                    if run.status == "running" and run.token == payload[1]:
                        self._finish(run)
                        dirty = True
                elif kind == SUBMIT:
                    run = self.runs[payload]
                    run.status = "queued"
                    run.h100_demand = self.job_h100(run)
                    self.demand_h100[run.job.project] += run.h100_demand
                    self.record("submit", run)
                    self.policy.enqueue(run)
                    new.append(run)
                elif kind == CONTRACT:
                    run = self.runs[payload[0]]
                    if run.status == "running" and run.token == payload[1]:
                        self.preemptible_gpus += run.job.gpus
                        self.touched.update(run.nodes)
                        self.policy.on_contract_end(run, t)
                        dirty = True
                elif kind == DRAIN_START:
                    self._drain_start(*payload)
                    dirty = True
                elif kind == DRAIN_END:
                    self._drain_end(*payload)
                    dirty = True
                elif kind == CHARGE:
                    self._charge(t - charge_every, t)
                    self.push(t + charge_every, CHARGE, None)
                elif kind == WAKE:
                    self.policy.on_wake(payload, t)
                    dirty = True
            self.policy.schedule(t, dirty, new)
            self._check_drains()
            if bar is not None:
                h = int(t // 3600)
                if h > shown:
                    bar.update(h - shown)
                    shown = h
        self._advance(self.horizon)
        self.now = self.horizon
        # Close the books: running segments end at the horizon (not as completions).
        for run in list(self.running.values()):
            self.acct.segments.append(
                (run.index, run.run_start, self.horizon, run.job.gpus * run.rate, run.charged)
            )
        self._check_drains()
        if bar is not None:
            bar.close()

    # -- maintenance -------------------------------------------------------------------

    def _drain_start(self, index: int, names: tuple[str, ...]) -> None:
        for n in names:
            self._busy_nd -= self._node_busy[n] if n not in self.cluster.drained else 0.0
            self.cluster.drain(n)
        # The runs on the nodes at the drain's start: the nodes are free once all have
        # left (work placed there after the window ended does not count).
        blocking = {(i, self.runs[i].token) for n in names for i in self.cluster.jobs_on[n]}
        window = {"index": index, "start": self.now, "nodes": names, "free_at": math.nan,
                  "blocking": blocking}
        self.drain_windows.append(window)
        self.record("drain_start", None, f"maintenance[{index}]", names)
        for n in names:
            self.policy.on_drain(n, self.now)

    def _drain_end(self, index: int, names: tuple[str, ...]) -> None:
        for n in names:
            if n in self.cluster.drained:
                self.cluster.undrain(n)
                self._busy_nd += self._node_busy[n]
        self.record("drain_end", None, f"maintenance[{index}]", names)

    def _check_drains(self) -> None:
        for w in self.drain_windows:
            if not math.isnan(w["free_at"]):
                continue
            w["blocking"] = {(i, tok) for i, tok in w["blocking"] if self.runs[i].token == tok}
            if not w["blocking"]:
                w["free_at"] = self.now
                self.record("drained", None, f"maintenance[{w['index']}]", w["nodes"])


def _maintenance_nodes(scenario: Scenario, m: Any) -> tuple[str, ...]:
    if m.node_names is not None:
        return tuple(m.node_names)
    cluster = next(c for c in scenario.clusters if c.name == m.cluster)
    nodes = [n.name for n in cluster.nodes() if m.gpu_type in (None, n.gpu_type)]
    return tuple(nodes[-m.nodes:])


def _demand_rate(scenario: Scenario, run: JobRun) -> float:
    """H100-eq rate of a queued job's demand: the fair-share module's rule."""
    from planner.fairshare import job_rate

    return float(job_rate(scenario, run.job))


def candidate_pools(engine: Engine, job: Job) -> Iterator[tuple[Pool, PoolState]]:
    """The pools ``job`` may run on that could hold its gang now, in cluster order."""
    cl = engine.cluster
    for pool, ps in cl.pools.items():
        if job.allows(pool.cluster, pool.gpu_type) and ps.can_fit(job.gpus, cl.max_size[pool]):
            yield pool, ps


def try_place(engine: Engine, run: JobRun, prefer: tuple[str, ...] = ()) -> tuple[Pool, tuple[str, ...]] | None:
    """Nodes for ``run`` in the first allowed pool with a hole of its shape, or ``None``."""
    for pool, ps in candidate_pools(engine, run.job):
        nodes = place_gang(ps.open_free, ps.size, run.job.gpus, prefer)
        if nodes is not None:
            return pool, nodes
    return None
