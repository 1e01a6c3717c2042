from __future__ import annotations

import pytest

from planner.mip import plan_epoch
from planner.mip.epoch import build_epoch

from .conftest import SnapBuilder


def _free_non_resumable(ran: float) -> SnapBuilder:
    """Project a, far above its share, runs non-resumable funded job r uncharged on the
    only node; project b, owed the node, queues q."""
    return (
        SnapBuilder(now=7200.0)
        .pool("c", nodes=1)
        .project("a", owed=0.0, ratio=5.0)
        .project("b", owed=8.0, ratio=0.0)
        .running("r", ("c-h100-000",), "a", ran=ran, charged=False, min_runtime=900.0,
                 duration=14400.0, resumable=False)
        .queued("q", "b", duration=7200.0, min_runtime=3600.0)
    )


@pytest.mark.parametrize(("ran", "kept"), [(7200.0, True), (600.0, False)])
def test_the_plan_lets_free_running_non_resumable_funded_work_finish(ran: float, kept: bool) -> None:
    """Stopping r would lose all its progress: after 2 h the plan keeps it in every slice
    (q waits); 10 minutes in, the plan gives the node to q."""
    plan = plan_epoch(_free_non_resumable(ran).build(), time_limit=10.0, rel_gap=0.0)
    runs_r = [any(a.job == "r" for a in s.assignments) for s in plan.slices]
    assert runs_r == [kept] * len(plan.slices)


def test_a_gang_that_spans_nodes_holds_them_whole() -> None:
    """A 12-GPU gang on 8-GPU nodes holds 8 GPUs on each of its nodes, 4 idle or not."""
    pool = build_epoch(SnapBuilder().pool("c", nodes=2).build()).pools[0]
    assert pool.held(12, 2) == 16
    assert pool.held(12, 1) == 8


def test_a_job_on_one_node_holds_its_own_gpus_and_none_once_its_node_is_gone() -> None:
    pool = build_epoch(SnapBuilder().pool("c", nodes=2).build()).pools[0]
    assert pool.held(3, 1) == 3
    assert pool.held(3, 0) == 0
