"""Rounding an LP optimum (:func:`planner.mip.formulation.round_lp`) before placement."""

from __future__ import annotations

import numpy as np

import planner.mip as planner_mip
from planner.mip.epoch import build_epoch
from planner.mip.formulation import Formulation, apply, round_lp

from .conftest import SnapBuilder


def two_pools_two_jobs() -> Formulation:
    """Pools ``c`` and ``d`` of two 8-GPU nodes each; two identical queued jobs (one class)."""
    snapshot = (
        SnapBuilder()
        .pool("c", nodes=2)
        .pool("d", nodes=2)
        .project("a", owed=16)
        .queued("a1", "a")
        .queued("a2", "a")
        .build()
    )
    f = apply(build_epoch(snapshot))
    assert len(f.epoch.classes) == 1
    return f


def test_round_up_keeps_the_class_within_its_members() -> None:
    """LP: 1.8 members on pool 0 and 0.9 on pool 1 (slice 0). Down: 1 and 0; up from 0.7:
    both parts qualify (0.8, 0.9) but only one member is left, so the larger part (pool 1)
    is rounded up: 1 and 1."""
    f = two_pools_two_jobs()
    lp = np.zeros(f.model.num_vars)
    x0, x1 = f.x[(0, 0, 0)], f.x[(0, 1, 0)]
    lp[x0], lp[x1] = 1.8, 0.9
    down = round_lp(f, lp, 2.0)
    assert (down[x0], down[x1]) == (1, 0)
    up = round_lp(f, lp, 0.7)
    assert (up[x0], up[x1]) == (1, 1)


def test_round_up_only_from_the_threshold() -> None:
    """A part below the threshold stays rounded down: 0.6 of a member with ``up = 0.7``."""
    f = two_pools_two_jobs()
    lp = np.zeros(f.model.num_vars)
    lp[f.x[(0, 0, 0)]] = 0.6
    assert round_lp(f, lp, 0.7)[f.x[(0, 0, 0)]] == 0
    assert round_lp(f, lp, 0.5)[f.x[(0, 0, 0)]] == 1


def test_the_planners_roundings_reach_a_part_of_two_thirds() -> None:
    """The planner tries 0.7, 0.6 and 0.5 (``ROUNDINGS``, best first on the benchmark
    families): a part of 0.65 stays down in the first and is rounded up in the other two;
    all down (which gave way to 0.6) would never round it up."""
    f = two_pools_two_jobs()
    lp = np.zeros(f.model.num_vars)
    x0 = f.x[(0, 0, 0)]
    lp[x0] = 0.65
    assert planner_mip.ROUNDINGS == (0.7, 0.6, 0.5)
    assert [int(round_lp(f, lp, up)[x0]) for up in planner_mip.ROUNDINGS] == [0, 1, 1]
