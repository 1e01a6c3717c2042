"""The live control loop: observe -> snapshot -> plan -> apply each slice -> record usage.

``gpuplan run`` drives it. Each epoch:

1. submit the scenario's jobs that have arrived and are not on the cluster yet (when
   the executor can submit), then **observe** the cluster;
2. build the **snapshot** from what was observed (:func:`live_snapshot`);
3. **plan** the epoch (:func:`planner.mip.plan_epoch`);
4. **apply** each slice at its boundary (retrying with backoff while the cluster's
   controller is unreachable);
5. at each slice's end, **record** the GPU time delivered in it in the ledger.

Time: the loop runs in real time. Scenario time is wall-clock seconds since the run's
*origin*, the moment the first ``gpuplan run`` on a ledger started. The origin, and the
jobs already submitted, are kept next to the ledger (``LEDGER.run.json``,
:class:`RunState`), so a restarted run continues the same timeline. ``slice_seconds`` sets the slice length (the epoch is ``policy.slices`` of
them); the jobs' minimum runtimes are real seconds.

Restarts lose nothing: ledger records are committed when written (SQLite, WAL), and a
restarted loop first records the interval since the ledger's last record for the jobs
it finds running (from their observed start time), so the time they ran while no
controller watched is charged too. What cannot be recovered is usage of jobs that
started and finished entirely while no controller ran.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from models import Job, JobState, NodeState, Plan, Scenario, Snapshot
from planner.executors.protocol import Executor, ExecutorUnavailable, SupportsSubmit
from planner.executors.state import ApplyReport, ClusterState, ObservedJob
from planner.fairshare import job_rate, org_at, water_fill
from planner.ledger import Ledger, Usage
from planner.runstate import RunState  # noqa: F401 - re-exported for callers of the loop
from planner.snapshot import build_snapshot

_T = TypeVar("_T")

PlanFn = Callable[[Snapshot, Plan | None], Plan]
"""Plans one epoch: ``(snapshot, previous plan) -> plan``."""


@dataclass
class SliceRecord:
    """What happened in one slice: the apply report and the usage rows recorded."""

    epoch: int
    index: int
    start: float
    end: float
    report: ApplyReport | None
    usage: list[Usage] = field(default_factory=list)


@dataclass
class RunSummary:
    """Everything a run did, for the CLI's output and for tests."""

    origin: float
    plans: list[Plan] = field(default_factory=list)
    slices: list[SliceRecord] = field(default_factory=list)
    catch_up: list[Usage] = field(default_factory=list)
    submitted: list[str] = field(default_factory=list)


def live_scenario(scenario: Scenario, slice_seconds: float | None) -> Scenario:
    """``scenario`` with the epoch set to ``policy.slices`` slices of ``slice_seconds``."""
    if slice_seconds is None:
        return scenario
    if slice_seconds <= 0:
        raise ValueError(f"slice_seconds must be positive, got {slice_seconds}")
    policy = scenario.policy.model_copy(update={"epoch": slice_seconds * scenario.policy.slices})
    return scenario.model_copy(update={"policy": policy})


def live_jobs(scenario: Scenario, state: ClusterState, origin: float) -> tuple[JobState, ...]:
    """The planner's view of the cluster's managed, unfinished jobs.

    A job is the scenario's job of the same name (its duration dropped: unknown live),
    or, for an adopted job, one built from what the cluster reports. Adopted jobs of a
    project the org tree does not know are left out (they cannot be charged).
    """
    specs = {j.id: j for j in scenario.jobs}
    projects = set(scenario.projects)
    nodes = {n.name: n for n in scenario.nodes}
    out: list[JobState] = []
    for ob in state.jobs:
        if not ob.managed or ob.phase == "finished":
            continue
        job = _job_of(ob, specs.get(ob.job), scenario)
        if job is None or job.project not in projects:
            continue
        # A suspended job still holds its nodes: the planner sees it there, and the
        # next slice that keeps it resumes it in place.
        if ob.phase in ("running", "suspended") and ob.nodes and all(n in nodes for n in ob.nodes):
            first = nodes[ob.nodes[0]]
            out.append(JobState(
                job=job, status="running",
                run_start=(ob.run_start - origin) if ob.run_start is not None else None,
                cluster=first.cluster, gpu_type=first.gpu_type, nodes=ob.nodes,
                charged=job.allocated, restarts=ob.restarts,
            ))
        else:
            out.append(JobState(job=job, status="queued", restarts=ob.restarts))
    return tuple(out)


