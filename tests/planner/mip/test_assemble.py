"""Placing the MIP's starts on nodes: the orders :func:`place_runs` tries, and which it keeps.

The MIP counts GPUs per pool and slice; :func:`place_runs` then has to find nodes for each
start, and the order it places them in decides which gangs find a hole. The instances
here are small enough to follow by hand: two 8-GPU nodes ``c-h100-000`` and
``c-h100-001``, a one-hour epoch in four 15-minute slices.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from models import Snapshot
from planner.mip.assemble import Board, Run, Start, place_in_order, place_runs
from planner.mip.epoch import Epoch, build_epoch
from planner.placement import place_gang

from .conftest import SnapBuilder

#: Seconds in one slice of the SnapBuilder's default policy (3600 s in 4 slices).
SLICE = 900.0

Key = Callable[[Start], tuple[object, ...]]


def _starts(epoch: Epoch, at: dict[str, int]) -> list[Start]:
    """Starts of the queued jobs ``at`` names, in the slices it gives, on the only pool.

    Built as :func:`planner.mip.formulation.invert` builds them: the job's state from
    its class, the sub-pool index and the start slice.
    """
    states = {st.job.id: st for c in epoch.classes for st in c.jobs}
    return [Start(states[job], 0, k) for job, k in at.items()]


def _length(epoch: Epoch, s: Start) -> int:
    """Slices the start runs: to completion or to the epoch's end."""
    cls = next(c for c in epoch.classes if any(st.job.id == s.state.job.id for st in c.jobs))
    return cls.length(s.slice, epoch.slices)


def _old_keys(epoch: Epoch) -> dict[str, Key]:
    """The three orders place_runs tried before commit f9eb9c2, by their sort keys."""

    def big(s: Start) -> bool:
        return 2 * s.state.job.gpus > epoch.pools[s.pool].gpus_per_node

    return {
        "slice, larger gangs first": lambda s: (s.slice, -s.state.job.gpus, s.state.job.id),
        "whole-node gangs first, in slice order": lambda s: (
            not big(s),
            s.slice,
            -s.state.job.gpus,
            s.state.job.id,
        ),
        "whole-node gangs, then small gangs largest first": lambda s: (
            not big(s),
            s.slice if big(s) else -s.state.job.gpus,
            s.slice,
            s.state.job.id,
        ),
    }


def _place_in_order(
    epoch: Epoch, ends: dict[str, int], order: list[Start]
) -> tuple[list[Run], set[str]]:
    """Place the running jobs, then ``order``'s starts one by one through the Board API.

    Returns the placed start runs and the ids of the starts that found no hole.
    """
    board = Board.empty(epoch)
    for r in epoch.running:
        end = ends.get(r.id, r.must)
        if end > 0:
            board.occupy(Run(r.state, r.pool, 0, end, r.state.nodes, True), epoch.pools[r.pool])
    length = {s.state.job.id: _length(epoch, s) for s in order}
    placed = place_in_order(epoch, board, order, length, {})
    assert placed is not None  # no order to beat: every start is tried
    _, runs, dropped = placed
    return runs, dropped


def _gpu_slices(runs: list[Run]) -> int:
    """GPU-slices of the starts among ``runs`` (all on one pool, so proportional to work)."""
    return sum((r.last - r.first) * r.state.job.gpus for r in runs if not r.running)


def _assert_fits(snapshot: Snapshot, epoch: Epoch, runs: list[Run], starts: list[Start]) -> None:
    """Each start runs from its slice for its length, and no node is oversubscribed.

    Counted from the runs themselves, not from the Board, whose bookkeeping floors free
    GPUs at zero and so would not show an oversubscription.
    """
    by_job = {r.state.job.id: r for r in runs}
    for s in starts:
        run = by_job[s.state.job.id]
        assert (run.first, run.last) == (s.slice, s.slice + _length(epoch, s))
    size = {ns.node.name: ns.node.gpus for ns in snapshot.nodes}
    used: dict[tuple[str, int], int] = {}
    for run in runs:
        gpus = run.state.job.gpus
        per_node = size[run.nodes[0]] if len(run.nodes) > 1 else gpus
        assert len(run.nodes) * size[run.nodes[0]] >= gpus  # the whole gang has room
        for n in run.nodes:
            for k in range(run.first, run.last):
                used[(n, k)] = used.get((n, k), 0) + per_node
    assert all(gpus <= size[n] for (n, _), gpus in used.items()), used


