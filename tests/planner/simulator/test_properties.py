"""Property tests: on random small workloads no policy breaks a rule of the validator."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.simulator import simulate
from planner.simulator.validate import check_result

from .conftest import build_scenario

H = 3600.0

job = st.fixed_dictionaries({
    "project": st.sampled_from(["a", "b", "c"]),
    "gpus": st.sampled_from([1, 2, 4, 8, 16]),
    "submit": st.integers(0, 6).map(lambda k: k * 900.0),
    "duration": st.integers(1, 16).map(lambda k: k * 600.0),
    "min_runtime": st.sampled_from([0.0, 300.0, 900.0, 3600.0]),
    "resumable": st.booleans(),
})
workloads = st.lists(job, min_size=1, max_size=12).map(
    lambda jobs: [{"id": f"j{i}", **j} for i, j in enumerate(jobs)]
)


def _scenario(jobs):
    return build_scenario(
        jobs, nodes=3, shares={"a": 3, "b": 2, "c": 1},
        maintenance=[{"nodes": 1, "start": 1800, "duration": H}],
    )


@settings(derandomize=True, max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(workloads)
def test_greedy_policies_never_break_a_rule(jobs):
    """legacy and fairshare never oversubscribe a node, split a gang or break a contract."""
    s = _scenario(jobs)
    for policy in ("legacy", "fairshare"):
        r = simulate(s, policy, days=4 / 24)
        assert check_result(s, r) == [], policy


@settings(derandomize=True, max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(workloads)
def test_mip_never_breaks_a_rule(jobs):
    """The mip policy's plan execution and backfill keep every rule too."""
    s = _scenario(jobs)
    r = simulate(s, "mip", days=3 / 24, time_limit=2.0)
    assert check_result(s, r) == []