def _job_of(ob: ObservedJob, spec: Job | None, scenario: Scenario) -> Job | None:
    if spec is not None:
        return spec.model_copy(update={"duration": None})
    if ob.project is None or ob.gpus <= 0:
        return None
    try:
        return Job(
            id=ob.job, project=ob.project, gpus=ob.gpus, duration=None,
            min_runtime=ob.min_runtime if ob.min_runtime is not None else scenario.policy.max_min_runtime,
            resumable=ob.resumable,
        )
    except ValueError:
        return None


def live_demand(scenario: Scenario, jobs: tuple[JobState, ...]) -> dict[str, float]:
    """H100-equivalent GPUs each project's funded live jobs want (as ``demand_at`` counts)."""
    demand: dict[str, float] = {}
    for js in jobs:
        if js.job.allocated:
            demand[js.job.project] = demand.get(js.job.project, 0.0) + js.job.gpus * job_rate(scenario, js.job)
    return demand


def live_snapshot(
    scenario: Scenario, state: ClusterState, origin: float, now: float, ledger: Ledger | None
) -> Snapshot:
    """The snapshot of the observed cluster at scenario time ``now``.

    Nodes the cluster reports drained (or does not report at all) are drained from
    ``now`` on, open-ended, on top of the scenario's maintenance windows, so the
    planner gives them no new work and moves work off them as contracts allow. So are
    nodes where jobs outside the planner's convention run: the planner cannot see how
    much of such a node is left, and must not plan on GPUs it does not control.
    """
    jobs = live_jobs(scenario, state, origin)
    snap = build_snapshot(scenario, now, jobs, ledger=ledger, demand=live_demand(scenario, jobs))
    observed = {n.name: n for n in state.nodes}
    foreign = {
        n for j in state.jobs if not j.managed and j.phase in ("running", "suspended") for n in j.nodes
    }
    nodes = []
    for ns in snap.nodes:
        seen = observed.get(ns.node.name)
        if seen is None or seen.drained or ns.node.name in foreign:
            start = now if ns.drain_start is None else min(ns.drain_start, now)
            nodes.append(NodeState(node=ns.node, drain_start=start, drain_end=None))
        else:
            nodes.append(ns)
    return snap.model_copy(update={"nodes": tuple(nodes)})


def usage_rows(
    scenario: Scenario, state: ClusterState, origin: float, start: float, end: float
) -> list[Usage]:
    """Usage of ``[start, end)`` (scenario time) from the jobs ``state`` shows running.

    Each running managed job (not a suspended one) counts from ``max(start, its run start)`` to ``end`` at its
    GPUs times its nodes' rate: charged (urgent work at ``policy.urgent_charge``) when
    funded, unallocated when free. Owed hours are the water-filled share of the demand
    the observed queue makes.
    """
    if end <= start:
        return []
    nodes = {n.name: n for n in scenario.nodes}
    jobs = live_jobs(scenario, state, origin)
    computing = {j.job for j in state.jobs if j.managed and j.phase == "running"}
    acc: dict[str, list[float]] = {}
    for js in jobs:
        if js.status != "running" or not js.nodes or js.job.id not in computing:
            continue
        since = max(start, js.run_start if js.run_start is not None else start)
        hours = max(end - since, 0.0) / 3600.0
        gpu_h = js.job.gpus * scenario.rate(nodes[js.nodes[0]].gpu_type) * hours
        row = acc.setdefault(js.job.project, [0.0, 0.0, 0.0])
        if js.job.allocated:
            row[0] += gpu_h
            row[1] += gpu_h * (scenario.policy.urgent_charge if js.job.urgent else 1.0)
        else:
            row[2] += gpu_h
    owed = water_fill(org_at(scenario, start), live_demand(scenario, jobs), scenario.capacity_h100())
    hours = (end - start) / 3600.0
    out = []
    for project in scenario.projects:
        a, c, u = acc.get(project, [0.0, 0.0, 0.0])
        o = owed.get(project, 0.0) * hours
        if a or u or o:
            out.append(Usage(project, start, end, allocated_gpu_h=a, charged_gpu_h=c,
                             unallocated_gpu_h=u, owed_gpu_h=o))
    return out


