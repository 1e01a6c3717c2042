"""Budgets: GPU-time budgets from shares, what work costs, and how much may be charged.

The rules (each with its formula and reasons) are in ``docs/budgets.md``; this module is
their one implementation. Amounts are H100-equivalent GPU-hours unless named otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from models import BudgetRevision, OrgUnit, Policy, Scenario, effective_shares, walk
from planner.ledger import Usage

HOUR = 3600.0


def budget_rates(org: tuple[OrgUnit, ...], capacity: float) -> dict[str, float]:
    """Each project's budget rate in H100-equivalent GPUs (GPU-hours per hour).

    Rule 1: a project's budget rate is its effective share of the whole tree (its share
    among siblings times its parent's effective share, down from the top) times the
    capacity. The rates sum to the capacity: the budget is the cluster's time, split by
    shares before any work arrives, and not capped at demand.
    """
    last = _last_rates.get("call")
    if last is not None and last[0] is org and last[1] == capacity:
        return dict(last[2])  # the scheduler asks at every charge point with the same org
    shares = effective_shares(org)
    rates = {path: shares[path] * capacity for path, unit in walk(org) if unit.is_project}
    _last_rates["call"] = (org, capacity, dict(rates))
    return rates


_last_rates: dict[str, tuple[tuple[OrgUnit, ...], float, dict[str, float]]] = {}
"""The last :func:`budget_rates` call's org (by identity), capacity and answer."""


def headroom_gpu_h(budget_rate: float, charged_window_gpu_h: float, policy: Policy) -> float:
    """What a project may still charge in the coming epoch (rules 2 and 3).

    The budget is a rolling window of ``policy.lookback``: over any window of that length
    a project may charge at most ``budget_rate * lookback``. So for the epoch
    ``[now, now + epoch)`` its headroom is that budget minus what it was already charged
    in the part of the window before now::

        headroom = max(0, budget_rate * lookback_h - charged[now + epoch - lookback, now))

    Parameters
    ----------
    budget_rate
        The project's budget rate (:func:`budget_rates`), H100-equivalent GPUs.
    charged_window_gpu_h
        Charged GPU-hours in ``[now + epoch - lookback, now)`` (from the ledger).
    policy
        Gives ``lookback`` and ``epoch``.
    """
    return max(budget_rate * policy.lookback / HOUR - charged_window_gpu_h, 0.0)


class Charge(NamedTuple):
    """What one run delivered and cost (H100-equivalent GPU-hours)."""

    allocated_gpu_h: float
    charged_gpu_h: float
    unallocated_gpu_h: float


def charge(
    gpus: int, rate: float, seconds: float, *, urgent: bool, allocated: bool, policy: Policy
) -> Charge:
    """Delivered and charged GPU-hours of ``gpus`` GPUs of a type of ``rate`` for ``seconds``.

    Rule 4 (exchange rates): time on a GPU type counts ``rate`` H100-equivalents per GPU,
    for delivery and for charging alike. Rule 5 (urgent work): funded urgent work is
    charged ``policy.urgent_charge`` times what it delivers. Unallocated (free) work is
    delivered but never charged, urgent or not.

    Parameters
    ----------
    gpus
        Physical GPUs the job holds (its gang size).
    rate
        The GPU type's rate (``Scenario.rate(gpu_type)``).
    seconds
        How long it ran in the interval.
    urgent
        The job's ``urgent`` flag.
    allocated
        Whether the run was funded (charged to the budget); a job with
        ``min_runtime == 0`` never is, and the planner may run funded jobs of a project
        without headroom as unallocated work.
    policy
        Gives ``urgent_charge``.
    """
    if gpus < 0 or rate <= 0 or seconds < 0:
        raise ValueError(f"charge needs gpus >= 0, rate > 0, seconds >= 0 (got {gpus}, {rate}, {seconds})")
    delivered = gpus * rate * seconds / HOUR
    if not allocated:
        return Charge(0.0, 0.0, delivered)
    multiplier = policy.urgent_charge if urgent else 1.0
    return Charge(delivered, delivered * multiplier, 0.0)


class UsageMeter:
    """Accumulates one interval's usage per project, then yields ledger records.

    The scheduler (:mod:`planner.scheduler.core`) adds every run segment and the interval's
    owed GPUs, then calls
    :meth:`flush` once per interval and hands the result to ``Ledger.record``.

    Parameters
    ----------
    policy
        Gives the urgent multiplier.
    """

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._sums: dict[str, list[float]] = {}

    def _row(self, project: str) -> list[float]:
        row = self._sums.get(project)
        if row is None:
            row = self._sums[project] = [0.0, 0.0, 0.0, 0.0]
        return row

    def add(
        self,
        project: str,
        gpus: int,
        rate: float,
        seconds: float,
        *,
        urgent: bool = False,
        allocated: bool = True,
    ) -> Charge:
        """Add a run segment (see :func:`charge`) and return what it delivered and cost."""
        c = charge(gpus, rate, seconds, urgent=urgent, allocated=allocated, policy=self.policy)
        row = self._row(project)
        row[0] += c.allocated_gpu_h
        row[1] += c.charged_gpu_h
        row[2] += c.unallocated_gpu_h
        return c

    def owe(self, owed_gpus: Mapping[str, float], seconds: float) -> None:
        """Add owed GPUs (``water_fill``/``owed_at``) held for ``seconds`` of the interval."""
        for project, gpus in owed_gpus.items():
            if gpus > 0.0:
                self._row(project)[3] += gpus * seconds / HOUR

    def flush(self, start: float, end: float) -> list[Usage]:
        """Records for ``[start, end)`` (projects with nothing to record left out); resets."""
        out = [
            Usage(project, start, end, row[0], row[1], row[2], row[3])
            for project, row in self._sums.items()
            if row[0] > 0.0 or row[1] > 0.0 or row[2] > 0.0 or row[3] > 0.0
        ]
        self._sums = {}
        return out


def revise(scenario: Scenario, shares: Mapping[str, float], at: float = 0.0) -> Scenario:
    """A copy of ``scenario`` with one more budget revision (what-if budgets).

    The original and its history are untouched; the new revision applies from ``at``
    (seconds from the start) on top of the earlier ones.

    Raises
    ------
    ValueError
        An unknown org unit path or a share that is not positive.
    """
    units = {path for path, _ in walk(scenario.org)}
    unknown = sorted(set(shares) - units)
    if unknown:
        raise ValueError(f"budget revision: unknown org unit {unknown[0]!r}")
    revision = BudgetRevision(at=at, shares=dict(shares))
    return scenario.model_copy(update={"budget_revisions": (*scenario.budget_revisions, revision)})