def test_longest_runs_first_place_every_start_the_old_orders_cannot(
    snap: type[SnapBuilder],
) -> None:
    """Every start finds nodes once the longest runs go first; each older order drops one.

    Node 000 runs r0 (6 GPUs) through slice 2, so it has a 2-GPU hole in slices 0-2 and
    is whole in slice 3. The MIP's starts fit the pool's 16 GPUs in every slice:

    - ``long``: 1 GPU, slices 0-3;
    - ``short``: 2 GPUs, slices 0-1;
    - ``wide``: 8 GPUs (a whole node), slice 2.

    The only packing puts ``long`` in the hole beside r0 and ``short`` on node 001, which
    it leaves whole for ``wide`` in slice 2. The older orders all place ``short`` before
    ``long`` (larger gangs first), and best fit puts it in the 2-GPU hole beside r0 it
    fills exactly. ``long`` then lands on node 001: slice by slice, node 001 is no longer
    whole for ``wide`` in slice 2; with ``wide`` placed first, ``long`` finds no node
    with a free GPU in all four slices. Longest first, ``long`` takes the hole first.
    """
    snapshot = (
        snap()
        .pool(nodes=2)
        .project("a")
        # 2700 s left: it finishes at the end of slice 2; never preempted (not resumable).
        .running("r0", ("c-h100-000",), gpus=6, ran=1800.0, duration=1800.0 + 3 * SLICE)
        .queued("long", gpus=1, duration=4 * SLICE)
        .queued("short", gpus=2, duration=2 * SLICE)
        .queued("wide", gpus=8, duration=1 * SLICE)
        .build()
    )
    epoch = build_epoch(snapshot)
    ends = {"r0": 3}
    assert epoch.running[0].must == 3
    starts = _starts(epoch, {"long": 0, "short": 0, "wide": 2})

    old_dropped = {
        name: _place_in_order(epoch, ends, sorted(starts, key=key))[1]
        for name, key in _old_keys(epoch).items()
    }
    assert old_dropped == {
        "slice, larger gangs first": {"wide"},
        "whole-node gangs first, in slice order": {"long"},
        "whole-node gangs, then small gangs largest first": {"long"},
    }

    runs, dropped, _ = place_runs(epoch, ends, starts, None, fill=False)
    assert dropped == set()
    _assert_fits(snapshot, epoch, runs, starts)
    nodes = {r.state.job.id: r.nodes for r in runs}
    assert nodes == {
        "r0": ("c-h100-000",),
        "long": ("c-h100-000",),
        "short": ("c-h100-001",),
        "wide": ("c-h100-001",),
    }


def test_keeps_the_order_placing_most_work_not_the_first_tried(snap: type[SnapBuilder]) -> None:
    """When every order drops a gang, the order that places the most work is kept.

    The MIP starts fit the pool's 16 GPUs in every slice, but not its nodes:

    - ``four``: 4 GPUs, slices 0-3;
    - ``six_early``: 6 GPUs, slices 0-1;
    - ``six_late``: 6 GPUs, slices 1-3.

    The two 6-GPU gangs overlap in slice 1, so they need both nodes, and neither has
    room left for ``four`` in that slice: one gang is dropped whatever the order. The
    first order tried (slice by slice, longest first) places ``four`` and ``six_early``
    and drops ``six_late`` (4x4 + 6x2 = 28 GPU-slices). Whole-node gangs first places
    both 6-GPU gangs and drops ``four`` (6x3 + 6x2 = 30 GPU-slices): that one is kept.
    """
    snapshot = (
        snap()
        .pool(nodes=2)
        .project("a")
        .queued("four", gpus=4, duration=4 * SLICE)
        .queued("six_early", gpus=6, duration=2 * SLICE)
        .queued("six_late", gpus=6, duration=4 * SLICE)
        .build()
    )
    epoch = build_epoch(snapshot)
    starts = _starts(epoch, {"four": 0, "six_early": 0, "six_late": 1})

    def slice_longest_first(s: Start) -> tuple[object, ...]:
        return (s.slice, -_length(epoch, s), -s.state.job.gpus, s.state.job.id)

    first_runs, first_dropped = _place_in_order(epoch, {}, sorted(starts, key=slice_longest_first))
    assert first_dropped == {"six_late"}
    assert _gpu_slices(first_runs) == 28

    runs, dropped, _ = place_runs(epoch, {}, starts, None, fill=False)
    assert dropped == {"four"}
    assert _gpu_slices(runs) == 30
    _assert_fits(snapshot, epoch, runs, [s for s in starts if s.state.job.id != "four"])


