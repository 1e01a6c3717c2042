"""Builders of small inline scenarios for the simulator tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from models import Cluster, Job, Maintenance, NodeGroup, OrgUnit, Policy, Scenario, Workloads

Build = Callable[..., Scenario]


def build_scenario(
    jobs: list[dict[str, Any]],
    *,
    nodes: int = 1,
    gpu_type: str = "H100",
    shares: dict[str, float] | None = None,
    maintenance: list[dict[str, Any]] | None = None,
    policy: dict[str, Any] | None = None,
) -> Scenario:
    """One cluster ``c`` of ``nodes`` 8-GPU nodes, flat projects, inline jobs."""
    shares = shares or {"a": 1.0}
    return Scenario(
        name="inline",
        clusters=(Cluster(name="c", node_groups=(NodeGroup(gpu_type=gpu_type, nodes=nodes),)),),
        org=tuple(OrgUnit(name=p, share=s) for p, s in shares.items()),
        policy=Policy(**(policy or {})),
        maintenance=tuple(Maintenance(cluster="c", **m) for m in (maintenance or [])),
        workloads=Workloads(jobs=tuple(Job(**j) for j in jobs)),
    )


@pytest.fixture
def scenario() -> Build:
    """The :func:`build_scenario` factory."""
    return build_scenario
