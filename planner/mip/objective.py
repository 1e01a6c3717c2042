"""The objective's weights, shared by the MIP and the greedy plan so both value work alike.

All weights are integers per *work quantum* (a tenth of an H100-equivalent GPU-slice);
``docs/formulation.md`` explains each.
"""

from __future__ import annotations

from planner.mip.epoch import Epoch

#: Objective weight of one work quantum at a project's base fair-share slope.
BASE = 100
#: Concave utility: slope multipliers for work up to 1/2, 1, 2 times the owed share, then beyond.
SEGMENT_SLOPES = (8.0, 4.0, 1.0, 0.25)
SEGMENT_ENDS = (0.5, 1.0, 2.0)
#: Uncharged work (free jobs, or funded work past the budget headroom) up to the owed
#: share: this slope multiplier. Owed is water-filled over *all* demand, free work
#: included, so a project's free work inside its share is fair-share delivery too; it is
#: worth a quarter of the first charged segment ("far less"), but more than charged work
#: past the share (slope 1 and 0.25), so borrowed charged work yields to it.
FREE_SLOPE = 2.0
#: Work conservation: every quantum of work, charged or not.
WORK_BONUS = 5
#: Inside a project: up to this per quantum for the highest priority, plus the urgent bonus.
PRIORITY_BONUS = 3
URGENT_BONUS = 5
#: Aging: per quantum per aging bucket (doubled for multi-node gangs).
AGING_BONUS = 1
#: A preemption costs this many slices of the victim's work at the base slope, plus the
#: restart overhead (or, for non-resumable work, the progress lost). 4, not 0.5: measured
#: with benchmarks/outcomes.py, both in one window (docs/metrics.md), preemptions fell on
#: philly-week 3,968 -> 2,636, ai2-like 4,517 -> 3,408 and bursty-debug 174 -> 141
#: (gang-heavy 81 -> 82), Philly occupancy rose to fairshare's and above, while the worst
#: project moved 0.645 -> 0.594 (Philly), 0.704 -> 0.666 (ai2-like), still 2-4 times
#: fairshare's.
PREEMPT_SLICES = 4.0
#: ... and at least this many seconds of it: with short slices (75 s when an epoch has 48)
#: 4 slices are 5 minutes of work, and the plan moved work back and forth for little.
PREEMPT_MIN_S = 3600.0
#: Cap of a preemption's cost, in slices (with PREEMPT_SLICES, the overhead or progress
#: lost counts up to 4 slices).
MAX_LOSS_SLICES = 8.0


def preempt_slices(slice_len: float, lost: float) -> float:
    """What a preemption costs, in slices of the victim's work: PREEMPT_SLICES (at least
    PREEMPT_MIN_S) plus the ``lost`` seconds, capped at MAX_LOSS_SLICES (or twice the
    floor)."""
    base = max(PREEMPT_SLICES, PREEMPT_MIN_S / slice_len)
    return min(base + lost / slice_len, max(MAX_LOSS_SLICES, 2 * PREEMPT_MIN_S / slice_len))


def project_weight(ratio: float) -> float:
    """Weight of a project's utility: 2 at ratio 0, 1 on its share, towards 0 far above."""
    return 2.0 / (1.0 + max(ratio, 0.0))


def segment_slopes(epoch: Epoch, project: str) -> list[int]:
    """Objective per charged quantum in each utility segment of ``project`` (decreasing)."""
    st = epoch.snapshot.standing.get(project)
    weight = project_weight(st.ratio if st is not None else 1.0)
    return [max(round(BASE * weight * s), 1) for s in SEGMENT_SLOPES]


def free_slope(epoch: Epoch, project: str) -> int:
    """Objective per uncharged quantum of ``project`` while its work is below its owed share."""
    st = epoch.snapshot.standing.get(project)
    weight = project_weight(st.ratio if st is not None else 1.0)
    return max(round(BASE * weight * FREE_SLOPE), 1)


def free_marginal(epoch: Epoch, project: str, work_q: int) -> int:
    """Objective of one more uncharged quantum for a project that has ``work_q`` of work
    (charged or not) already: :func:`free_slope` below its target, nothing above."""
    return free_slope(epoch, project) if work_q < epoch.target_q.get(project, 0) else 0


def segment_ends(epoch: Epoch, project: str) -> list[int]:
    """Where ``project``'s utility segments end, in charged quanta: :data:`SEGMENT_ENDS`
    times its owed share in the epoch (the last segment has no end)."""
    target = epoch.target_q.get(project, 0)
    return [round(e * target) for e in SEGMENT_ENDS]


def marginal_slope(epoch: Epoch, project: str, charged_q: int) -> int:
    """Objective of one more charged quantum for a project that has ``charged_q`` already."""
    slopes = segment_slopes(epoch, project)
    for end, slope in zip(segment_ends(epoch, project), slopes, strict=False):
        if charged_q < end:
            return slope
    return slopes[-1]
