"""The live driver: ``gpuplan run`` drives the one scheduler against a real cluster.

The scheduler (:class:`planner.scheduler.Scheduler`) and its policy are the very objects
the simulator drives; this module only feeds them what happened on the cluster and makes
the cluster run what they decided. Each turn of the loop:

1. **submit** the scenario's jobs whose submit time has come (held, when the executor
   can submit);
2. **observe** the cluster and turn what changed into events: a job the model runs that
   the cluster reports finished (or no longer has), a managed job that appeared (an
   arrival, adopted with the contract in its comment), nodes the cluster drained or
   returned (and nodes where work outside the planner's convention runs, whose free GPUs
   the planner cannot know), plus the scenario's maintenance windows as they open and
   close;
3. **step** the scheduler with those events at the current time: it fires its due timers
   (contract ends, charge points, epoch and slice boundaries, where ``mip`` plans) and
   makes one scheduling pass; with no event and no timer due, nothing is decided, so a
   loop that polls every few seconds decides exactly what the simulator decides;
4. **apply**: the executor is asked to run exactly the jobs the model runs, on their
   nodes (one slice of a :class:`models.Plan`, reconciled with what the cluster reports,
   so an apply after a crash repairs instead of repeating);
5. **sleep** until the next poll (``poll`` seconds), the scheduler's next timer or the
   next arrival, whichever comes first.

Usage is charged by the scheduler itself into the ledger at every charge point (one
slice apart) and when the loop stops, so the ledger has no gaps and a stop loses nothing.

Time: scenario time is wall-clock seconds since the run's *origin*, the moment the first
``gpuplan run`` on a ledger started, kept with the jobs already submitted next to the
ledger (``LEDGER.run.json``, :class:`planner.runstate.RunState`). A restarted loop finds
the jobs still running, takes them into the model with their observed start (so their
contracts hold), and charges them from the ledger's last record: the time they ran while
no controller watched is charged too. What cannot be recovered is usage of jobs that
started and finished entirely while no controller ran.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from models import (
    Action,
    Assignment,
    Histogram,
    Job,
    Plan,
    Pool,
    Scenario,
    SchedulerCounters,
    Slice,
    SolverInfo,
    SolveStatus,
)
from planner.executors.protocol import (
    Executor,
    ExecutorUnavailable,
    SupportsReasons,
    SupportsSubmit,
    checked_call,
)
from planner.executors.state import ActionResult, ApplyReport, ClusterState, ObservedJob
from planner.ledger import Ledger
from planner.runstate import RunState
from planner.scheduler import (
    DRAIN_END,
    DRAIN_START,
    FINISH,
    SUBMIT,
    Event,
    Scheduler,
    current_plan,
    maintenance_events,
    make_policy,
)
from planner.scheduler.state import JobRun
from planner.scheduler.status import job_class_latency, live_status
from planner.status_file import StatusBoard

_T = TypeVar("_T")

__all__ = ["ControlLoop", "RunState", "RunSummary", "live_scenario"]

DECISION_EVENTS = ("start", "resume", "preempt", "hold", "release", "finish", "adopt")
"""Event-log rows the loop reports as one line each."""

RESUBMIT_MAX_WAIT = 300.0
"""A submit the cluster refused is tried again a poll later, then twice as long after
each refusal, up to this many seconds."""

LOG_KEEP = 20_000
"""Rows of the scheduler's log (and of :attr:`RunSummary.decisions` and ``reports``) a
live run keeps: a service runs for months, and what it decided is in its log lines and
the ledger."""

PLANS_KEEP = 24
"""The latest plans a live run keeps in its summary."""


@dataclass
class RunSummary:
    """Everything a run did, for the CLI's output and for tests."""

    origin: float
    start: float = 0.0
    end: float = 0.0
    charged_from: float = 0.0  # where this run's ledger records begin (before start: catch-up)
    decisions: list[tuple[Any, ...]] = field(default_factory=list)  # the latest LOG_KEEP
    counts: dict[str, int] = field(default_factory=dict)  # decisions by kind, all of them
    failed_total: int = 0  # executor actions that failed, all of them
    reports: list[ApplyReport] = field(default_factory=list)
    plans: list[Plan] = field(default_factory=list)
    submitted: list[str] = field(default_factory=list)
    polls: int = 0
    stopped: bool = False

    @property
    def failed(self) -> int:
        """Executor actions that failed (of the reports kept)."""
        return sum(len(r.failed) for r in self.reports)


