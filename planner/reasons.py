"""A job's gpuplan state in plain words: what ``squeue`` and ``gpuplan status`` show.

Pure functions from plain values to one line of text. A line is one of:

- ``waiting: ...`` with the reason (one sentence per :class:`models.PendingReason`, with
  the numbers when they are known), or ``waiting to be planned`` for a job that arrived
  after the last plan;
- ``running under contract until HH:MM``;
- ``running preemptible (...)``;
- ``preempted at HH:MM because ...``.

Times are POSIX seconds shown as ``HH:MM`` in ``tz`` (``None``: the machine's local
zone, as ``squeue`` shows times), with the date when it is not the day of ``now``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo

from models import PendingReason, format_duration

WEEK = 7 * 86400.0

REASON_SENTENCES: dict[PendingReason, str] = {
    PendingReason.POOL_CAPACITY: "the cluster is full: every GPU it may use is taken",
    PendingReason.NO_GANG_HOLE: "enough GPUs are free in all, but not on enough whole nodes at once for its job",
    PendingReason.BUDGET_EXHAUSTED: "its project has used its budget, so it waits for idle GPUs",
    PendingReason.FAIR_SHARE_RANK: "other projects that got less than their share went first",
    PendingReason.MAINTENANCE: (
        "the only nodes it fits on are down for maintenance, or go down before its "
        "minimum runtime would end"
    ),
    PendingReason.CONTRACTS: "the GPUs are busy with jobs that may not be stopped yet (minimum runtime)",
    PendingReason.PRIORITY: "more urgent work of its own project went first",
}
SINGLE_NODE_GANG_WORDS = (
    "the free GPUs are scattered: no single node has enough of them free for as long as it runs"
)
""":attr:`PendingReason.NO_GANG_HOLE` for a job that fits on one node: it needs no whole
nodes, only one node with enough GPUs free for long enough."""
"""The sentence for each pending reason when no numbers are known: the one wording
``squeue``, ``gpuplan status`` and the app's plan view all use."""


@dataclass(frozen=True)
class WaitFacts:
    """What is known about a waiting job; every field is optional.

    ``ratio`` is the project's standing (charged over owed over the lookback);
    ``jobs_ahead`` the jobs of projects further below their share that go first;
    ``pools`` the pools it may use (``cluster/gpu_type``); ``free_gpus`` the most GPUs
    free in one of them; ``drained_nodes`` how many of their nodes are drained;
    ``contracts_end`` (POSIX) when the first contract holding its GPUs ends;
    ``headroom_gpu_h`` what its project may still charge this epoch; ``ahead_in_project``
    the urgent or higher-priority jobs of its own project that go first.
    """

    project: str | None = None
    gpus: int | None = None
    ratio: float | None = None
    lookback_s: float = WEEK
    jobs_ahead: int | None = None
    pools: Sequence[str] = ()
    free_gpus: int | None = None
    drained_nodes: int | None = None
    contracts_end: float | None = None
    headroom_gpu_h: float | None = None
    ahead_in_project: int | None = None


def clock_text(t: float, *, now: float | None = None, tz: tzinfo | None = None) -> str:
    """``HH:MM`` of POSIX time ``t``; ``YYYY-MM-DD HH:MM`` when not on the day of ``now``."""
    when = datetime.fromtimestamp(t, tz)
    if now is not None and datetime.fromtimestamp(now, tz).date() != when.date():
        return when.strftime("%Y-%m-%d %H:%M")
    return when.strftime("%H:%M")


def window_text(lookback_s: float) -> str:
    """``this week`` for the default 7-day lookback, else ``over the last 3d``."""
    if lookback_s == WEEK:
        return "this week"
    return f"over the last {format_duration(lookback_s)}"


def _jobs(n: int, what: str) -> str:
    return f"{n} job{'s' if n != 1 else ''} {what}"


def _pools(pools: Sequence[str]) -> str:
    return f" ({', '.join(pools)})" if pools else ""


