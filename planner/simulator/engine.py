"""The simulated clock: drives the one scheduler (:mod:`planner.scheduler`) through a workload.

The engine owns only what the real world owns in a live run: when jobs are submitted,
when a started job finishes (the simulator knows each job's true duration), and when
maintenance windows open and close. It jumps straight from one such event, or one of the
scheduler's own timers, to the next, and hands each instant's events to
:meth:`planner.scheduler.Scheduler.step`; every decision and every state change is the
scheduler's, exactly as under ``gpuplan run``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Any

from models import Scenario
from planner.ledger import Ledger
from planner.scheduler import (
    EVENT_COLUMNS,
    FINISH,
    SUBMIT,
    Accounting,
    Event,
    Policy,
    Scheduler,
    maintenance_events,
)
from planner.scheduler.state import JobRun

__all__ = ["EVENT_COLUMNS", "Engine", "ProgressFn"]

#: Steps at one simulated instant after which a run stops as stuck in a loop.
STUCK_STEPS = 10_000

ProgressFn = Callable[[float, float], None]
"""Called as simulated time advances: ``(hours done, hours in all)``."""


class Engine:
    """One simulation run of ``policy`` on ``scenario`` up to ``horizon`` seconds.

    Parameters
    ----------
    progress
        ``True`` for a tqdm bar on stderr, or a callable ``(hours done, hours in all)``
        called whenever another simulated hour is done.
    """

    def __init__(
        self,
        scenario: Scenario,
        policy: Policy,
        horizon: float,
        *,
        progress: bool | ProgressFn = False,
    ) -> None:
        self.scenario = scenario
        self.horizon = horizon
        jobs = []
        for i, job in enumerate(scenario.jobs):
            if job.submit >= horizon:
                continue
            if job.duration is None:
                raise ValueError(
                    f"workloads.jobs[{i}] (id {job.id!r}).duration: the simulator needs a duration"
                )
            jobs.append(job)
        self.core = Scheduler(scenario, policy, ledger=Ledger(":memory:"), jobs=jobs)
        self.core.start_hooks.append(self._on_start)
        self.progress = progress
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = 0

    # What the metrics read: the scheduler's state and log.
    @property
    def policy(self) -> Policy:
        return self.core.policy

    @property
    def runs(self) -> list[JobRun]:
        return self.core.runs

    @property
    def projects(self) -> list[str]:
        return self.core.projects

    @property
    def acct(self) -> Accounting:
        return self.core.acct

    @property
    def log(self) -> list[tuple[Any, ...]]:
        return self.core.log

    @property
    def drain_windows(self) -> list[dict[str, Any]]:
        return self.core.drain_windows

    @property
    def ledger(self) -> Ledger:
        return self.core.ledger

    def _push(self, t: float, event: Event) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, event.kind, self._seq, event))

    def _on_start(self, run: JobRun) -> None:
        # The world's side of a start: the job will finish after its remaining work.
        self._push(self.core.now + run.remaining, Event(FINISH, (run.index, run.token)))

    def run(self) -> None:
        """Replay the workload to the horizon, one instant at a time."""
        core = self.core
        for run in core.runs:
            self._push(run.job.submit, Event(SUBMIT, run.job.id))
        for t, event in maintenance_events(self.scenario):
            if event.payload and self.scenario.maintenance[event.payload[0]].start < self.horizon:
                self._push(t, event)
        total_h = round(self.horizon / 3600.0)
        report = self._reporter(total_h)
        shown = 0
        heap = self._heap
        last_t, repeats = -math.inf, 0
        while True:
            t = min(heap[0][0] if heap else math.inf, core.next_timer())
            if t >= self.horizon:
                break
            # A step handles every event and timer due by t, so steps at one instant
            # repeat only while the policy asks to be woken at that same instant: a
            # loop (one ran forever on float times), which must fail, not hang.
            repeats = repeats + 1 if t == last_t else 0
            last_t = t
            if repeats >= STUCK_STEPS:
                raise RuntimeError(
                    f"the {self.policy.name} policy asked to be woken at t = {t!r} s "
                    f"{STUCK_STEPS:,} times over without time moving on"
                )
            events: list[Event] = []
            while heap and heap[0][0] == t:
                events.append(heapq.heappop(heap)[3])
            core.step(t, events)
            h = int(t // 3600)
            if report is not None and h > shown:
                report(h, total_h)
                shown = h
        # Jobs that end exactly at the horizon are done (the default horizon is chosen
        # to let the last of them end).
        core.finish_only(self.horizon, [e for when, _, _, e in heap if when == self.horizon])
        core.close_books(self.horizon)
        if report is not None:
            report(total_h, total_h)

    def _reporter(self, total_h: int) -> ProgressFn | None:
        if callable(self.progress):
            return self.progress
        if not self.progress:
            return None
        from tqdm import tqdm

        bar = tqdm(total=total_h, unit="h", desc=self.policy.name, leave=False, mininterval=0.5)

        def report(done: float, total: float) -> None:
            bar.update(done - bar.n)
            if done >= total:
                bar.close()

        return report
