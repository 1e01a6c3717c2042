"""The gap fill (and greedy plan) starts the job that adds most objective per quantum.

Two 8-GPU H100 nodes, a one-hour epoch in four 15-minute slices; a job of ``g`` GPUs
running the whole epoch does ``g * 10 * 4`` quanta of work.
"""

from __future__ import annotations

from typing import Any

import pytest

from planner.mip.assemble import Board, FillState, start_gain, utility_gain
from planner.mip.epoch import build_epoch
from planner.mip.greedy import greedy_runs

from .conftest import SnapBuilder


def two_projects() -> SnapBuilder:
    """Projects ``a`` and ``b``, each owed 8 GPUs (target 320 quanta, first step 160)."""
    return SnapBuilder().pool(nodes=2).project("a", owed=8).project("b", owed=8)


def test_utility_gain_climbs_the_segments() -> None:
    """From 100 charged quanta, 300 more take 60 at slope 800 (to 160), 160 at 400 (to
    320) and 80 at 100 (towards 640): 48,000 + 64,000 + 8,000."""
    epoch = build_epoch(two_projects().queued("a1", "a").build())
    assert utility_gain(epoch, "a", 100, 300) == 120_000


def test_start_gain_charges_only_what_the_headroom_pays() -> None:
    """With 100 quanta of headroom, one slice (80) of an 8-GPU run is charged; the other
    three slices (240 quanta) earn the uncharged slope 200 up to the share: all 240
    (the share is 320 and the charged slice takes 80 of it)."""
    b = SnapBuilder().pool(nodes=2).project("a", owed=8, headroom=100 / 40)
    epoch = build_epoch(b.queued("a1", "a").build())
    assert epoch.headroom_q["a"] == 100
    state = FillState({}, {}, {})
    gain = start_gain(epoch, state, "a", allocated=True, urgent=False, wq=80, span=4)
    # 5 per quantum of work (320); 80 charged at 800; 240 uncharged within 320 - 80.
    assert gain == 5 * 320 + 80 * 800 + 240 * 200


def test_fill_prefers_two_shares_to_one_gang_past_its_share() -> None:
    """``a`` has a 16-GPU gang (oldest) and an 8-GPU job; ``b`` an 8-GPU job. The gang
    alone would run ``a`` to twice its share (640 quanta: 224,000); ``a``'s and ``b``'s
    8-GPU jobs each fill their share (320 quanta: 192,000 each). Per quantum the 8-GPU
    jobs gain 605 and the gang 355, so the fill starts them, and the gang waits."""
    snapshot = (
        two_projects()
        .queued("a_gang", "a", gpus=16, submit=-100.0)
        .queued("a_small", "a", gpus=8)
        .queued("b_small", "b", gpus=8)
        .build()
    )
    runs = greedy_runs(build_epoch(snapshot), None).runs
    assert sorted(r.state.job.id for r in runs) == ["a_small", "b_small"]


def test_fill_keeps_the_project_order_inside_a_shape() -> None:
    """Jobs of one shape start urgent first, then by priority, then oldest: one node, ``a``
    has three 8-GPU jobs and the highest priority one starts."""
    snapshot = (
        SnapBuilder()
        .pool(nodes=1)
        .project("a", owed=8)
        .queued("old", "a", submit=-100.0)
        .queued("high", "a", priority=2)
        .queued("new", "a")
        .build()
    )
    runs = greedy_runs(build_epoch(snapshot), None).runs
    assert [r.state.job.id for r in runs] == ["high"]


def test_a_shape_that_found_no_hole_is_not_searched_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two nodes, each half held all epoch by a running 4-GPU job: the pool has 8 GPUs
    free in every slice, but no node with 8. ``b``'s 8-GPU job searches the nodes in
    each of the four slices and finds no hole; ``c``'s job of the same shape finds none
    either, without searching the nodes again (the board only fills)."""
    snapshot = (
        SnapBuilder()
        .pool(nodes=2)
        .project("a", owed=8)
        .project("b", owed=8)
        .project("c", owed=8)
        .running("r0", ("c-h100-000",), "a", gpus=4)
        .running("r1", ("c-h100-001",), "a", gpus=4)
        .queued("b1", "b")
        .queued("c1", "c")
        .build()
    )
    epoch = build_epoch(snapshot)
    searched: list[int] = []
    real_place = Board.place

    def counted(self: Board, *args: Any, **kwargs: Any) -> tuple[str, ...] | None:
        searched.append(args[1])
        return real_place(self, *args, **kwargs)

    monkeypatch.setattr(Board, "place", counted)
    runs = greedy_runs(epoch, None).runs
    assert sorted(r.state.job.id for r in runs) == ["r0", "r1"]
    assert searched == [8] * epoch.slices
