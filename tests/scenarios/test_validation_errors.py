"""Each validation error of a scenario file is one clear message naming file and field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from scenarios import ScenarioError, load_scenario

TINY = Path(__file__).resolve().parents[2] / "scenarios" / "tiny.yaml"


def _tiny() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(TINY.read_text())
    return data


def _load(tmp_path: Path, data: dict[str, Any]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    load_scenario(path)


def _error(tmp_path: Path, data: dict[str, Any]) -> str:
    with pytest.raises(ScenarioError) as info:
        _load(tmp_path, data)
    text = str(info.value)
    assert text.startswith(str(tmp_path / "bad.yaml") + ": ")
    return text


def test_gang_that_fits_no_pool(tmp_path: Path) -> None:
    """A gang larger than every allowed pool is named with its job and field."""
    data = _tiny()
    data["workloads"]["jobs"][0]["gpus"] = 64
    assert "workloads.jobs[0] (id 'j1').gpus: a gang of 64 GPUs fits no allowed pool" in _error(tmp_path, data)


def test_gang_restricted_to_too_small_pool(tmp_path: Path) -> None:
    """A gang that fits only a pool it is not allowed on is rejected."""
    data = _tiny()
    data["workloads"]["jobs"][0].update(gpus=24, gpu_types=["B200"])
    assert "fits no allowed pool" in _error(tmp_path, data)


def test_unknown_project(tmp_path: Path) -> None:
    """A job naming a project not in the org tree is rejected."""
    data = _tiny()
    data["workloads"]["jobs"][1]["project"] = "research/robotics"
    assert "workloads.jobs[1] (id 'j2').project: unknown project 'research/robotics'" in _error(tmp_path, data)


def test_project_must_be_a_leaf(tmp_path: Path) -> None:
    """A job charged to a unit with children says that it is not a project."""
    data = _tiny()
    data["workloads"]["jobs"][1]["project"] = "research"
    assert "not a project" in _error(tmp_path, data)


def test_duplicate_job_id(tmp_path: Path) -> None:
    """Two jobs with one id are rejected at the second."""
    data = _tiny()
    data["workloads"]["jobs"][3]["id"] = "j1"
    assert "workloads.jobs[3] (id 'j1').id: duplicate job id 'j1'" in _error(tmp_path, data)


@pytest.mark.parametrize("share", [0, -1])
def test_share_must_be_positive(tmp_path: Path, share: float) -> None:
    """A share of zero or less names the org unit's field path."""
    data = _tiny()
    data["org"][0]["children"][1]["share"] = share
    text = _error(tmp_path, data)
    assert "org[0].children[1].share: Input should be greater than 0" in text


def test_min_runtime_above_maximum(tmp_path: Path) -> None:
    """A minimum runtime above the policy's maximum is rejected with both figures."""
    data = _tiny()
    data["workloads"]["jobs"][0]["min_runtime"] = "9h"
    assert "min_runtime: 32400s is above the policy's max_min_runtime of 28800s" in _error(tmp_path, data)


def test_unknown_gpu_type_in_node_group(tmp_path: Path) -> None:
    """A node group of an undeclared GPU type is rejected with the known types."""
    data = _tiny()
    data["clusters"][0]["node_groups"][0]["gpu_type"] = "A100"
    assert "clusters[0].node_groups[0].gpu_type: unknown GPU type 'A100'" in _error(tmp_path, data)


def test_unknown_gpu_type_in_job(tmp_path: Path) -> None:
    """A job asking for an undeclared GPU type is rejected."""
    data = _tiny()
    data["workloads"]["jobs"][0]["gpu_types"] = ["A100"]
    assert "gpu_types: unknown GPU type 'A100'" in _error(tmp_path, data)


def test_unknown_field(tmp_path: Path) -> None:
    """A misspelt key is named."""
    data = _tiny()
    data["policy"]["epochs"] = "1h"
    assert "policy.epochs: unknown field" in _error(tmp_path, data)


def test_bad_duration(tmp_path: Path) -> None:
    """A duration that does not parse names its field."""
    data = _tiny()
    data["policy"]["epoch"] = "an hour"
    assert "policy.epoch: expected a duration" in _error(tmp_path, data)


def test_two_workload_sources(tmp_path: Path) -> None:
    """A scenario must have exactly one workload source."""
    data = _tiny()
    data["workloads"]["generate"] = {"seed": 1}
    assert "exactly one workload source" in _error(tmp_path, data)


def test_maintenance_of_unknown_cluster(tmp_path: Path) -> None:
    """Maintenance on a cluster that does not exist is rejected."""
    data = _tiny()
    data["maintenance"][0]["cluster"] = "gamma"
    assert "maintenance[0].cluster: unknown cluster 'gamma'" in _error(tmp_path, data)


def test_maintenance_node_of_another_cluster(tmp_path: Path) -> None:
    """A named node must belong to the window's cluster, even when the other cluster's
    name starts with this one's (alpha-x's nodes start with 'alpha-')."""
    data = _tiny()
    data["clusters"][1]["name"] = "alpha-x"
    data["maintenance"][0] = {"cluster": "alpha", "node_names": ["alpha-x-b200-000"],
                              "start": "2h", "duration": "4h"}
    assert "maintenance[0].node_names: unknown node 'alpha-x-b200-000' in 'alpha'" in _error(
        tmp_path, data
    )


def test_two_nodes_with_one_name(tmp_path: Path) -> None:
    """GPU types that differ only in case give nodes one name: refused, both named."""
    data = _tiny()
    data["gpu_types"]["h100"] = {"rate": 1.0}
    data["clusters"][0]["node_groups"].append({"gpu_type": "h100", "nodes": 1})
    assert "clusters: two nodes would both be named 'alpha-h100-000'" in _error(tmp_path, data)


def test_maintenance_gpu_type_the_cluster_lacks(tmp_path: Path) -> None:
    """A count of nodes of a GPU type the cluster has none of names the type."""
    data = _tiny()
    data["maintenance"][0]["gpu_type"] = "B200"
    assert "maintenance[0].gpu_type: cluster 'alpha' has no 'B200' nodes" in _error(tmp_path, data)


@pytest.mark.parametrize(
    ("window", "message"),
    [
        ({"node_names": []}, "maintenance[0].node_names: Tuple should have at least 1 item"),
        ({"node_names": ["alpha-h100-000"], "gpu_type": "H100"}, "with 'node_names' leave it out"),
    ],
)
def test_maintenance_node_names_alone_and_not_empty(
    tmp_path: Path, window: dict[str, Any], message: str
) -> None:
    data = _tiny()
    data["maintenance"][0] = {"cluster": "alpha", "start": "2h", "duration": "4h", **window}
    assert message in _error(tmp_path, data)


def test_invalid_yaml(tmp_path: Path) -> None:
    """Broken YAML is reported with its line."""
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nclusters: [\n")
    with pytest.raises(ScenarioError, match=r"not valid YAML at line \d+"):
        load_scenario(path)


def test_missing_file(tmp_path: Path) -> None:
    """A missing file is one message, not a traceback."""
    with pytest.raises(ScenarioError, match="no such file"):
        load_scenario(tmp_path / "nope.yaml")


def test_original_is_valid(tmp_path: Path) -> None:
    """The unmodified tiny scenario loads (the errors above come from the edits)."""
    _load(tmp_path, copy.deepcopy(_tiny()))
