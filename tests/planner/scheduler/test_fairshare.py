"""``fairshare``: its passes after a pass that changed nothing decide as full passes do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from models import Cluster, GenerateSpec, NodeGroup, OrgUnit, Policy, Scenario
from planner.scheduler.fairshare import FairSharePolicy
from planner.simulator.engine import Engine

#: The ``on_a_grid`` fixture (``conftest.py``): work on a 5-minute grid.
OnAGrid = Callable[[Scenario, GenerateSpec], Scenario]


class _AlwaysFull(FairSharePolicy):
    """The same policy, forgetting after every step that its last pass changed nothing."""

    def schedule(self, now: float, dirty: bool, new: list[Any]) -> None:
        self._settled = None
        super().schedule(now, dirty, new)


def _scenario(seed: int, on_a_grid: OnAGrid) -> Scenario:
    """A full two-pool cluster of many projects, so contracts end on a busy queue (the
    passes the shortcut cuts short), with work on a 5-minute grid, so submissions and
    contract ends meet at one instant."""
    base = Scenario(
        name="passes",
        clusters=(
            Cluster(name="alpha", node_groups=(NodeGroup(gpu_type="H100", nodes=6),)),
            Cluster(name="beta", node_groups=(NodeGroup(gpu_type="B200", nodes=4),)),
        ),
        org=tuple(
            OrgUnit(name=p, share=1.0, children=tuple(
                OrgUnit(name=f"team{k}", share=1.0 + k % 3) for k in range(3)))
            for p in ("language", "vision")
        ),
        policy=Policy(epoch=3600.0, slices=4),
    )
    return on_a_grid(base, GenerateSpec(seed=seed, days=1, load=1.3, users=12, backlog=6 * 3600.0))


def _events(scenario: Scenario, policy: FairSharePolicy) -> list[tuple[Any, ...]]:
    engine = Engine(scenario, policy, 86400.0)
    engine.run()
    return list(engine.core.log)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_pass_cut_short_after_an_unchanged_one_decides_as_a_full_pass(
    seed: int, on_a_grid: OnAGrid
) -> None:
    """Every start, preemption and requeue at the same instant, with and without the
    shortcut (which must have cut some pass short for the check to mean anything)."""
    scenario = _scenario(seed, on_a_grid)
    cut = FairSharePolicy()
    full: list[bool] = []  # per dirty step: whether it made a full pass
    schedule, full_pass = cut.schedule, cut._pass

    def step(now: float, dirty: bool, new: list[Any]) -> None:
        if dirty:
            full.append(False)
        schedule(now, dirty, new)

    def one_pass(limit: float) -> None:
        full[-1] = limit == float("inf")
        full_pass(limit)

    cut.schedule = step  # type: ignore[method-assign]
    cut._pass = one_pass  # type: ignore[method-assign]
    assert _events(scenario, cut) == _events(scenario, _AlwaysFull())
    assert not all(full)
