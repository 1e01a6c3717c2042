"""The scenarios shipped in ``scenarios/``: they load, have the promised shape and load."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

from models import JobKind, Scenario, walk
from planner.cli import main as cli_main
from scenarios import bundled_scenarios, load_scenario

ROOT = Path(__file__).resolve().parents[2]


@cache
def scenario(name: str) -> Scenario:
    return load_scenario(name)


def test_bundled_set() -> None:
    """gpuplan ships tiny, ai2-like and philly-week."""
    assert {"tiny", "ai2-like", "philly-week"} <= set(bundled_scenarios())


@pytest.mark.parametrize("name", sorted(bundled_scenarios()))
def test_every_bundled_scenario_loads(name: str) -> None:
    """Each bundled scenario loads, by name, with jobs."""
    s = scenario(name)
    assert s.name == name
    assert s.jobs


def test_ai2_like_clusters() -> None:
    """Four clusters of 88 to 1,024 GPUs; H100, B200 and B300; one cluster with two types."""
    s = scenario("ai2-like")
    gpus = {c.name: sum(n.gpus for n in c.nodes()) for c in s.clusters}
    assert len(gpus) == 4
    assert min(gpus.values()) == 88 and max(gpus.values()) == 1024
    assert {p.gpu_type for p in s.pools} == {"H100", "B200", "B300"}
    assert len(s.pools) == 5


def test_ai2_like_org_tree() -> None:
    """5 programs, 15 teams and 40 projects, with uneven shares."""
    s = scenario("ai2-like")
    depth = [path.count("/") for path, _ in walk(s.org)]
    assert (depth.count(0), depth.count(1), depth.count(2)) == (5, 15, 40)
    assert len(s.projects) == 40
    assert len({u.share for u in s.org}) == 5


def test_ai2_like_workload() -> None:
    """One drain; 8k-20k jobs from about 150 users with the documented mix."""
    s = scenario("ai2-like")
    assert len(s.maintenance) == 1
    jobs = s.jobs
    assert 8_000 <= len(jobs) <= 20_000
    assert 120 <= len({j.user for j in jobs}) <= 150
    assert sum(j.kind == JobKind.DEBUG for j in jobs) / len(jobs) > 0.5
    assert any(j.gpus >= 256 for j in jobs)
    assert any(j.kind == JobKind.INTERACTIVE for j in jobs)
    assert any(j.min_runtime == 0 for j in jobs)


def test_philly_week_shape() -> None:
    """One H100 cluster that fits the largest gang; each virtual cluster its own project."""
    s = scenario("philly-week")
    assert {p.gpu_type for p in s.pools} == {"H100"}
    assert max(j.gpus for j in s.jobs) <= sum(n.gpus for n in s.nodes)
    assert len({j.project for j in s.jobs}) == 11


def _comment_figure(name: str) -> float:
    """The demand figure written in the scenario's header comment."""
    text = (ROOT / "scenarios" / f"{name}.yaml").read_text()
    match = re.search(r"is\s+([0-9.]+) x capacity|=\s+([0-9.]+) x the", text)
    assert match, f"{name}.yaml states no measured demand figure"
    return float(match.group(1) or match.group(2))


@pytest.mark.parametrize("name", ["ai2-like", "philly-week"])
def test_measured_demand_between_2_and_3(
    name: str, benchmark_script: Callable[[str], ModuleType]
) -> None:
    """Time-averaged running + queued GPUs is 2-3x capacity, as the YAML comment states
    (``benchmarks/scenario_load.py``, the FIFO-with-backfill load estimator)."""
    figures = benchmark_script("scenario_load").estimate_load(scenario(name))
    assert 2.0 <= figures.demand <= 3.0
    assert figures.demand == pytest.approx(_comment_figure(name), abs=0.01)


def test_ai2_like_queue_is_stable(benchmark_script: Callable[[str], ModuleType]) -> None:
    """ai2-like arrivals stay below capacity: the queue drains within days of the week's end."""
    figures = benchmark_script("scenario_load").estimate_load(scenario("ai2-like"))
    assert figures.drain_h < 72


def test_demo_commands(capsys: pytest.CaptureFixture[str]) -> None:
    """``gpuplan validate ai2-like`` and ``gpuplan scenario show ai2-like`` (make demo) succeed."""
    assert cli_main(["validate", "ai2-like"]) == 0
    assert "ok: scenario 'ai2-like'" in capsys.readouterr().out
    assert cli_main(["scenario", "show", "ai2-like"]) == 0
    assert "jupiter/H100" in capsys.readouterr().out