def test_a_gang_takes_the_nodes_busy_outside_its_slices(snap: type[SnapBuilder]) -> None:
    """A start takes, of the nodes free for its whole run, those least free in the
    other slices, so the nodes free for longer stay whole for longer runs.

    Four 8-GPU nodes; ``r2`` and ``r3`` run on nodes 002 and 003 through slice 1. In
    this order:

    - ``late``: 16 GPUs (two whole nodes), slices 2-3;
    - ``long``: 16 GPUs, slices 0-3.

    ``late`` may take any two nodes. By name it took 000 and 001, the only nodes free in
    every slice, and ``long`` found no hole. It takes 002 and 003, which are busy before
    it, and ``long`` gets 000 and 001.
    """
    snapshot = (
        snap()
        .pool(nodes=4)
        .project("a")
        .running("r2", ("c-h100-002",), gpus=8, ran=1800.0, duration=1800.0 + 2 * SLICE)
        .running("r3", ("c-h100-003",), gpus=8, ran=1800.0, duration=1800.0 + 2 * SLICE)
        .queued("late", gpus=16, duration=2 * SLICE)
        .queued("long", gpus=16, duration=4 * SLICE)
        .build()
    )
    epoch = build_epoch(snapshot)
    ends = {"r2": 2, "r3": 2}
    starts = _starts(epoch, {"late": 2, "long": 0})
    runs, dropped = _place_in_order(epoch, ends, starts)
    assert dropped == set()
    assert {r.state.job.id: r.nodes for r in runs} == {
        "late": ("c-h100-002", "c-h100-003"),
        "long": ("c-h100-000", "c-h100-001"),
    }


def _place_node_by_node(
    board: Board, epoch: Epoch, gpus: int, first: int, last: int, prefer: tuple[str, ...]
) -> tuple[str, ...] | None:
    """Board.place as it was before nodes were grouped: every node of the pool asked."""
    pool = epoch.pools[0]
    free: dict[str, int] = {}
    spare: dict[str, int] = {}
    for n in pool.nodes:
        window = min(board.free[n][first:last])
        if window >= min(gpus, pool.gpus_per_node):
            free[n] = window
            spare[n] = sum(board.free[n]) - sum(board.free[n][first:last])
    if not prefer and 2 * gpus <= pool.gpus_per_node:
        prefer = tuple(n for n in free if board.free[n][-1] < pool.gpus_per_node)
    return place_gang(free, board.size, gpus, prefer=prefer, spare=spare)


def test_grouped_nodes_get_the_hole_asking_every_node_gets() -> None:
    """Looking for a hole among groups of alike nodes picks the nodes asking each node
    picks (best fit, least to spare, preferred and busy-at-the-end nodes first, name),
    on boards filled at random, for single-node and multi-node gangs."""
    builder = SnapBuilder(slices=4).pool("c", nodes=12).project("a")
    sizes = (1, 2, 3, 4, 6, 8, 16, 24)
    for i, gpus in enumerate(sizes):
        builder.queued(f"q{i}", gpus=gpus)
    epoch = build_epoch(builder.build())
    states = [st for c in epoch.classes for st in c.jobs]
    nodes = list(epoch.pools[0].nodes)
    checked = 0
    for seed in range(20):
        rng = random.Random(seed)
        board = Board.empty(epoch)
        for _ in range(rng.randrange(0, 25)):
            st = rng.choice([s for s in states if s.job.gpus <= 8])
            first = rng.randrange(4)
            board.occupy(Run(st, 0, first, rng.randrange(first + 1, 5), (rng.choice(nodes),), False), epoch.pools[0])
        for _ in range(30):
            gpus = rng.choice(sizes)
            first = rng.randrange(4)
            last = rng.randrange(first + 1, 5)
            prefer = tuple(rng.sample(nodes, rng.choice((0, 0, 1, 2))))
            expected = _place_node_by_node(board, epoch, gpus, first, last, prefer)
            assert board.place(epoch.pools[0], gpus, first, last, prefer) == expected
            checked += expected is not None
    assert checked > 300  # most queries found a hole: the comparison was not all None


def test_an_order_that_cannot_beat_the_best_stops_early(snap: type[SnapBuilder]) -> None:
    """Two 16-GPU gangs for the same two nodes and slices: the second finds no hole.
    Against an order that placed as much work as one gang, this one stops (``None``)
    once the gang is dropped; against less, it places the first and reports the drop."""
    snapshot = (
        snap().pool(nodes=2).project("a").queued("g1", gpus=16).queued("g2", gpus=16).build()
    )
    epoch = build_epoch(snapshot)
    order = _starts(epoch, {"g1": 0, "g2": 0})
    length = {s.state.job.id: _length(epoch, s) for s in order}
    one = length["g1"] * epoch.work_q(16, epoch.pools[0])
    assert place_in_order(epoch, Board.empty(epoch), order, length, {}, beat=one) is None
    placed = place_in_order(epoch, Board.empty(epoch), order, length, {}, beat=one - 1)
    assert placed is not None
    work, runs, dropped = placed
    assert (work, [r.state.job.id for r in runs], dropped) == (one, ["g1"], {"g2"})
