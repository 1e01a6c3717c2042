"""Shared workloads of the scheduler tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from models import GenerateSpec, Scenario, Workloads
from scenarios.generate import generate_jobs

GRID_S = 300.0

OnAGrid = Callable[[Scenario, GenerateSpec], Scenario]


def _on_a_grid(base: Scenario, spec: GenerateSpec) -> Scenario:
    jobs = tuple(
        j.model_copy(update={
            "submit": GRID_S * round(j.submit / GRID_S),
            "duration": GRID_S * max(1, round((j.duration or GRID_S) / GRID_S)),
        })
        for j in generate_jobs(base, spec)
    )
    return base.model_copy(update={"workloads": Workloads(jobs=jobs)})


@pytest.fixture
def on_a_grid() -> OnAGrid:
    """``base`` with generated work whose submit times and durations are rounded to 5
    minutes: submissions, completions and contract ends then meet at one instant, as
    they do in traces that round their times (where same-instant ordering matters)."""
    return _on_a_grid