def live_scenario(scenario: Scenario, slice_seconds: float | None) -> Scenario:
    """``scenario`` with the epoch set to ``policy.slices`` slices of ``slice_seconds``."""
    if slice_seconds is None:
        return scenario
    if not (slice_seconds > 0 and math.isfinite(slice_seconds)):
        raise ValueError(f"slice_seconds must be positive and finite, got {slice_seconds}")
    policy = scenario.policy.model_copy(update={"epoch": slice_seconds * scenario.policy.slices})
    return scenario.model_copy(update={"policy": policy})


class ControlLoop:
    """Drives one scheduler against one executor until stopped (or for some epochs).

    Parameters
    ----------
    scenario
        Clusters, org, policy, and the jobs to submit (at their ``submit`` times).
    executor
        Carries the decisions out.
    ledger
        Where usage is recorded; its standings feed the policy.
    policy, policy_options
        The scheduling policy (``legacy``, ``fairshare`` or ``mip``) and its options,
        exactly as the simulator takes them.
    run_state
        Origin (wall-clock time of scenario time 0), jobs submitted so far and funded
        jobs running uncharged; a new in-memory one starting now when not given.
    slice_seconds
        Slice length (default: the policy's).
    poll
        Seconds between observations of the cluster.
    clock, sleep
        Injected for tests (a fake clock makes the loop instant).
    retry_backoff, max_backoff
        Waits between retries while the executor reports its controller unreachable.
    progress
        Receives one line per decision and per notable event (``None``: quiet).
    status
        Where the live status goes after each decision (``gpuplan status``, the metrics
        endpoint and the app read it); ``None``: kept in memory only.
    executor_name
        How messages name the executor (``gpuplan run`` gives the registry name the user
        typed); default: its ``name``.

    Raises
    ------
    ExecutorFailure
        From :meth:`run`, when an executor call raises anything but
        :class:`ExecutorUnavailable` or returns something the protocol does not allow;
        usage is recorded up to that moment first.
    """

    def __init__(
        self,
        scenario: Scenario,
        executor: Executor,
        ledger: Ledger,
        *,
        policy: str = "mip",
        policy_options: dict[str, Any] | None = None,
        run_state: RunState | None = None,
        slice_seconds: float | None = None,
        poll: float = 5.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        retry_backoff: float = 1.0,
        max_backoff: float = 30.0,
        progress: Callable[[str], None] | None = None,
        status: StatusBoard | None = None,
        executor_name: str | None = None,
    ) -> None:
        if not (poll > 0 and math.isfinite(poll)):
            raise ValueError(f"poll must be positive and finite, got {poll}")
        self.scenario = live_scenario(scenario, slice_seconds)
        self.executor = executor
        self.executor_name = executor_name or str(getattr(executor, "name", type(executor).__name__))
        self.ledger = ledger
        self.policy_name = policy
        self.policy_options = dict(policy_options or {})
        self.clock = clock
        self.sleep = sleep
        self.poll = poll
        self.run_state = run_state or RunState(clock())
        self.origin = self.run_state.origin
        self.retry_backoff = retry_backoff
        self.max_backoff = max_backoff
        self.progress = progress or (lambda _line: None)
        self.core: Scheduler | None = None
        self._stop = False
        self._arrivals = sorted(self.scenario.jobs, key=lambda j: j.submit)
        self._next_arrival = 0
        self._resubmit: list[tuple[float, int, Job]] = []  # (when, refusals, job)
        self._maintenance = sorted(maintenance_events(self.scenario), key=lambda x: x[0])
        self._next_maintenance = 0
        self._observed_drained: set[str] = set()
        self._logged = 0
        self._applied: frozenset[tuple[str, tuple[str, ...]]] | None = None
        self.status = status or StatusBoard()
        self._counts: dict[str, int] = {}
        self._latency: dict[str, Histogram] = {}
        self._errors = 0
        self._retries = 0
        self._reasons: dict[str, str] = {}

    # -- time --------------------------------------------------------------------------

    def now(self) -> float:
        """Scenario time now."""
        return self.clock() - self.origin

    def request_stop(self) -> None:
        """Stop at the next moment nothing is half done (a signal handler calls this)."""
        self._stop = True

    # -- the loop ----------------------------------------------------------------------

    def run(self, epochs: int | None = None) -> RunSummary:
        """Run until :meth:`request_stop` (or for ``epochs`` epochs of time).

        Returns what was submitted, decided and applied.
        """
        start = self.now()
        summary = RunSummary(origin=self.origin, start=start)
        core = self._setup(start, summary)
        end = start + epochs * self.scenario.policy.epoch if epochs is not None else math.inf
        try:
            while not self._stop:
                # The wall clock may step back (NTP); scenario time never does.
                now = max(self.now(), core.now)
                if now >= end:
                    break
                events = self._submit_arrivals(now, summary)
                state = self._retry(self._call("observe", ClusterState))
                summary.polls += 1
                events += self._observed_events(core, state)
                events += self._maintenance_due(now)
                stepped = core.step(now, events)
                self._report_decisions(core, summary)
                if (stepped and self._desired_key(core) != self._applied) or self._diverged(core, state):
                    self._apply(core, now, summary)
                self._publish(core)
                self._wait_until(min(now + self.poll, core.next_timer(), self._next_world_event(), end))
        finally:
            # Also when an executor call fails: the usage up to now is recorded, as at a stop.
            stop_at = min(self.now(), end)
            core.flush(max(stop_at, core.now))
            summary.end = core.now
            summary.stopped = self._stop
            self.progress(f"stopped at {summary.end:.0f}s: usage recorded up to then")
        return summary

    def _setup(self, now: float, summary: RunSummary) -> Scheduler:
        """The scheduler, with the jobs the cluster runs now taken in as they are."""
        state = self._retry(self._call("observe", ClusterState))
        self._warn_about_setup(state)
        span = self.ledger.span()
        charged_until = span[1] if span is not None and 0 <= span[1] < now else None
        core = Scheduler(self.scenario, make_policy(self.policy_name, **self.policy_options),
                         ledger=self.ledger, start=now, charged_until=charged_until)
        self.core = core
        summary.charged_from = core.charged_from
        nodes = {n.name: n for n in self.scenario.nodes}
        for ob in state.jobs:
            if not ob.managed or ob.phase == "finished":
                continue
            run = self._run_of(core, ob)
            if run is None or ob.phase not in ("running", "suspended"):
                continue
            if not ob.nodes or not all(n in nodes for n in ob.nodes):
                continue
            first = nodes[ob.nodes[0]]
            run_start = (ob.run_start - self.origin) if ob.run_start is not None else now
            try:
                core.adopt(run, Pool(first.cluster, first.gpu_type), tuple(ob.nodes),
                           min(run_start, now), restarts=ob.restarts,
                           charged=ob.job not in self.run_state.free)
            except RuntimeError as exc:  # inconsistent with what was adopted before
                self.progress(f"not adopted: {ob.job}: {exc}")
        if charged_until is not None:
            self.progress(f"restart: recorded from the ledger's last record at "
                          f"{charged_until:.0f}s; {len(core.running)} running job(s) taken over")
        # Arrivals submitted by an earlier run are not submitted again.
        known = {j.job for j in state.jobs if j.managed and j.phase != "finished"}
        gone = self.run_state.submitted - known
        if gone:
            self.progress(f"{len(gone)} job(s) submitted by an earlier run are no longer on "
                          f"the cluster and are not submitted again: {', '.join(sorted(gone))}")
        self._report_decisions(core, summary)
        return core

    def _warn_about_setup(self, state: ClusterState) -> None:
        """One warning each for what would otherwise fail silently: scenario jobs an
        executor without ``submit`` never submits, node names the cluster spells otherwise
        (an unreported node is drained for the scheduler)."""
        name = self.executor_name
        waiting = [j for j in self._arrivals if j.id not in self.run_state.submitted]
        if waiting and not isinstance(self.executor, SupportsSubmit):
            self.progress(f"warning: executor {name!r} cannot submit jobs (no submit()): the "
                          f"scenario's {len(waiting)} job(s) are not submitted; only jobs "
                          "already on the cluster are scheduled")
        known = {n.name for n in self.scenario.nodes}
        reported = {n.name for n in state.nodes}
        missing, unknown = sorted(known - reported), sorted(reported - known)
        problems = []
        if missing:
            problems.append(f"does not report {len(missing)} of the scenario's nodes "
                            f"({_some(missing)}), which get no work")
        if unknown:
            problems.append(f"reports {len(unknown)} node(s) the scenario does not have "
                            f"({_some(unknown)})")
        if problems:
            self.progress(f"warning: executor {name!r} {'; and '.join(problems)}; node names "
                          "must match the scenario's exactly, case included")

    def _run_of(self, core: Scheduler, ob: ObservedJob) -> JobRun | None:
        """The model's run of an observed managed job (registered when new)."""
        run = core.by_id.get(ob.job)
        if run is not None:
            return run
        job = _adopted_job(ob, self.scenario, core.now)
        if job is None or job.project not in core.demand_h100:
            return None
        return core.add_job(job)

    def _submit_arrivals(self, now: float, summary: RunSummary) -> list[Event]:
        """Submit the scenario's jobs with ``submit <= now`` not submitted before."""
        events: list[Event] = []
        arrivals = self._arrivals
        can_submit = isinstance(self.executor, SupportsSubmit)
        # Submits the cluster refused before, when due again; then the new arrivals.
        todo = [(tries, job) for at, tries, job in self._resubmit if at <= now]
        self._resubmit = [item for item in self._resubmit if item[0] > now]
        while self._next_arrival < len(arrivals) and arrivals[self._next_arrival].submit <= now:
            todo.append((0, arrivals[self._next_arrival]))
            self._next_arrival += 1
        for tries, job in todo:
            if job.id in self.run_state.submitted or not can_submit:
                continue
            assert isinstance(self.executor, SupportsSubmit)
            result = self._retry(self._call("submit", ActionResult, job))
            if not result.ok:
                self._errors += 1
                summary.failed_total = self._errors
                wait = min(self.poll * 2**tries, RESUBMIT_MAX_WAIT)
                self.progress(f"submit {job.id}: failed: {result.detail} (trying again in {wait:g}s)")
                self._resubmit.append((now + wait, tries + 1, job))
                continue
            self.run_state.submitted.add(job.id)
            self.run_state.save()
            if result.changed:
                summary.submitted.append(job.id)
            events.append(Event(SUBMIT, job.id))
        return events

    def _observed_events(self, core: Scheduler, state: ClusterState) -> list[Event]:
        """What the cluster shows changed since the model last matched it."""
        events: list[Event] = []
        seen: dict[str, ObservedJob] = {}
        for ob in state.jobs:
            if ob.managed:
                live = seen.get(ob.job)
                if live is None or live.phase == "finished":
                    seen[ob.job] = ob
        for name, ob in seen.items():
            run = self._run_of(core, ob)
            if run is None:
                continue
            if run.status == "future" and ob.phase in ("held", "pending"):
                events.append(Event(SUBMIT, name))  # submitted to the cluster by a user
        for run in list(core.running.values()):
            ob_or_none = seen.get(run.job.id)
            if ob_or_none is None or ob_or_none.phase == "finished":
                events.append(Event(FINISH, run.job.id))
            elif ob_or_none.phase == "running" and ob_or_none.run_start is not None:
                core.started_at(run, ob_or_none.run_start - self.origin)
        # Nodes that cannot take planned work: drained, unreported, or running others' jobs.
        reported = {n.name for n in state.nodes}
        drained = {n.name for n in state.nodes if n.drained}
        drained |= {n.name for n in self.scenario.nodes if n.name not in reported}
        drained |= {n for j in state.jobs if not j.managed and j.phase in ("running", "suspended")
                    for n in j.nodes}
        drained &= set(core.cluster.nodes)
        if drained - self._observed_drained:
            events.append(Event(DRAIN_START, ("cluster", tuple(sorted(drained - self._observed_drained)))))
        if self._observed_drained - drained:
            events.append(Event(DRAIN_END, ("cluster", tuple(sorted(self._observed_drained - drained)))))
        self._observed_drained = drained
        return events

    def _maintenance_due(self, now: float) -> list[Event]:
        out = []
        while (self._next_maintenance < len(self._maintenance)
               and self._maintenance[self._next_maintenance][0] <= now):
            out.append(self._maintenance[self._next_maintenance][1])
            self._next_maintenance += 1
        return out

    def _next_world_event(self) -> float:
        nxt = math.inf
        if self._next_arrival < len(self._arrivals):
            nxt = self._arrivals[self._next_arrival].submit
        if self._next_maintenance < len(self._maintenance):
            nxt = min(nxt, self._maintenance[self._next_maintenance][0])
        return nxt

    # -- applying decisions --------------------------------------------------------------

    def desired(self, core: Scheduler, now: float) -> Plan:
        """What the cluster should run now: the model's running jobs on their nodes, as one
        slice of a plan (lasting until the scheduler's next timer)."""
        until = max(min(core.next_timer(), now + self.scenario.policy.slice_length), now + 1.0)
        assignments = []
        actions = []
        for run in sorted(core.running.values(), key=lambda r: r.index):
            assert run.pool is not None
            assignments.append(Assignment(
                job=run.job.id, project=run.job.project, cluster=run.pool.cluster,
                gpu_type=run.pool.gpu_type, nodes=run.nodes, gpus=run.job.gpus,
                charged=run.charged,
            ))
            if run.restarts > 0:
                actions.append(Action(job=run.job.id, action="resume", at=run.run_start))
        # Non-resumable work the model moved off (maintenance, after its contract) is
        # requeued on the cluster too: it restarts from scratch, as the contract allows.
        for run in core.runs:
            if run.status == "queued" and not run.job.resumable and run.preemptions > 0:
                actions.append(Action(job=run.job.id, action="preempt", at=now))
        return Plan(
            epoch_start=now, epoch_end=until, origin=self.scenario.start,
            slices=(Slice(start=now, end=until, assignments=tuple(assignments)),),
            actions=tuple(actions),
            solver=SolverInfo(backend=f"scheduler:{self.policy_name}", status=SolveStatus.TRIVIAL),
        )

    def _desired_key(self, core: Scheduler) -> frozenset[tuple[str, tuple[str, ...]]]:
        return frozenset((r.job.id, r.nodes) for r in core.running.values())

    def _diverged(self, core: Scheduler, state: ClusterState) -> bool:
        """Whether the cluster runs something other than the model (retry the apply)."""
        want = {r.job.id: set(r.nodes) for r in core.running.values()}
        have = {j.job: set(j.nodes) for j in state.jobs
                if j.managed and j.phase in ("running", "suspended")}
        # A job still starting (released, pinned to its nodes, Slurm launching it) is fine.
        pending = {j.job: set(j.pinned) for j in state.jobs if j.managed and j.phase == "pending"}
        missing = any(have.get(job) != nodes and pending.get(job) != nodes
                      for job, nodes in want.items())
        # Running on the cluster, queued in the model: a requeue not yet carried out.
        stale = any(job not in want and (run := core.by_id.get(job)) is not None
                    and run.status == "queued" and run.job.resumable for job in have)
        return missing or stale

    def _apply(self, core: Scheduler, now: float, summary: RunSummary) -> None:
        plan = self.desired(core, now)
        report = self._apply_retrying(plan)
        if report is None:
            return
        self._applied = self._desired_key(core)
        self._remember_free(core)
        summary.reports.append(report)
        del summary.reports[:-LOG_KEEP]
        self._errors += len(report.failed)
        summary.failed_total = self._errors
        for r in report.failed:
            self.progress(f"t={now:.0f}s {r.action} {r.job}: failed: {r.detail}")
            run = core.by_id.get(r.job)
            # A start the cluster refuses for good goes back to the queue; one that waits
            # for a job still stopping is tried again at the next poll.
            if (r.action in ("start", "resume") and run is not None and run.status == "running"
                    and not r.detail.startswith("still stopping")):
                core.unstart(run, f"executor: {r.detail}")
                self._report_decisions(core, summary)

    def _remember_free(self, core: Scheduler) -> None:
        """Keep which funded jobs run uncharged, so that a restart adopts them as such."""
        free = {r.job.id for r in core.running.values() if r.job.allocated and not r.charged}
        if free != self.run_state.free:
            self.run_state.free = free
            self.run_state.save()

    def _apply_retrying(self, plan: Plan) -> ApplyReport | None:
        """Apply ``plan``, retrying while the controller is unreachable, but not past the
        slice it is for (``None``: not applied; the next slice's plan supersedes it)."""
        return self._retry(
            self._call("apply", ApplyReport, plan, 0),
            deadline=self.now() + self.scenario.policy.slice_length,
        )

    def _publish(self, core: Scheduler) -> None:
        """Publish the live status; tell the cluster each job's state line when it changed."""
        status = live_status(core, wall=self.clock(), origin=self.origin, policy=self.policy_name,
                             executor=self.executor.name, counters=self._counters(core))
        self.status.publish(status)
        if not isinstance(self.executor, SupportsReasons):
            return
        for line in status.jobs:
            if self._reasons.get(line.job) == line.text:
                continue
            try:
                result = self._call("set_reason", ActionResult, line.job, line.text)()
            except ExecutorUnavailable:
                return  # the next poll tries again
            if result.ok:
                self._reasons[line.job] = line.text

    def _counters(self, core: Scheduler) -> SchedulerCounters:
        plan = current_plan(core.policy)
        solver = plan.solver if plan is not None else None
        return SchedulerCounters(
            plan_seconds=solver.seconds if solver is not None else None,
            gap=solver.gap if solver is not None else None,
            fallbacks_total=int(getattr(core.policy, "fallbacks", 0)),
            decisions_total=dict(self._counts),
            submit_to_start=dict(self._latency),
            executor_errors_total=self._errors,
            executor_retries_total=self._retries,
        )

    def _report_decisions(self, core: Scheduler, summary: RunSummary) -> None:
        """One line per decision (and per finish or adoption), with job, action and reason."""
        for row in core.log[self._logged:]:
            t, event, job, project, _pool, nodes, gpus, _per_node, detail = row
            if event == "plan":
                self.progress(f"t={t:.0f}s plan: {detail}")
            if event not in DECISION_EVENTS:
                continue
            summary.decisions.append(row)
            self._counts[event] = self._counts.get(event, 0) + 1
            run = core.by_id.get(job)
            if event == "start" and run is not None and run.first_start == t:
                wait = job_class_latency(run)
                self._latency[run.cls] = self._latency.get(run.cls, Histogram()).observe(wait)
            where = f" on {nodes}" if nodes and event not in ("finish",) else ""
            why = f" ({detail})" if detail else ""
            self.progress(f"t={t:.0f}s {event} {job} [{project}, {gpus} GPUs]{where}{why}")
        if len(core.log) > 2 * LOG_KEEP:
            del core.log[:-LOG_KEEP]
        if len(summary.decisions) > 2 * LOG_KEEP:
            del summary.decisions[:-LOG_KEEP]
        self._logged = len(core.log)
        summary.counts = dict(self._counts)
        plan = current_plan(core.policy)
        if plan is not None and (not summary.plans or summary.plans[-1] is not plan):
            summary.plans.append(plan)
            del summary.plans[:-PLANS_KEEP]

    # -- helpers ------------------------------------------------------------------------

    def _call(self, method: str, returns: type[_T], *args: Any) -> Callable[[], _T]:
        """The executor's ``method`` applied to ``args``, its result checked to be a
        ``returns`` (:func:`checked_call`: anything else is an ``ExecutorFailure``)."""
        bound = functools.partial(getattr(self.executor, method), *args)
        return functools.partial(checked_call, self.executor_name, method, bound, returns)

    @overload
    def _retry(self, call: Callable[[], _T]) -> _T: ...

    @overload
    def _retry(self, call: Callable[[], _T], deadline: float) -> _T | None: ...

    def _retry(self, call: Callable[[], _T], deadline: float | None = None) -> _T | None:
        """``call()``, retried with doubling waits while the controller is unreachable:
        until it answers, or a stop is asked for (the error is raised; with a
        ``deadline``, ``None`` is returned), or the next wait would pass ``deadline``
        (``None``)."""
        delay = self.retry_backoff
        while True:
            try:
                return call()
            except ExecutorUnavailable as exc:
                if deadline is not None and (self._stop or self.now() + delay >= deadline):
                    self.progress(f"not applied, controller unreachable: {exc}")
                    return None
                if self._stop:
                    raise
                self.progress(f"controller unreachable, retrying in {delay:g}s: {exc}")
                self._retries += 1
                self.sleep(delay)
                delay = min(delay * 2, self.max_backoff)

    def _wait_until(self, t: float) -> None:
        """Sleep until scenario time ``t``, in short steps so a stop request is seen."""
        while not self._stop:
            wait = t - self.now()
            if wait <= 0:
                return
            self.sleep(min(wait, 0.5) if self.sleep is time.sleep else wait)


def _some(names: list[str], shown: int = 3) -> str:
    """The first ``shown`` of ``names``, and how many more."""
    more = f", ... ({len(names) - shown} more)" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _adopted_job(ob: ObservedJob, scenario: Scenario, now: float) -> Job | None:
    """The planner job of an observed managed job: the scenario's job of that name (with
    its declared duration), or one built from what the cluster reports, submitted when
    first seen (``now``)."""
    for job in scenario.jobs:
        if job.id == ob.job:
            return job
    if ob.project is None or ob.gpus <= 0:
        return None
    try:
        return Job(
            id=ob.job, project=ob.project, gpus=ob.gpus, duration=None, submit=max(now, 0.0),
            min_runtime=ob.min_runtime if ob.min_runtime is not None else scenario.policy.max_min_runtime,
            resumable=ob.resumable,
        )
    except ValueError:
        return None
