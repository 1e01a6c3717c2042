"""The epoch MIP's variable tables and the model values of a placed plan."""

from __future__ import annotations

import numpy as np

from planner.mip.assemble import Run
from planner.mip.epoch import build_epoch
from planner.mip.formulation import apply, values_of_runs, within_classes

from .conftest import SnapBuilder


def test_start_table_lists_the_starts_in_their_order() -> None:
    """start_table() holds each start variable's class, sub-pool and slice, as x does."""
    snapshot = (
        SnapBuilder().pool("c", nodes=2).pool("d", nodes=1).project("a").queued("a1").queued("a2", gpus=4).build()
    )
    f = apply(build_epoch(snapshot))
    table = f.start_table()
    rows = list(zip(table.cls.tolist(), table.pool.tolist(), table.start.tolist(), strict=True))
    assert rows == list(f.x)
    assert table.var.tolist() == list(f.x.values())


def test_busy_follows_the_running_job_on_its_node() -> None:
    """A node held by a running single-node job is busy in the slices it runs, not after."""
    snapshot = (
        SnapBuilder(slices=4)
        .pool("c", nodes=1)
        .project("a")
        .running("r1", ("c-h100-000",), gpus=2, charged=False)
        .queued("q1", gpus=8)
        .build()
    )
    f = apply(build_epoch(snapshot))
    assert f.busy
    running = f.epoch.running[0]
    values = values_of_runs(f, [Run(running.state, running.pool, 0, 2, running.state.nodes, True)])
    assert values is not None
    assert {k: int(values[v]) for (_, k), v in f.busy.items()} == {k: int(k < 2) for _, k in f.busy}
    assert {int(values[v]) for v in f.busy.values()} == {0, 1}


def test_groups_hold_each_class_then_each_running_job() -> None:
    """groups() lists each class's start variables, then each running job's slices;
    group_projects() names their projects in the same order."""
    snapshot = (
        SnapBuilder(slices=4)
        .pool("c", nodes=2)
        .project("a")
        .project("b")
        .running("r1", ("c-h100-000",), project="b", gpus=2, charged=False)
        .queued("a1", "a")
        .queued("b1", "b", gpus=4)
        .build()
    )
    f = apply(build_epoch(snapshot))
    by_class: dict[int, list[int]] = {}
    for (c, _, _), var in f.x.items():
        by_class.setdefault(c, []).append(var)
    assert f.groups() == [*by_class.values(), list(f.z.values())]
    assert f.group_projects() == [f.epoch.classes[c].project for c in by_class] + ["b"]


def test_merged_answers_keep_each_class_within_its_members() -> None:
    """Two answers merged variable by variable may start one job twice (one search
    moved its start to slice 0, the other to slice 1): that class's starts come from
    the fallback answer; a class within its members keeps the merged values."""
    snapshot = (
        SnapBuilder(slices=4).pool("c", nodes=2).project("a").queued("a1").queued("a2", gpus=4).build()
    )
    f = apply(build_epoch(snapshot))
    one = f.epoch.classes.index(next(c for c in f.epoch.classes if c.jobs[0].job.id == "a1"))
    two = 1 - one
    var = {(c, k): v for (c, _, k), v in f.x.items()}
    fallback = np.zeros(f.model.num_vars, dtype=np.int64)
    fallback[var[(one, 0)]] = 1
    merged = fallback.copy()
    merged[var[(one, 1)]] = 1  # a1 now starts twice
    merged[var[(two, 2)]] = 1  # a2 starts once
    out = within_classes(f, merged, fallback)
    assert int(out[var[(one, 0)]]) == 1 and int(out[var[(one, 1)]]) == 0
    assert int(out[var[(two, 2)]]) == 1
    assert within_classes(f, fallback, merged) is fallback  # nothing over: unchanged
