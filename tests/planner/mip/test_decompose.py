"""Very large epochs are planned in parts of whole clusters, then merged (POP-like)."""

from __future__ import annotations

import pytest

from planner.mip import plan_epoch
from planner.mip.decompose import split

from .test_lp_guided import medium_snapshot
from .test_properties import check_plan


def test_split_deals_every_node_and_job_once() -> None:
    """Each node and each job is in exactly one part; a running job stays with its nodes."""
    snapshot = medium_snapshot()
    parts = split(snapshot, 3)
    assert len(parts) == 3
    nodes = [n.node.name for p in parts for n in p.nodes]
    jobs = [s.job.id for p in parts for s in p.jobs]
    assert sorted(nodes) == sorted(n.node.name for n in snapshot.nodes)
    assert sorted(jobs) == sorted(s.job.id for s in snapshot.jobs)
    for part in parts:
        names = {n.node.name for n in part.nodes}
        assert len({n.node.cluster for n in part.nodes}) == 1  # whole clusters
        for st in part.jobs:
            if st.status == "running":
                assert set(st.nodes) <= names


def test_split_shares_add_up_to_the_project_standing() -> None:
    """A project's owed share and headroom are split between parts, not created."""
    snapshot = medium_snapshot()
    parts = split(snapshot, 3)
    for project, st in snapshot.standing.items():
        assert sum(p.standing[project].owed_gpus for p in parts) == pytest.approx(st.owed_gpus)
        assert sum(p.standing[project].headroom_gpu_h for p in parts) == pytest.approx(st.headroom_gpu_h)


def test_split_sends_a_job_only_where_it_may_run() -> None:
    """A queued job goes to a part with a pool it allows."""
    snapshot = medium_snapshot()
    for part in split(snapshot, 3):
        pools = {(n.node.cluster, n.node.gpu_type) for n in part.nodes}
        for st in part.jobs:
            assert any(st.job.allows(c, t) for c, t in pools)


@pytest.mark.parametrize("lanes", [1, 2])
def test_decomposed_plan_keeps_every_invariant(lanes: int) -> None:
    """The merged plan of three parts is one valid plan of the whole snapshot, whether
    the parts were planned one after another or side by side in two lanes."""
    snapshot = medium_snapshot()
    plan = plan_epoch(snapshot, time_limit=6.0, decompose=3, lanes=lanes)
    assert "decomposed by cluster into 3 parts" in plan.solver.message
    assert ("planned in 2 lanes" in plan.solver.message) == (lanes == 2)
    assert "planned after" not in plan.solver.message
    assert not plan.solver.fallback
    assert plan.solver.objective is not None and plan.solver.bound is not None
    check_plan(snapshot, plan)
