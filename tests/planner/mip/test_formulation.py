"""The epoch MIP's variable tables and the model values of a placed plan."""

from __future__ import annotations

import numpy as np

from planner.mip.assemble import Run
from planner.mip.epoch import build_epoch
from planner.mip.formulation import _first_touch_groups, apply, values_of_runs, within_classes

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


def test_start_variables_follow_the_loop_over_classes_pools_and_slices() -> None:
    """The start variables, built as arrays, are those a loop over classes, their pools
    and start slices gives: one per start with room (bounded by the members and the
    fewest GPUs the pool has while it runs), in that order, each in the capacity and
    whole-node rows of every slice it runs with the GPUs and nodes it holds."""
    snapshot = (
        SnapBuilder(slices=4)
        .pool("c", nodes=2, drain=(1800.0, 7200.0), drained=1)
        .pool("d", gpu_type="A100", nodes=1)
        .project("a")
        .project("b")
        .queued("a1", "a", gpus=8, duration=1800.0, min_runtime=900.0)
        .queued("a2", "a", gpus=16)
        .queued("b1", "b", gpus=6, urgent=True)
        .queued("b2", "b", gpus=6, urgent=True)
        .queued("b3", "b", gpus=2, gpu_types=("A100",), resumable=True)
        .build()
    )
    epoch = build_epoch(snapshot)
    f = apply(epoch)
    S = epoch.slices
    expected: list[tuple[tuple[int, int, int], int, dict[int, int], int]] = []
    for c in epoch.classes:
        for p in c.pools:
            pool = epoch.pools[p]
            taken = pool.taken(c.gpus)
            multi = pool.multi(c.gpus)
            whole = taken // pool.gpus_per_node if multi else int(2 * c.gpus > pool.gpus_per_node)
            for a in range(S):
                span = c.length(a, S)
                room = min(pool.capacity(k) for k in range(a, a + span)) // taken
                if room > 0:
                    gpus = taken if multi or not whole else pool.gpus_per_node
                    held = {k: gpus for k in range(a, a + span)}
                    expected.append(((c.index, p, a), min(len(c.jobs), room), held, whole))
    assert list(f.x) == [key for key, _, _, _ in expected]
    assert [f.model.upper[v] for v in f.x.values()] == [ub for _, ub, _, _ in expected]
    rows = {c.name: dict(zip(c.vars.tolist(), c.coefs.tolist(), strict=True)) for c in f.model.constraints}
    for (cls, _, _), var in f.x.items():
        assert rows[f"count[{cls}]"][var] == 1
    for key, _, held, whole in expected:
        var = f.x[key]
        p = key[1]
        for k in range(S):
            assert rows[f"capacity[{p},{k}]"].get(var, 0) == held.get(k, 0)
            if whole and k in held:
                assert rows[f"whole_nodes[{p},{k}]"][var] == whole
    # The drained node leaves pool c one node from slice 2 on: no 16-GPU start there.
    assert any(c.gpus == 16 for c in epoch.classes)
    assert all(a < 2 for (cls, p, a) in f.x if epoch.classes[cls].gpus == 16 and p == 0)


def test_first_touch_groups_keep_entries_in_order_and_keys_as_first_seen() -> None:
    """Each key's entries in order, keys in the order they first appear."""
    keys = np.array([5, 2, 5, 9, 2, 2], dtype=np.int64)
    groups = _first_touch_groups(keys)
    assert [g.tolist() for g in groups] == [[0, 2], [1, 4, 5], [3]]
    assert _first_touch_groups(np.zeros(0, dtype=np.int64)) == []
