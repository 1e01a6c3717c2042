"""Property: whatever `validate` accepts, `scenario show` and a one-epoch `plan` handle.

Values are drawn at and near the documented limits (tiny and huge shares, rates,
durations up to ten years, extreme priorities, epochs of one second to a week), on the
tiny scenario's shape; sizes stay small so each plan is quick (the size limits
themselves are tested in ``tests/models/test_limits.py``).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models import limits
from planner.cli import main
from planner.cli.scenario import capacity_table, org_table, workload_table
from planner.mip import plan_epoch
from planner.snapshot import snapshot_at
from scenarios import ScenarioError, scenario_from_dict

TINY: dict[str, Any] = yaml.safe_load(
    (Path(__file__).resolve().parents[3] / "scenarios" / "tiny.yaml").read_text()
)
TEN_YEARS = limits.MAX_SECONDS


def _edge_floats(low: float, high: float) -> st.SearchStrategy[float]:
    """The bounds, values next to them, and anything between."""
    return st.one_of(
        st.sampled_from([low, high, low * 1.000001 if low else 1e-9, high * 0.999999]),
        st.floats(min_value=low, max_value=high, allow_nan=False, allow_infinity=False),
    )


SECONDS = _edge_floats(0.0, TEN_YEARS)
POSITIVE_SECONDS = _edge_floats(1.0, TEN_YEARS)
SHARES = _edge_floats(limits.MIN_SHARE, limits.MAX_SHARE)
RATES = _edge_floats(limits.MIN_RATE, limits.MAX_RATE)

EDITS: dict[str, st.SearchStrategy[Any]] = {
    "gpu_types.H100.rate": RATES,
    "gpu_types.B200.rate": RATES,
    "org.0.share": SHARES,
    "org.0.children.0.share": SHARES,
    "org.1.share": SHARES,
    "clusters.0.node_groups.0.nodes": st.integers(1, 16),
    "clusters.0.node_groups.0.gpus_per_node": st.sampled_from([1, 2, 8, limits.MAX_GPUS_PER_NODE]),
    "policy.epoch": _edge_floats(1.0, limits.MAX_EPOCH_SECONDS),
    "policy.slices": st.integers(1, 96),
    "policy.lookback": _edge_floats(1.0, limits.MAX_LOOKBACK_SECONDS),
    "policy.max_min_runtime": SECONDS,
    "policy.urgent_charge": _edge_floats(1.0, limits.MAX_URGENT_CHARGE),
    "policy.restart_overhead": SECONDS,
    "maintenance.0.start": SECONDS,
    "maintenance.0.duration": POSITIVE_SECONDS,
    "budget_revisions": st.lists(
        st.fixed_dictionaries({"at": SECONDS, "shares": st.fixed_dictionaries({"research": SHARES})}),
        max_size=2,
    ),
    "workloads.jobs.0.submit": SECONDS,
    "workloads.jobs.0.duration": POSITIVE_SECONDS,
    "workloads.jobs.0.min_runtime": SECONDS,
    "workloads.jobs.1.priority": st.integers(-limits.MAX_PRIORITY, limits.MAX_PRIORITY),
    "workloads.jobs.1.urgent": st.booleans(),
    "workloads.jobs.2.gpus": st.integers(1, 64),
    "workloads.jobs.2.duration": _edge_floats(1e-3, TEN_YEARS),
}


def _apply(data: dict[str, Any], path: str, value: Any) -> None:
    node: Any = data
    parts = [int(p) if p.isdigit() else p for p in path.split(".")]
    for part in parts[:-1]:
        node = node.setdefault(part, {}) if isinstance(node, dict) else node[part]
    node[parts[-1]] = value


@st.composite
def edited_tiny(draw: st.DrawFn) -> tuple[dict[str, Any], float]:
    data = copy.deepcopy(TINY)
    data.setdefault("policy", {})
    keys = draw(st.lists(st.sampled_from(sorted(EDITS)), min_size=1, max_size=6, unique=True))
    for key in keys:
        _apply(data, key, draw(EDITS[key]))
    at = draw(st.one_of(st.just(0.0), SECONDS))
    return data, at


@settings(derandomize=True, max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(edited_tiny())
def test_every_scenario_that_loads_can_be_shown_and_planned(case: tuple[dict[str, Any], float]) -> None:
    """No exception from show's tables or from planning one epoch of a valid scenario."""
    data, at = case
    try:
        scenario = scenario_from_dict(data, "edited.yaml")
    except ScenarioError:
        return  # refused with the clean error: the other fuzz tests check its shape
    for table in (capacity_table(scenario), org_table(scenario), workload_table(scenario)):
        assert table
    plan = plan_epoch(snapshot_at(scenario, at), time_limit=1.0)
    assert plan.epoch_start == at


@pytest.mark.parametrize(
    "argv",
    [["scenario", "show", "{path}"], ["plan", "{path}", "--time-limit", "1", "--at", "3650d"]],
)
def test_the_commands_take_a_scenario_at_its_time_limits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """A job submitted ten years in and lasting ten years: both commands exit 0."""
    data = copy.deepcopy(TINY)
    data["workloads"]["jobs"][0].update(submit="3650d", duration="3650d")
    path = tmp_path / "far.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main([a.format(path=path) for a in argv]) == 0, capsys.readouterr().err
