"""Scenario values: finite, not booleans, within the documented limits (models/limits.py)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from models import Job, parse_duration
from models.limits import MAX_DAYS, MAX_GPUS, MAX_NODES, MAX_NODES_PER_GROUP
from scenarios import ScenarioError, scenario_from_dict

TINY: dict[str, Any] = yaml.safe_load(
    (Path(__file__).resolve().parents[2] / "scenarios" / "tiny.yaml").read_text()
)


def _error(edit: dict[str, Any]) -> str:
    """The message of loading tiny with ``edit`` applied (dotted path -> value)."""
    data = copy.deepcopy(TINY)
    for path, value in edit.items():
        node: Any = data
        parts = [int(p) if p.isdigit() else p for p in path.split(".")]
        for part in parts[:-1]:
            node = node[part]
        node[parts[-1]] = value
    with pytest.raises(ScenarioError) as info:
        scenario_from_dict(data, "s.yaml")
    return str(info.value)


# -- class 4: non-finite numbers -------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "value", "needle"),
    [
        ("gpu_types", {"X1": {"rate": float("inf")}}, "gpu_types.X1.rate: Input should be a finite number"),
        ("gpu_types", {"X1": {"rate": 1e308}}, "gpu_types.X1.rate: Input should be less than or equal to 1000"),
        ("org.0.share", float("inf"), "org[0].share: Input should be a finite number"),
        ("org.0.share", 1e308, "org[0].share: Input should be less than or equal to 1000000"),
        ("policy", {"urgent_charge": float("inf")}, "policy.urgent_charge: Input should be a finite number"),
        ("policy", {"urgent_charge": 1e308}, "policy.urgent_charge: Input should be less than or equal to 100"),
        ("policy", {"lookback": float("inf")}, "policy.lookback: expected a finite duration"),
        ("policy", {"epoch": 1e308}, "policy.epoch: 1e+308 is longer than the limit of 3650 days"),
        ("maintenance.0.duration", float("nan"), "maintenance[0].duration: expected a finite duration"),
    ],
)
def test_non_finite_and_huge_numbers_are_refused(path: str, value: Any, needle: str) -> None:
    """.inf and 1e308 no longer pass validation to crash a later command."""
    assert needle in _error({path: value})


def test_nan_budget_revision_share_is_refused() -> None:
    """A NaN share in a budget revision fails its own range check."""
    text = _error({"budget_revisions": [{"at": "1h", "shares": {"research": float("nan")}}]})
    assert "budget_revisions[0].shares.research: Input should be a finite number" in text


def test_a_job_of_nan_duration_is_refused_not_lost() -> None:
    """`duration: .nan` would make plan skip the job silently; it is refused."""
    job = dict(TINY["workloads"]["jobs"][0], duration=float("nan"))
    assert "workloads.jobs[0].duration: expected a finite duration" in _error({"workloads.jobs.0": job})


def test_durations_past_the_limit_are_refused() -> None:
    """`submit: 100000000w` (two million years) is past the ten-year limit of time values."""
    with pytest.raises(ValueError, match=f"longer than the limit of {MAX_DAYS:g} days"):
        parse_duration("100000000w")
    with pytest.raises(ValueError, match="longer than the limit"):
        parse_duration(10**400)


# -- class 6: silent acceptance --------------------------------------------------------


def test_a_negative_submit_time_is_refused() -> None:
    """`submit: -5m` is refused as `duration: -5m` is."""
    job = dict(TINY["workloads"]["jobs"][0], submit="-5m")
    assert "workloads.jobs[0] (id 'j1').submit: must not be negative" in _error({"workloads.jobs.0": job})


@pytest.mark.parametrize(
    ("path", "value", "needle"),
    [
        ("clusters.0.node_groups.0.nodes", True, "clusters[0].node_groups[0].nodes: expected a number, got true"),
        ("clusters.0.node_groups.0.gpus_per_node", False, "gpus_per_node: expected a number, got false"),
        ("org.0.share", True, "org[0].share: expected a number, got true"),
        ("policy", {"slices": True}, "policy.slices: expected a number, got true"),
    ],
)
def test_booleans_are_not_numbers(path: str, value: Any, needle: str) -> None:
    """`nodes: true` is an error, not one node."""
    assert needle in _error({path: value})


def test_job_gpus_true_is_refused() -> None:
    """A job's gang size cannot be `true`."""
    with pytest.raises(ValueError, match="expected a number, got true"):
        Job(id="j", project="p", gpus=True)  # type: ignore[arg-type]


# -- class 3: sizes ---------------------------------------------------------------------


def test_a_trillion_nodes_is_refused_without_building_them() -> None:
    """`nodes: 1000000000000` stops at the per-group limit at once."""
    text = _error({"clusters.0.node_groups.0.nodes": 10**12})
    assert f"nodes: Input should be less than or equal to {MAX_NODES_PER_GROUP}" in text


def test_total_nodes_over_the_limit_are_refused() -> None:
    """Many groups each under the per-group limit still cannot pass the total."""
    groups = [{"gpu_type": "H100", "nodes": MAX_NODES_PER_GROUP, "gpus_per_node": 1}] * (MAX_NODES // MAX_NODES_PER_GROUP + 1)
    text = _error({"clusters.0.node_groups": groups})
    assert f"clusters[0]: the scenario has more than {MAX_NODES:,} nodes (the limit)" in text


def test_total_gpus_over_the_limit_are_refused() -> None:
    """64-GPU nodes up to the node limit would pass a million GPUs."""
    groups = [{"gpu_type": "H100", "nodes": MAX_NODES_PER_GROUP, "gpus_per_node": 64}] * 2
    assert f"more than {MAX_GPUS:,} GPUs (the limit)" in _error({"clusters.0.node_groups": groups})


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("days", 100000, "workloads.generate.days: Input should be less than or equal to 366"),
        ("users", 1e8, "workloads.generate.users: Input should be less than or equal to 100000"),
        ("load", 1e9, "workloads.generate.load: Input should be less than or equal to 100"),
        ("backlog", "100000w", "workloads.generate.backlog: '100000w' is longer than the limit"),
        ("backlog", "1000d", "workloads.generate.backlog: Input should be less than or equal to"),
        ("seed", -1, "workloads.generate.seed: Input should be greater than or equal to 0"),
    ],
)
def test_generator_parameters_are_bounded(field: str, value: Any, needle: str) -> None:
    """Generator parameters that would grow to gigabytes are refused by their limit."""
    assert needle in _error({"workloads": {"generate": {field: value}}})


def test_generated_job_count_is_bounded_while_drawing() -> None:
    """Every parameter inside its limit can still ask for too many jobs: refused early."""
    data = copy.deepcopy(TINY)
    data["clusters"][0]["node_groups"] = [{"gpu_type": "H100", "nodes": 10000, "gpus_per_node": 64}]
    data["workloads"] = {"generate": {"days": 366, "load": 100}}
    with pytest.raises(ScenarioError, match=r"s.yaml: workloads.generate: .* more than 1,000,000 jobs"):
        scenario_from_dict(data, "s.yaml")