def waiting(
    reason: PendingReason,
    facts: WaitFacts | None = None,
    *,
    now: float | None = None,
    tz: tzinfo | None = None,
) -> str:
    """The ``waiting: ...`` line of a job the plan left out for ``reason``.

    Examples
    --------
    >>> waiting(PendingReason.FAIR_SHARE_RANK,
    ...         WaitFacts(project="research/nlp", ratio=1.3, jobs_ahead=3))
    'waiting: project research/nlp is at 130 % of its share this week; 3 jobs of projects further below go first'
    """
    f = facts or WaitFacts()
    if reason is PendingReason.FAIR_SHARE_RANK and f.project is not None and f.ratio is not None:
        line = f"waiting: project {f.project} is at {f.ratio * 100:.0f} % of its share {window_text(f.lookback_s)}"
        if f.jobs_ahead:
            what = "of projects further below go first" if f.jobs_ahead != 1 else "of a project further below goes first"
            line += f"; {_jobs(f.jobs_ahead, what)}"
        return line
    if reason is PendingReason.NO_GANG_HOLE:
        line = "waiting for a gang hole: "
        if f.gpus is not None and f.free_gpus is not None:
            line += f"needs {f.gpus} GPUs on whole nodes; {f.free_gpus} are free{_pools(f.pools)}, but not in its shape"
        elif f.gpus is not None:
            line += f"needs {f.gpus} GPUs on whole nodes{_pools(f.pools)}; nodes are kept free for it as their jobs end"
        else:
            line += REASON_SENTENCES[reason]
        return line
    if reason is PendingReason.CONTRACTS:
        line = "waiting for contracts to end: " + REASON_SENTENCES[reason]
        if f.contracts_end is not None:
            line += f"; the first ends at {clock_text(f.contracts_end, now=now, tz=tz)}"
        return line
    if reason is PendingReason.BUDGET_EXHAUSTED:
        if f.project is None:
            return f"waiting: budget exhausted: {REASON_SENTENCES[reason]}"
        left = f" (headroom {f.headroom_gpu_h:.1f} GPU-h)" if f.headroom_gpu_h is not None else ""
        return (f"waiting: budget exhausted: project {f.project} has used its budget{left}; "
                "it may run only on idle GPUs, unallocated")
    if reason is PendingReason.MAINTENANCE:
        nodes = f" ({f.drained_nodes} node{'s' if f.drained_nodes != 1 else ''} drained)" if f.drained_nodes else ""
        return f"waiting for maintenance: {REASON_SENTENCES[reason]}{nodes}"
    if reason is PendingReason.PRIORITY:
        if f.ahead_in_project and f.project:
            return f"waiting: {_jobs(f.ahead_in_project, 'of project ' + f.project)} with higher priority or urgency go first"
        return f"waiting: {REASON_SENTENCES[reason]}"
    if reason is PendingReason.POOL_CAPACITY:
        return f"waiting: {REASON_SENTENCES[reason]}{_pools(f.pools)}"
    return f"waiting: {REASON_SENTENCES[reason]}"


def waiting_for_plan(submitted: float | None = None, *, now: float | None = None,
                     tz: tzinfo | None = None) -> str:
    """The line of a job that arrived after the last plan (not decided on yet)."""
    since = f" (submitted {clock_text(submitted, now=now, tz=tz)})" if submitted is not None else ""
    return f"waiting to be planned{since}"


def running_under_contract(until: float, *, now: float | None = None, tz: tzinfo | None = None) -> str:
    """A job inside its minimum runtime: nothing may preempt it before ``until``."""
    return f"running under contract until {clock_text(until, now=now, tz=tz)}"


def running_preemptible(*, charged: bool = True) -> str:
    """A job past its minimum runtime (``charged``), or free work on idle GPUs."""
    why = "past its minimum runtime" if charged else "unallocated, on idle GPUs"
    return f"running preemptible ({why})"


def running(contract_end: float | None, now: float, *, charged: bool = True,
            tz: tzinfo | None = None) -> str:
    """The line of a running job: under contract until ``contract_end``, else preemptible.

    ``contract_end`` is POSIX (``ObservedJob.contract_end()``); ``None`` or infinity (a
    contract known nowhere) reads as protected for as long as it runs.
    """
    if contract_end is None or contract_end == float("inf"):
        return "running under contract (its minimum runtime is not known: never preempted)"
    if now < contract_end:
        return running_under_contract(contract_end, now=now, tz=tz)
    return running_preemptible(charged=charged)


def suspended(at: float | None = None, *, now: float | None = None, tz: tzinfo | None = None) -> str:
    """A job stopped in place, still holding its nodes."""
    return "suspended" + (f" at {clock_text(at, now=now, tz=tz)}" if at is not None else "")


def preempted(at: float, because: str, *, now: float | None = None, tz: tzinfo | None = None) -> str:
    """``preempted at HH:MM because ...``; ``because`` is one of the ``because_*`` texts."""
    return f"preempted at {clock_text(at, now=now, tz=tz)} because {because}"


def because_fair_share(takers: Sequence[tuple[str, str]] = (), *, charged: bool = True) -> str:
    """Why a job gave its nodes to other work: ``takers`` are ``(job, project)`` pairs."""
    contract = "its minimum runtime had ended" if charged else "it ran unallocated (free work)"
    if not takers:
        return f"{contract} and the plan values other work on its pool more"
    shown = ", ".join(f"{job} ({project})" for job, project in takers[:3])
    more = f" and {len(takers) - 3} more" if len(takers) > 3 else ""
    return f"{contract} and its nodes went to {shown}{more}, ranked ahead by fair share"


def because_maintenance(nodes: Sequence[str]) -> str:
    """Why a job moved off nodes drained for maintenance."""
    word = "node" if len(nodes) == 1 else "nodes"
    return f"{word} {', '.join(nodes)} {'is' if len(nodes) == 1 else 'are'} drained for maintenance"


def because_gang_hole(job: str, gpus: int) -> str:
    """Why a job made way for a large gang's hole."""
    return f"its nodes are kept free for gang {job} ({gpus} GPUs)"


def because_urgent(job: str, project: str) -> str:
    """Why a job made way for urgent work."""
    return f"urgent job {job} ({project}) needed its nodes"


def wait_text(seconds: float) -> str:
    """A wait as ``45s``, ``12m``, ``3h05m`` or ``2d04h`` (for tables)."""
    s = max(int(round(seconds)), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"
