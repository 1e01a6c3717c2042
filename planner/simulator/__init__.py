"""Discrete-event simulator: replays a scenario's workload under a scheduling policy.

>>> from scenarios import load_scenario
>>> result = simulate(load_scenario("tiny"), "fairshare")
>>> sorted(result.summary)[:2]
['delivered_over_owed', 'jain_index']
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from models import Scenario
from models.errors import GpuplanError
from models.limits import MAX_SIMULATED_SLICES
from planner.scheduler import POLICY_NAMES, make_policy
from planner.simulator.engine import ProgressFn
from planner.simulator.metrics import SUMMARY_KEYS

TAIL_CAP_S = 86400.0
"""Without ``days``, the run ends when the last job would end if started on submission,
but at most this long after the last submission (an overloaded queue may never drain)."""


class SimulationError(GpuplanError, ValueError):
    """A simulation that cannot be run as asked (its length, an unknown policy)."""


@dataclass
class SimulationResult:
    """What one policy delivered on one scenario (picklable: plain data and DataFrames).

    Attributes
    ----------
    policy, scenario
        Names.
    horizon
        Simulated seconds.
    summary
        The metrics of ``summary.json`` (``docs/metrics.md``), keys :data:`SUMMARY_KEYS`.
    projects
        Per project: owed and delivered GPU-hours, delivered over owed, waits.
    jobs
        Per job: submit, first start, end, wait, class, preemptions, restarts...
    occupancy
        Per hour: busy, available and fillable GPU-hours (physical GPUs).
    hourly
        Per project and hour: demand, owed and delivered H100-equivalent GPU-hours.
    events
        The event log (``planner.simulator.validate`` checks it).
    options, extra
        The policy options used, and the policy's own figures (for ``mip``: plans,
        fallbacks, deviations from the plan, wall seconds per plan).
    """

    policy: str
    scenario: str
    horizon: float
    summary: dict[str, Any]
    projects: pd.DataFrame
    jobs: pd.DataFrame
    occupancy: pd.DataFrame
    hourly: pd.DataFrame
    events: pd.DataFrame
    options: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def default_horizon(scenario: Scenario) -> float:
    """Seconds simulated when ``days`` is not given (see :data:`TAIL_CAP_S`)."""
    jobs = scenario.jobs
    if not jobs:
        return 3600.0
    last_submit = max(j.submit for j in jobs)
    natural = max(j.submit + (j.duration or 0.0) for j in jobs)
    end = min(natural, last_submit + TAIL_CAP_S)
    return max(3600.0, math.ceil(end / 3600.0) * 3600.0)


def simulate(
    scenario: Scenario,
    policy: str,
    *,
    days: float | None = None,
    progress: bool | ProgressFn = False,
    **options: Any,
) -> SimulationResult:
    """Replay ``scenario``'s workload under ``policy`` and measure the outcome.

    Parameters
    ----------
    scenario
        A loaded scenario (its jobs need durations).
    policy
        ``"legacy"``, ``"fairshare"`` or ``"mip"``.
    days
        Simulated days (jobs submitted later are left out); default
        :func:`default_horizon`.
    progress
        ``True``: a tqdm bar on stderr; a callable: called with ``(simulated hours done,
        hours in all)`` as each simulated hour passes.
    **options
        Policy options: ``seed``/``protected_fraction`` (legacy); ``backend``,
        ``time_limit``, ``rel_gap``, ``replan_slices`` (mip).

    Returns
    -------
    SimulationResult
        Deterministic for a scenario and options (``plan_seconds_*`` excepted: wall time).
    """
    from planner.simulator.engine import Engine
    from planner.simulator.metrics import compute

    if policy not in POLICY_NAMES:
        raise SimulationError(f"unknown policy {policy!r} (choose from {', '.join(POLICY_NAMES)})")
    if days is not None and not 0 < days < math.inf:
        raise SimulationError(f"days must be positive and finite, got {days!r}")
    horizon = days * 86400.0 if days is not None else default_horizon(scenario)
    slices = horizon / scenario.policy.slice_length
    if slices > MAX_SIMULATED_SLICES:
        raise SimulationError(
            f"a simulation of {horizon / 86400.0:g} days spans {slices:,.0f} slices; at most "
            f"{MAX_SIMULATED_SLICES:,} are simulated (fewer days or longer slices)"
        )
    engine = Engine(scenario, make_policy(policy, **options), horizon, progress=progress)
    engine.run()
    out = compute(engine)
    engine.ledger.close()
    return SimulationResult(
        policy=policy, scenario=scenario.name, horizon=horizon, options=dict(options),
        extra=engine.policy.extra_summary(), **out
    )


def compare(
    scenario: Scenario,
    policies: tuple[str, ...] | list[str] = POLICY_NAMES,
    *,
    days: float | None = None,
    progress: bool | ProgressFn = False,
    **options: Any,
) -> dict[str, SimulationResult]:
    """Run each policy on the same workload; options go to the policies that take them."""
    from planner.scheduler import policy_options

    return {
        name: simulate(scenario, name, days=days, progress=progress, **policy_options(name, options))
        for name in policies
    }


__all__ = ["SUMMARY_KEYS", "SimulationError", "SimulationResult", "compare", "default_horizon", "simulate"]
