"""The simulation loop itself."""

from __future__ import annotations

from typing import Any

import pytest

from planner.scheduler.core import Scheduler
from planner.scheduler.fairshare import FairSharePolicy
from planner.simulator.engine import STUCK_STEPS, Engine
from scenarios import load_scenario


class WakesAtNow(FairSharePolicy):
    """Asks, once woken at 600 s, to be woken at that same instant again, forever."""

    def attach(self, engine: Scheduler) -> None:
        super().attach(engine)
        engine.wake_at(600.0, "loop")
        self.wakes = 0

    def on_wake(self, tag: Any, now: float) -> None:
        self.wakes += 1
        self.engine.wake_at(now, "loop")


def test_a_policy_that_wakes_at_the_same_instant_forever_fails_instead_of_hanging() -> None:
    policy = WakesAtNow()
    engine = Engine(load_scenario("tiny"), policy, horizon=3600.0)
    with pytest.raises(RuntimeError, match=r"woken at t = 600\.0 s"):
        engine.run()
    assert policy.wakes == STUCK_STEPS
