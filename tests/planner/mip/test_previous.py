"""Placement keeps a job on the nodes it had in the previous plan where it can."""

from __future__ import annotations

from models import Assignment, Plan, Slice, SolverInfo, SolveStatus
from planner.mip import plan_epoch

from .conftest import SnapBuilder


def test_job_returns_to_its_previous_node() -> None:
    """With two empty nodes, a job the previous plan held on the second goes back there."""
    snapshot = SnapBuilder(now=3600.0).pool(nodes=2).project("a").queued("a1", gpus=4).build()
    previous = Plan(
        epoch_start=0.0,
        epoch_end=3600.0,
        slices=(
            Slice(
                start=2700.0,
                end=3600.0,
                assignments=(
                    Assignment(job="a1", project="a", cluster="c", gpu_type="H100",
                               nodes=("c-h100-001",), gpus=4, charged=True),
                ),
            ),
        ),
        solver=SolverInfo(backend="cpsat", status=SolveStatus.OPTIMAL),
    )
    without = plan_epoch(snapshot)
    assert without.slices[0].assignments[0].nodes == ("c-h100-000",)
    plan = plan_epoch(snapshot, previous=previous)
    assert all(s.assignments[0].nodes == ("c-h100-001",) for s in plan.slices)
