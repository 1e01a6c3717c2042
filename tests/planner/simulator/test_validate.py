"""The independent event-log validator: every policy passes it, broken logs fail it."""

from __future__ import annotations

import pandas as pd
import pytest

from planner.simulator import simulate
from planner.simulator.validate import check_events, check_result
from scenarios import load_scenario
from scenarios.load import scenario_from_dict

POLICIES = ("legacy", "fairshare", "mip")


def small_generated():
    """A generated third of a day on 8 nodes of two pools, 3 projects, one drain."""
    return scenario_from_dict({
        "name": "small",
        "clusters": [{"name": "c", "node_groups": [
            {"gpu_type": "H100", "nodes": 6}, {"gpu_type": "B200", "nodes": 2}]}],
        "org": [{"name": "x", "share": 2, "children": [
            {"name": "p1", "share": 1}, {"name": "p2", "share": 2}]},
            {"name": "y", "share": 1}],
        "maintenance": [{"cluster": "c", "nodes": 2, "start": "2h", "duration": "2h"}],
        "policy": {"epoch": "1h", "slices": 4},
        "workloads": {"generate": {"seed": 3, "days": 0.3, "users": 12, "load": 1.5}},
    })


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_passes_on_tiny(policy):
    """No policy oversubscribes a node or breaks a contract on the bundled tiny scenario."""
    s = load_scenario("tiny")
    r = simulate(s, policy, time_limit=5.0) if policy == "mip" else simulate(s, policy)
    assert (r.events["event"] == "start").any()
    assert check_result(s, r) == []


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_passes_on_a_small_generated_scenario(policy):
    """No policy breaks a rule on a generated, overloaded, drained workload."""
    s = small_generated()
    opts = {"time_limit": 5.0} if policy == "mip" else {}
    r = simulate(s, policy, days=0.4, **opts)
    assert r.jobs["started"].sum() > len(r.jobs) // 2
    assert check_result(s, r) == []


def _log(rows):
    cols = ["t", "event", "job", "project", "pool", "nodes", "gpus", "per_node", "detail"]
    return pd.DataFrame(rows, columns=cols)


def test_oversubscription_is_reported(scenario):
    """Two 8-GPU jobs started on the same 8-GPU node are an oversubscription."""
    s = scenario([
        {"id": "A", "project": "a", "gpus": 8, "duration": 3600},
        {"id": "B", "project": "a", "gpus": 8, "duration": 3600},
    ])
    node = s.nodes[0].name
    log = _log([
        (0.0, "submit", "A", "a", "", "", 8, 0, ""),
        (0.0, "submit", "B", "a", "", "", 8, 0, ""),
        (0.0, "start", "A", "a", "c/H100", node, 8, 8, "charged"),
        (0.0, "start", "B", "a", "c/H100", node, 8, 8, "charged"),
    ])
    errors = check_events(s, "fairshare", log)
    assert any("oversubscribed" in e for e in errors)


def test_preemption_inside_the_contract_is_reported(scenario):
    """Preempting charged work before its minimum runtime breaks the contract."""
    s = scenario([{"id": "A", "project": "a", "gpus": 8, "duration": 7200,
                   "min_runtime": 3600, "resumable": True}])
    node = s.nodes[0].name
    log = _log([
        (0.0, "submit", "A", "a", "", "", 8, 0, ""),
        (0.0, "start", "A", "a", "c/H100", node, 8, 8, "charged"),
        (1800.0, "preempt", "A", "a", "c/H100", node, 8, 8, "fair share: X"),
    ])
    errors = check_events(s, "fairshare", log)
    assert any("inside its minimum runtime" in e for e in errors)
    # The same preemption is fine once the contract has passed.
    ok = log.assign(t=[0.0, 0.0, 3600.0])
    assert check_events(s, "fairshare", ok) == []


def test_wrong_finish_time_and_drained_start_are_reported(scenario):
    """A job finishing early, and a start on a node under maintenance, are both caught."""
    s = scenario(
        [{"id": "A", "project": "a", "gpus": 8, "duration": 3600}],
        maintenance=[{"nodes": 1, "start": 0, "duration": 600}],
    )
    node = s.nodes[0].name
    log = _log([
        (0.0, "submit", "A", "a", "", "", 8, 0, ""),
        (0.0, "start", "A", "a", "c/H100", node, 8, 8, "charged"),
        (1800.0, "finish", "A", "a", "c/H100", node, 8, 8, ""),
    ])
    errors = check_events(s, "fairshare", log)
    assert any("drained" in e for e in errors)
    assert any("finished after 1800s of work" in e for e in errors)


def test_legacy_protected_preemption_is_reported(scenario):
    """Under legacy, preempting a job that started protected is a violation."""
    s = scenario([{"id": "A", "project": "a", "gpus": 8, "duration": 7200}])
    node = s.nodes[0].name
    log = _log([
        (0.0, "submit", "A", "a", "", "", 8, 0, ""),
        (0.0, "start", "A", "a", "c/H100", node, 8, 8, "protected"),
        (10.0, "preempt", "A", "a", "c/H100", node, 8, 8, "priority: B"),
    ])
    assert any("protected" in e for e in check_events(s, "legacy", log))
