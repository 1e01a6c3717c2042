"""The dryrun executor: JSON-lines log, in-memory state, idempotent apply."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from models import Scenario
from planner.executors import (
    Executor,
    SupportsDrain,
    SupportsReasons,
    SupportsSubmit,
    SupportsSuspend,
)
from planner.executors.dryrun import DryRunExecutor


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _executor(scenario: Scenario, clock: Clock) -> tuple[DryRunExecutor, io.StringIO]:
    out = io.StringIO()
    ex = DryRunExecutor(scenario, out, clock=clock)
    for job in scenario.jobs:
        ex.submit(job)
    return ex, out


def _lines(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


class _Minimal:
    name = "minimal"

    def observe(self) -> None: ...

    def apply(self, plan: object, slice_index: int) -> None: ...


def test_capabilities_are_detected_with_isinstance(scenario: Scenario) -> None:
    """dryrun offers every capability; an executor with only observe/apply offers none."""
    ex = DryRunExecutor(scenario, io.StringIO())
    assert isinstance(ex, Executor)
    assert all(isinstance(ex, cap) for cap in (SupportsSubmit, SupportsDrain, SupportsSuspend))
    assert isinstance(_Minimal(), Executor)
    assert not any(isinstance(_Minimal(), cap) for cap in (SupportsSubmit, SupportsDrain, SupportsSuspend))


def test_suspended_job_keeps_nodes_and_progress_and_is_resumed_in_place(scenario: Scenario,
                                                                        plans: Any) -> None:
    """Suspending stops progress; the next apply of a slice that keeps the job resumes it
    on the same nodes without a restart."""
    clock = Clock()
    ex, _ = _executor(scenario, clock)
    plan = plans([{"free": ("alpha-h100-000",)}])
    ex.apply(plan, 0)
    clock.t += 600
    assert ex.suspend("free").changed
    assert not ex.suspend("free").ok  # not running any more
    clock.t += 5000  # suspended time does not count towards the 3600 s of work
    held = ex.observe().job("free")
    assert held is not None and (held.phase, held.nodes) == ("suspended", ("alpha-h100-000",))
    report = ex.apply(plan, 0)
    assert [(r.action, r.changed) for r in report.changed] == [("resume", True)]
    clock.t += 2999
    again = ex.observe().job("free")
    assert again is not None and (again.phase, again.restarts) == ("running", 0)
    clock.t += 1
    assert ex.observe().job("free").phase == "finished"


def test_actions_are_logged_as_json_lines(scenario: Scenario, plans: Any) -> None:
    """Each action is one JSON object with time, slice, job, action, nodes and outcome."""
    clock = Clock()
    ex, out = _executor(scenario, clock)
    out.truncate(0)
    out.seek(0)
    ex.apply(plans([{"free": ("alpha-h100-000",)}]), 0)
    (line,) = [entry for entry in _lines(out) if entry["changed"]]
    assert line == {
        "at": 1000.0, "executor": "dryrun", "slice": 0, "job": "free", "action": "start",
        "ok": True, "changed": True, "nodes": ["alpha-h100-000"], "native_id": "1", "detail": "",
    }


def test_applying_the_same_slice_twice_changes_nothing(scenario: Scenario, plans: Any) -> None:
    """The second apply of a slice reports only no-ops and leaves the state as it was."""
    clock = Clock()
    ex, _ = _executor(scenario, clock)
    plan = plans([{"free": ("alpha-h100-000",), "gang": ("alpha-h100-000", "alpha-h100-001")}])
    first = ex.apply(plan, 0)
    assert {r.job for r in first.changed} == {"free", "gang"}
    before = ex.observe()
    clock.t += 1
    second = ex.apply(plan, 0)
    assert second.ok and not second.changed
    assert ex.observe().jobs == before.jobs


def test_preempt_then_resume_keeps_progress(scenario: Scenario, plans: Any) -> None:
    """A preempted resumable job is held with one restart and resumes from its progress
    less the restart overhead."""
    clock = Clock()
    ex, _ = _executor(scenario, clock)
    plan = plans([{"free": ("alpha-h100-000",)}, {}, {"free": ("alpha-h100-001",)}])
    ex.apply(plan, 0)
    clock.t += 1800
    report = ex.apply(plan, 1)
    assert [(r.job, r.action) for r in report.changed] == [("free", "preempt")]
    held = ex.observe().job("free")
    assert held is not None and held.phase == "held" and held.restarts == 1
    clock.t += 100
    resumed = ex.apply(plan, 2)
    assert [(r.job, r.action) for r in resumed.changed] == [("free", "resume")]
    # The restart costs the policy's overhead, as in the simulator: 1800 s of work
    # done, 1800 - overhead kept, so 1800 + overhead more to go.
    overhead = scenario.policy.restart_overhead
    assert overhead > 0
    clock.t += 1800 + overhead - 1
    assert ex.observe().job("free").phase == "running"
    clock.t += 1
    assert ex.observe().job("free").phase == "finished"


def test_drained_node_is_refused(scenario: Scenario, plans: Any) -> None:
    """After drain(), a start on that node fails and the job stays held."""
    ex, _ = _executor(scenario, Clock())
    assert ex.drain("beta-b200-000", "psu").changed
    report = ex.apply(plans([{"b200": ("beta-b200-000",)}]), 0)
    assert [r.detail for r in report.failed] == ["node beta-b200-000 is drained (psu)"]
    assert ex.observe().job("b200").phase == "held"
    assert ex.undrain("beta-b200-000").changed
    assert ex.apply(plans([{"b200": ("beta-b200-000",)}]), 0).ok


def test_submit_twice_is_a_noop(scenario: Scenario) -> None:
    """Submitting a job already known changes nothing and keeps its id."""
    ex, _ = _executor(scenario, Clock())
    again = ex.submit(scenario.jobs[0])
    assert again.ok and not again.changed and again.native_id == "1"
    assert len(ex.observe().jobs) == len(scenario.jobs)


def test_log_file_is_appended(scenario: Scenario, tmp_path: Path, plans: Any) -> None:
    """With a path, lines are appended to the file and survive a new executor."""
    path = tmp_path / "actions.jsonl"
    for _ in range(2):
        ex = DryRunExecutor(scenario, path, clock=Clock())
        ex.submit(scenario.jobs[0])
        ex.close()
    assert [json.loads(x)["action"] for x in path.read_text().splitlines()] == ["submit", "submit"]


def test_set_reason_is_kept_and_logged_only_when_it_changes(scenario: Scenario) -> None:
    """dryrun keeps a job's state line; the same text again logs nothing and is unchanged."""
    ex, out = _executor(scenario, Clock())
    assert isinstance(ex, SupportsReasons)
    before = len(_lines(out))
    first = ex.set_reason("short", "waiting: every pool it may use is full")
    again = ex.set_reason("short", "waiting: every pool it may use is full")
    other = ex.set_reason("short", "running preemptible (past its minimum runtime)")
    assert (first.changed, again.changed, other.changed) == (True, False, True)
    logged = _lines(out)[before:]
    assert [(line["action"], line["detail"]) for line in logged] == [
        ("reason", "waiting: every pool it may use is full"),
        ("reason", "running preemptible (past its minimum runtime)"),
    ]
    assert ex.reason("short") == "running preemptible (past its minimum runtime)"


def test_set_reason_of_an_unknown_job_fails(scenario: Scenario) -> None:
    """A reason for a job dryrun does not know is a failed result, not an exception."""
    ex, _ = _executor(scenario, Clock())
    assert not ex.set_reason("nope", "waiting").ok
