"""The ``dryrun`` executor: a cluster kept in memory that logs every action as JSON.

It is what ``gpuplan run --executor dryrun`` uses to show what a plan would do, and
the reference implementation for plugin authors: it follows :func:`reconcile` exactly,
so applying a slice twice logs only no-ops the second time. Each log line is one JSON
object::

    {"at": 1767571200.0, "executor": "dryrun", "slice": 0, "job": "j1",
     "action": "start", "ok": true, "changed": true, "nodes": ["alpha-h100-000"],
     "native_id": "1", "detail": ""}

Jobs with a known ``duration`` finish once they have done that much work. Work survives
a preemption the way the simulator assumes: a resumable job keeps its progress less the
scenario's ``policy.restart_overhead``, a non-resumable one starts again from scratch.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from models import Job, Plan, Scenario
from planner.executors.reconcile import reconcile
from planner.executors.state import (
    ActionResult,
    ApplyReport,
    ClusterState,
    JobPhase,
    ObservedJob,
    ObservedNode,
)


@dataclass
class _Record:
    job: Job
    native_id: str
    phase: JobPhase = "held"
    nodes: tuple[str, ...] = ()
    run_start: float | None = None
    segment: float | None = None  # when the current stretch of running began
    progress: float = 0.0
    restarts: int = 0

    def pause(self, now: float) -> None:
        """Bank the progress of the current stretch of running."""
        if self.segment is not None:
            self.progress += now - self.segment
            self.segment = None

    def requeue(self, now: float, overhead: float) -> None:
        """Stop for good: keep the progress a restart keeps (the simulator's rule)."""
        self.pause(now)
        if self.job.resumable:
            self.progress -= min(self.progress, overhead)
        else:
            self.progress = 0.0


class DryRunExecutor:
    """An in-memory cluster of the scenario's nodes that logs actions as JSON lines.

    Parameters
    ----------
    scenario
        Gives the nodes (names, GPU types, sizes).
    out
        A text stream, or a path the log is appended to; ``None`` is standard output.
    clock
        Wall-clock time in seconds (injected so tests control time).
    """

    name = "dryrun"

    def __init__(
        self,
        scenario: Scenario,
        out: IO[str] | str | Path | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.scenario = scenario
        self.clock = clock
        self._own_stream = isinstance(out, str | Path)
        if isinstance(out, str | Path):
            self._out: IO[str] = open(out, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        else:
            self._out = out if out is not None else sys.stdout
        self._jobs: dict[str, _Record] = {}
        self._drained: dict[str, str] = {}
        self._reasons: dict[str, str] = {}
        self._next_id = 1

    # -- Executor ---------------------------------------------------------------------

    def observe(self) -> ClusterState:
        """The in-memory cluster now; jobs whose work is done are marked finished."""
        now = self.clock()
        for rec in self._jobs.values():
            done = (
                rec.phase == "running" and rec.job.duration is not None and rec.segment is not None
                and rec.progress + (now - rec.segment) >= rec.job.duration
            )
            if done:
                rec.progress, rec.segment = rec.job.duration or 0.0, None
                rec.phase, rec.nodes, rec.run_start = "finished", (), None
        nodes = tuple(
            ObservedNode(
                name=n.name, native=n.name, gpus=n.gpus, gpu_type=n.gpu_type,
                state="drained" if n.name in self._drained else "idle",
                drained=n.name in self._drained, reason=self._drained.get(n.name, ""),
            )
            for n in self.scenario.nodes
        )
        jobs = tuple(
            ObservedJob(
                job=name, native_id=rec.native_id, phase=rec.phase, project=rec.job.project,
                gpus=rec.job.gpus, nodes=rec.nodes, run_start=rec.run_start,
                min_runtime=rec.job.min_runtime, resumable=rec.job.resumable,
                restarts=rec.restarts,
            )
            for name, rec in self._jobs.items()
        )
        return ClusterState(at=now, nodes=nodes, jobs=jobs)

    def apply(self, plan: Plan, slice_index: int) -> ApplyReport:
        """Apply slice ``slice_index`` to the in-memory cluster and log every result."""
        state = self.observe()
        steps, results = reconcile(state, plan, slice_index)
        done = list(results)
        for step in steps:
            rec = self._jobs[step.job]
            if step.in_place:
                rec.phase, rec.segment = "running", state.at
            elif step.action in ("start", "resume"):
                rec.phase, rec.nodes = "running", step.nodes
                rec.run_start = rec.segment = state.at
            else:
                if rec.phase == "running":
                    rec.restarts += 1
                    rec.requeue(state.at, self.scenario.policy.restart_overhead)
                rec.phase, rec.nodes, rec.run_start = "held", (), None
            done.append(ActionResult(job=step.job, action=step.action, ok=True, changed=True,
                                     nodes=step.nodes, native_id=step.native_id))
        report = ApplyReport(slice_index=slice_index, at=state.at, results=tuple(done))
        for r in report.results:
            self._log(r, slice_index)
        return report

    # -- capabilities -----------------------------------------------------------------

    def submit(self, job: Job) -> ActionResult:
        """Add ``job`` held; a no-op when a job of that name is already known."""
        if job.id in self._jobs:
            rec = self._jobs[job.id]
            return self._log(ActionResult(job=job.id, action="submit", ok=True,
                                          native_id=rec.native_id, detail="already submitted"))
        rec = _Record(job=job, native_id=str(self._next_id))
        self._next_id += 1
        self._jobs[job.id] = rec
        return self._log(ActionResult(job=job.id, action="submit", ok=True, changed=True,
                                      native_id=rec.native_id))

    def suspend(self, job: str) -> ActionResult:
        """Stop a running job in place: it keeps its nodes and its progress so far."""
        rec = self._jobs.get(job)
        if rec is None or rec.phase != "running":
            return self._log(ActionResult(job=job, action="suspend", ok=False,
                                          detail="not running" if rec else "no such job"))
        rec.pause(self.clock())
        rec.phase = "suspended"
        return self._log(ActionResult(job=job, action="suspend", ok=True, changed=True,
                                      nodes=rec.nodes, native_id=rec.native_id))

    def resume(self, job: str) -> ActionResult:
        """Resume a suspended job on its nodes."""
        rec = self._jobs.get(job)
        if rec is None or rec.phase != "suspended":
            return self._log(ActionResult(job=job, action="resume", ok=False,
                                          detail="not suspended" if rec else "no such job"))
        rec.phase, rec.segment = "running", self.clock()
        return self._log(ActionResult(job=job, action="resume", ok=True, changed=True,
                                      nodes=rec.nodes, native_id=rec.native_id))

    def drain(self, node: str, reason: str) -> ActionResult:
        """Mark ``node`` drained: the planner and :func:`reconcile` give it no new work."""
        changed = self._drained.get(node) != reason
        self._drained[node] = reason
        return self._log(ActionResult(job="", action="drain", ok=True, changed=changed,
                                      nodes=(node,), detail=reason))

    def undrain(self, node: str) -> ActionResult:
        """Return ``node`` to service."""
        changed = self._drained.pop(node, None) is not None
        return self._log(ActionResult(job="", action="undrain", ok=True, changed=changed,
                                      nodes=(node,)))

    def set_reason(self, job: str, text: str) -> ActionResult:
        """Keep ``text`` as ``job``'s state line; logged only when it changed."""
        rec = self._jobs.get(job)
        if rec is None:
            return self._log(ActionResult(job=job, action="reason", ok=False, detail="no such job"))
        if self._reasons.get(job) == text:
            return ActionResult(job=job, action="reason", ok=True, native_id=rec.native_id, detail=text)
        self._reasons[job] = text
        return self._log(ActionResult(job=job, action="reason", ok=True, changed=True,
                                      native_id=rec.native_id, detail=text))

    def reason(self, job: str) -> str | None:
        """The state line last set for ``job``, if any."""
        return self._reasons.get(job)

    def close(self) -> None:
        """Close the log file if this executor opened it."""
        if self._own_stream:
            self._out.close()

    def _log(self, result: ActionResult, slice_index: int | None = None) -> ActionResult:
        line: dict[str, Any] = {"at": self.clock(), "executor": self.name, "slice": slice_index}
        line.update(result.model_dump(mode="json"))
        self._out.write(json.dumps(line) + "\n")
        self._out.flush()
        return result


def create(scenario: Scenario, options: Mapping[str, str]) -> DryRunExecutor:
    """Registry factory; option ``log`` is a file to append the JSON lines to."""
    unknown = set(options) - {"log"}
    if unknown:
        raise ValueError(f"dryrun executor: unknown option(s) {', '.join(sorted(unknown))} (known: log)")
    log = options.get("log")
    if log is not None:
        # Open the log now, so an unwritable path fails before the run does anything.
        if not log:
            raise ValueError("dryrun executor: log= needs a file path")
        try:
            return DryRunExecutor(scenario, log)
        except OSError as exc:
            raise ValueError(f"dryrun executor: log={log}: cannot write: {exc.strerror}") from None
    return DryRunExecutor(scenario, None)