class ControlLoop:
    """Runs epochs of observe -> plan -> apply -> record against one executor.

    Parameters
    ----------
    scenario
        Clusters, org, policy, and the jobs to submit (at their ``submit`` times).
    executor
        Carries the plans out.
    ledger
        Where usage is recorded; its standings feed the next epoch's plan.
    plan
        ``(snapshot, previous) -> Plan``; defaults to :func:`planner.mip.plan_epoch`.
    run_state
        Origin (wall-clock time of scenario time 0) and jobs submitted so far; a new
        in-memory one starting now when not given.
    slice_seconds
        Slice length (default: the policy's).
    clock, sleep
        Injected for tests (a fake clock makes the loop instant).
    retry_backoff, max_backoff
        Waits between retries while the executor reports its controller unreachable.
    progress
        Receives one line per slice (``None``: quiet).
    """

    def __init__(
        self,
        scenario: Scenario,
        executor: Executor,
        ledger: Ledger,
        *,
        plan: PlanFn | None = None,
        run_state: RunState | None = None,
        slice_seconds: float | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        retry_backoff: float = 1.0,
        max_backoff: float = 30.0,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.scenario = live_scenario(scenario, slice_seconds)
        self.executor = executor
        self.ledger = ledger
        self.plan_fn = plan or _default_plan
        self.clock = clock
        self.sleep = sleep
        self.run_state = run_state or RunState(clock())
        self.origin = self.run_state.origin
        self.retry_backoff = retry_backoff
        self.max_backoff = max_backoff
        self.progress = progress or (lambda _line: None)
        self._recorded_until: float | None = None
        self._told_gone = False

    def now(self) -> float:
        """Scenario time now."""
        return self.clock() - self.origin

    def run(self, epochs: int = 1) -> RunSummary:
        """Run ``epochs`` epochs back to back; returns what was planned, done and recorded."""
        summary = RunSummary(origin=self.origin)
        summary.catch_up = self.catch_up()
        previous: Plan | None = None
        for epoch in range(epochs):
            # 1. Arrivals, then observe.
            summary.submitted += self.submit_arrivals(self.now())
            state = self._retry(self.executor.observe)
            # 2-3. Snapshot and plan. The epoch starts now (after any catch-up or wait).
            t0 = self.now()
            snapshot = live_snapshot(self.scenario, state, self.origin, t0, self.ledger)
            plan = self.plan_fn(snapshot, previous)
            summary.plans.append(plan)
            self.progress(
                f"epoch {epoch + 1}: planned {len(plan.slices)} slices in {plan.solver.seconds:.2f}s "
                f"({plan.solver.backend}, {plan.solver.status}"
                f"{', fallback' if plan.solver.fallback else ''}), {len(plan.pending)} waiting"
            )
            # 4-5. Apply each slice at its boundary; record its usage at its end.
            for index, chosen in enumerate(plan.slices):
                self._sleep_until(chosen.start)
                report = self._apply(plan, index, chosen.end)
                self._sleep_until(chosen.end)
                state = self._retry(self.executor.observe)
                # From the end of the last record, so the moments spent observing and
                # planning between epochs are recorded too: the ledger has no gaps.
                since = self._recorded_until if self._recorded_until is not None else chosen.start
                rows = usage_rows(self.scenario, state, self.origin, since, chosen.end)
                self.ledger.record(rows)
                self._recorded_until = chosen.end
                summary.slices.append(SliceRecord(epoch, index, chosen.start, chosen.end, report, rows))
                self.progress(_slice_line(epoch, index, len(plan.slices), report, rows))
            previous = plan
        return summary

    def catch_up(self) -> list[Usage]:
        """Record usage since the ledger's last record, for jobs running now (after a restart)."""
        span = self.ledger.span()
        now = self.now()
        if span is None or not 0 <= span[1] < now:
            return []
        state = self._retry(self.executor.observe)
        rows = usage_rows(self.scenario, state, self.origin, span[1], now)
        self.ledger.record(rows)
        self._recorded_until = now
        if rows:
            self.progress(f"restart: recorded {now - span[1]:.0f}s of usage since the ledger's last record")
        return rows

    def submit_arrivals(self, now: float) -> list[str]:
        """Submit the scenario's jobs with ``submit <= now`` the cluster does not have yet."""
        executor = self.executor
        if not isinstance(executor, SupportsSubmit):
            return []
        state = self._retry(self.executor.observe)
        # A finished job of the same name may be an older run's: only live ones count.
        known = {j.job for j in state.jobs if j.managed and j.phase != "finished"}
        gone = self.run_state.submitted - known
        if gone and not self._told_gone:
            # e.g. a restarted dryrun (its cluster lives in memory) or finished jobs
            # the cluster no longer lists: they are not submitted twice.
            self.progress(f"{len(gone)} job(s) submitted by an earlier run are no longer on "
                          f"the cluster and are not submitted again: {', '.join(sorted(gone))}")
            self._told_gone = True
        known |= self.run_state.submitted
        done = []
        for job in self.scenario.jobs:
            if job.submit <= now and job.id not in known:
                result = self._retry(functools.partial(executor.submit, job))
                if result.ok:
                    self.run_state.submitted.add(job.id)
                    self.run_state.save()
                    if result.changed:
                        done.append(job.id)
                else:
                    self.progress(f"submit {job.id}: failed: {result.detail}")
        return done

    # -- helpers ------------------------------------------------------------------------

    def _apply(self, plan: Plan, index: int, deadline: float) -> ApplyReport | None:
        """Apply a slice, retrying while unreachable, giving up when the slice is over."""
        delay = self.retry_backoff
        while True:
            try:
                return self.executor.apply(plan, index)
            except ExecutorUnavailable as exc:
                if self.now() + delay >= deadline:
                    self.progress(f"slice {index + 1}: not applied, controller unreachable: {exc}")
                    return None
                self.progress(f"slice {index + 1}: controller unreachable, retrying in {delay:g}s")
                self.sleep(delay)
                delay = min(delay * 2, self.max_backoff)

    def _retry(self, call: Callable[[], _T]) -> _T:
        delay = self.retry_backoff
        while True:
            try:
                return call()
            except ExecutorUnavailable as exc:
                self.progress(f"controller unreachable, retrying in {delay:g}s: {exc}")
                self.sleep(delay)
                delay = min(delay * 2, self.max_backoff)

    def _sleep_until(self, t: float) -> None:
        wait = t - self.now()
        if wait > 0:
            self.sleep(wait)


def _default_plan(snapshot: Snapshot, previous: Plan | None) -> Plan:
    from planner.mip import plan_epoch

    return plan_epoch(snapshot, previous=previous)


def _slice_line(epoch: int, index: int, count: int, report: ApplyReport | None, rows: list[Usage]) -> str:
    if report is None:
        return f"epoch {epoch + 1} slice {index + 1}/{count}: not applied (controller unreachable)"
    kinds: dict[str, int] = {}
    for r in report.changed:
        kinds[r.action] = kinds.get(r.action, 0) + 1
    done = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "no changes"
    running = sum(1 for r in report.results if r.action == "continue" and r.ok)
    gpu_h = sum(u.allocated_gpu_h + u.unallocated_gpu_h for u in rows)
    line = (f"epoch {epoch + 1} slice {index + 1}/{count}: {done}; {running} continued; "
            f"{len(report.failed)} failed; {gpu_h:.3f} H100-eq GPU-h recorded")
    for r in report.failed:
        line += f"\n  failed: {r.action} {r.job}: {r.detail}"
    return line


def usage_totals(rows: list[Usage]) -> Mapping[str, float]:
    """Allocated plus unallocated H100-eq GPU-hours per project of ``rows``."""
    out: dict[str, float] = {}
    for u in rows:
        out[u.project] = out.get(u.project, 0.0) + u.allocated_gpu_h + u.unallocated_gpu_h
    return out
