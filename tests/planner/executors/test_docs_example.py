"""The worked example plugin of docs/executors.md runs and behaves as the page says."""

from __future__ import annotations

import re
import time
import tomllib
import types
from pathlib import Path
from typing import Any

import pytest

from models import Scenario
from planner.executors import Executor, ExecutorRegistry

DOC = Path(__file__).resolve().parents[3] / "docs" / "executors.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)


@pytest.fixture()
def example() -> types.ModuleType:
    """The documented plugin module, executed from the page's code block."""
    (source,) = [b for b in _blocks("python") if "class InHouseExecutor" in b]
    module = types.ModuleType("gpuplan_inhouse_executor")
    exec(compile(source, str(DOC), "exec"), module.__dict__)
    return module


class FakeIHP:
    """An in-memory In-House Platform with the four calls the example uses."""

    def __init__(self, scenario: Scenario) -> None:
        self.hosts_ = [{"name": n.name, "gpus": n.gpus, "model": n.gpu_type, "maintenance": False}
                       for n in scenario.nodes]
        self.jobs_: list[dict[str, Any]] = [
            {"id": str(i), "name": j.id, "status": "queued", "gpus": j.gpus, "hosts": []}
            for i, j in enumerate(scenario.jobs)
        ]
        self.calls: list[tuple[str, str]] = []

    def hosts(self) -> list[dict[str, Any]]:
        return self.hosts_

    def jobs(self) -> list[dict[str, Any]]:
        return [dict(j) for j in self.jobs_]

    def place(self, job_id: str, hosts: list[str]) -> None:
        self.calls.append(("place", job_id))
        job = next(j for j in self.jobs_ if j["id"] == job_id)
        job.update(status="running", hosts=hosts, started=time.time())

    def requeue(self, job_id: str) -> None:
        self.calls.append(("requeue", job_id))
        job = next(j for j in self.jobs_ if j["id"] == job_id)
        job.update(status="queued", hosts=[], restarts=job.get("restarts", 0) + 1)


def test_example_plugin_applies_slices_idempotently(example: types.ModuleType, scenario: Scenario,
                                                    plans: Any) -> None:
    """The documented executor starts, preempts and protects as planned, and a repeated
    apply makes no call to the platform."""
    client = FakeIHP(scenario)
    ex = example.InHouseExecutor(client, scenario)
    assert isinstance(ex, Executor)
    plan = plans([{"free": ("alpha-h100-000",), "contract": ("alpha-h100-001",)}, {}])
    assert ex.apply(plan, 0).ok
    assert ex.apply(plan, 0).changed == ()
    assert len(client.calls) == 2
    second = ex.apply(plan, 1)
    assert {(r.job, r.action) for r in second.changed} == {("free", "preempt")}
    assert {(r.job, r.action) for r in second.results if not r.changed} == {("contract", "protect")}


def test_example_entry_point_matches_the_code(example: types.ModuleType, scenario: Scenario) -> None:
    """The pyproject snippet's entry point names the documented factory, and a registry
    built from it creates the executor."""
    (snippet,) = [b for b in _blocks("toml") if "gpuplan.executors" in b]
    eps = tomllib.loads(snippet)["project"]["entry-points"]["gpuplan.executors"]
    module_path, _, attr = eps["inhouse"].partition(":")
    assert module_path == "gpuplan_inhouse.executor" and hasattr(example, attr)
    registry = ExecutorRegistry()
    registry.register("inhouse", lambda s, o: example.InHouseExecutor(FakeIHP(s), s))
    assert registry.create("inhouse", scenario).name == "inhouse"
