"""Outcome metrics: one definition for every policy (see ``docs/metrics.md``).

Everything is computed after the run from the engine's record (run segments, job times,
hour-binned busy and available GPU time), with pandas and numpy, hour by hour.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from planner.scheduler import EVENT_COLUMNS
from planner.scheduler.state import WAIT_CLASSES
from planner.simulator.engine import Engine

SUMMARY_KEYS = (
    "delivered_over_owed",
    "worst_project_delivered_over_owed",
    "occupancy",
    "wait_p50_s",
    "wait_p90_s",
    "wait_p99_s",
    "preemptions",
    "preempted_gpu_h",
    "restarts_per_job",
    "maintenance_drain_h",
    "jain_index",
    "unallocated_share",
    "plan_seconds_p50",
    "plan_seconds_p99",
)
"""The metric names of ``summary.json``, in order."""

MIN_OWED_GPU_H = 1.0
"""Projects owed less than this over the run are left out of the worst-project figure and
the Jain index: one tiny job's ratio is noise, not fairness."""


def bin_hours(
    starts: np.ndarray, ends: np.ndarray, weights: np.ndarray, rows: np.ndarray, n_rows: int, n_hours: int
) -> np.ndarray:
    """Sum ``weight x overlap`` (in hours) of intervals into a ``(n_rows, n_hours)`` grid.

    Interval ``i`` is ``[starts[i], ends[i])`` in seconds and adds to row ``rows[i]``.
    """
    grid = np.zeros((n_rows, n_hours))
    keep = ends > starts
    s, e, w, r = starts[keep], ends[keep], weights[keep], rows[keep]
    if not len(s):
        return grid
    h0 = np.floor(s / 3600.0).astype(np.int64)
    h1 = np.ceil(e / 3600.0).astype(np.int64)
    counts = np.maximum(h1 - h0, 1)
    idx = np.repeat(np.arange(len(s)), counts)
    offset = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    hour = h0[idx] + offset
    lo = np.maximum(s[idx], hour * 3600.0)
    hi = np.minimum(e[idx], (hour + 1) * 3600.0)
    amount = w[idx] * np.clip(hi - lo, 0.0, None) / 3600.0
    ok = hour < n_hours
    np.add.at(grid, (r[idx][ok], hour[ok]), amount[ok])
    return grid


def _percentile(values: np.ndarray, q: float) -> float | None:
    if not len(values):
        return None
    return float(np.percentile(values, q))


def compute(engine: Engine) -> dict[str, Any]:
    """Summary dict and DataFrames of a finished run."""
    from planner.fairshare import org_at, water_fill

    sc = engine.scenario
    horizon = engine.horizon
    n_hours = max(1, math.ceil(horizon / 3600.0))
    projects = list(engine.projects)
    pidx = {p: i for i, p in enumerate(projects)}
    runs = engine.runs

    # -- jobs --------------------------------------------------------------------------
    submit = np.array([r.job.submit for r in runs], dtype=float)
    first = np.array([r.first_start for r in runs], dtype=float)
    end = np.array([r.end for r in runs], dtype=float)
    started = ~np.isnan(first)
    wait = np.where(started, first - submit, horizon - submit)
    jobs = pd.DataFrame(
        {
            "job": [r.job.id for r in runs],
            "project": [r.job.project for r in runs],
            "user": [r.job.user for r in runs],
            "class": [r.cls for r in runs],
            "gpus": [r.job.gpus for r in runs],
            "min_runtime_s": [r.job.min_runtime for r in runs],
            "resumable": [r.job.resumable for r in runs],
            "duration_s": [r.job.duration for r in runs],
            "submit": submit,
            "first_start": first,
            "end": end,
            "wait_s": wait,
            "started": started,
            "finished": ~np.isnan(end),
            "preemptions": [r.preemptions for r in runs],
            "restarts": [r.restarts for r in runs],
            "lost_gpu_h": [r.lost_h100_s / 3600.0 for r in runs],
            "pool": [str(r.pool) if r.pool is not None else "" for r in runs],
        }
    )

    # -- hourly delivered, demand, owed --------------------------------------------------
    seg = engine.acct.segments
    if seg:
        arr = np.array([(s[1], s[2], s[3], float(s[4])) for s in seg], dtype=float)
        seg_rows = np.array([pidx[runs[s[0]].job.project] for s in seg], dtype=np.int64)
        seg_charged = arr[:, 3] > 0.5
    else:
        arr = np.zeros((0, 4))
        seg_rows = np.zeros(0, dtype=np.int64)
        seg_charged = np.zeros(0, dtype=bool)
    delivered = bin_hours(arr[:, 0], arr[:, 1], arr[:, 2], seg_rows, len(projects), n_hours)
    unalloc = bin_hours(
        arr[~seg_charged, 0], arr[~seg_charged, 1], arr[~seg_charged, 2],
        seg_rows[~seg_charged], len(projects), n_hours,
    )
    demand_end = np.where(np.isnan(end), horizon, end)
    d_start, d_end, d_rate, d_rows = _demand_intervals(engine, seg, submit, first, demand_end)
    demand = bin_hours(d_start, d_end, d_rate, d_rows, len(projects), n_hours)
    demand_phys = bin_hours(
        submit, demand_end, np.array([r.job.gpus for r in runs], dtype=float),
        np.zeros(len(runs), dtype=np.int64), 1, n_hours,
    )[0]
    a = engine.acct
    pad = n_hours - len(a.busy_gpu_s)
    busy_h = np.array(a.busy_gpu_s + [0.0] * pad)[:n_hours] / 3600.0
    avail_h = np.array(a.available_gpu_s + [0.0] * pad)[:n_hours] / 3600.0
    cap_h100 = np.array(a.available_h100_s + [0.0] * pad)[:n_hours] / 3600.0
    owed = np.zeros_like(delivered)
    for h in range(n_hours):
        d = {projects[i]: float(demand[i, h]) for i in np.nonzero(demand[:, h] > 1e-12)[0]}
        if not d:
            continue
        o = water_fill(org_at(sc, h * 3600.0), d, float(cap_h100[h]))
        for p, v in o.items():
            owed[pidx[p], h] = v
    got = np.minimum(delivered, owed)
    owed_p = owed.sum(axis=1)
    got_p = got.sum(axis=1)
    ratio_p = np.where(owed_p > 0, got_p / np.where(owed_p > 0, owed_p, 1.0), np.nan)
    counted = owed_p >= MIN_OWED_GPU_H
    x = ratio_p[counted]

    # -- projects ----------------------------------------------------------------------
    per_proj_jobs = jobs.groupby("project")
    # Each project's rows (in job order), its job count and preemptions, grouped once.
    rows_of = per_proj_jobs.indices
    sizes = per_proj_jobs.size()
    preempted = per_proj_jobs["preemptions"].sum()
    projects_df = pd.DataFrame(
        {
            "project": projects,
            "owed_gpu_h": owed_p,
            "delivered_gpu_h": delivered.sum(axis=1),
            "delivered_within_owed_gpu_h": got_p,
            "delivered_over_owed": ratio_p,
            "unallocated_gpu_h": unalloc.sum(axis=1),
            "jobs": [int(sizes.get(p, 0)) for p in projects],
            "wait_p50_s": [_pq(wait, rows_of.get(p), 50) for p in projects],
            "wait_p90_s": [_pq(wait, rows_of.get(p), 90) for p in projects],
            "preemptions": [int(preempted.get(p, 0)) for p in projects],
        }
    )
    hourly = pd.DataFrame(
        {
            "project": np.repeat(projects, n_hours),
            "hour": np.tile(np.arange(n_hours), len(projects)),
            "demand_gpu_h": demand.ravel(),
            "owed_gpu_h": owed.ravel(),
            "delivered_gpu_h": delivered.ravel(),
        }
    )
    occupancy = pd.DataFrame(
        {
            "hour": np.arange(n_hours),
            "busy": busy_h,
            "available": avail_h,
            "fillable": np.minimum(demand_phys, avail_h),
        }
    )

    # -- summary -----------------------------------------------------------------------
    waits: dict[str, dict[str, float | None]] = {}
    for q in (50, 90, 99):
        waits[f"wait_p{q}_s"] = {
            c: _percentile(wait if c == "all" else wait[(jobs["class"] == c).to_numpy()], q)
            for c in WAIT_CLASSES
        }
    total_delivered = float(delivered.sum())
    windows = engine.drain_windows
    drain = [
        ((w["free_at"] if not math.isnan(w["free_at"]) else horizon) - w["start"]) / 3600.0
        for w in windows
    ]
    extra = engine.policy.extra_summary()
    n_preempt = int(jobs["preemptions"].sum())
    summary: dict[str, Any] = {
        "delivered_over_owed": float(got.sum() / owed.sum()) if owed.sum() > 0 else None,
        "worst_project_delivered_over_owed": float(x.min()) if len(x) else None,
        "occupancy": float(busy_h.sum() / avail_h.sum()) if avail_h.sum() > 0 else None,
        **waits,
        "preemptions": n_preempt,
        "preempted_gpu_h": float(jobs["lost_gpu_h"].sum()),
        "restarts_per_job": float(jobs["restarts"].sum() / len(jobs)) if len(jobs) else None,
        "maintenance_drain_h": float(np.mean(drain)) if drain else None,
        "jain_index": float(x.sum() ** 2 / (len(x) * (x**2).sum())) if len(x) and (x**2).sum() > 0 else None,
        "unallocated_share": float(unalloc.sum() / total_delivered) if total_delivered > 0 else None,
        "plan_seconds_p50": extra.get("plan_seconds_p50"),
        "plan_seconds_p99": extra.get("plan_seconds_p99"),
    }
    events = pd.DataFrame(engine.log, columns=list(EVENT_COLUMNS))
    return {
        "summary": summary,
        "projects": projects_df,
        "jobs": jobs,
        "occupancy": occupancy,
        "hourly": hourly,
        "events": events,
    }


def _demand_intervals(
    engine: Engine,
    seg: list[tuple[int, float, float, float, bool]],
    submit: np.ndarray,
    first: np.ndarray,
    demand_end: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each job's demand as intervals of constant H100-equivalent GPUs.

    Until its first start a job counts at its cheapest allowed GPU type
    (``planner.fairshare.job_rate``); from each (re)start on, at the type of the pool it
    started on (through any later wait), as the engine's live demand does. Returns
    ``(starts, ends, rates, project rows)``.
    """
    from planner.fairshare import job_rate

    sc = engine.scenario
    runs = engine.runs
    pidx = {p: i for i, p in enumerate(engine.projects)}
    starts_of: dict[int, list[tuple[float, float]]] = {}
    for i, s0, _, weight, _ in seg:
        starts_of.setdefault(i, []).append((s0, weight))
    out_s: list[float] = []
    out_e: list[float] = []
    out_w: list[float] = []
    out_r: list[int] = []
    # As Python floats (the same values), read faster one at a time than numpy scalars.
    submit_l, first_l, end_l = submit.tolist(), first.tolist(), demand_end.tolist()
    for i, run in enumerate(runs):
        row = pidx[run.job.project]
        stop = end_l[i]
        waited_to = first_l[i] if not math.isnan(first_l[i]) else stop
        out_s.append(submit_l[i])
        out_e.append(min(waited_to, stop))
        out_w.append(run.job.gpus * float(job_rate(sc, run.job)))
        out_r.append(row)
        pieces = sorted(starts_of.get(i, []))
        for k, (s0, weight) in enumerate(pieces):
            out_s.append(s0)
            out_e.append(pieces[k + 1][0] if k + 1 < len(pieces) else stop)
            out_w.append(weight)
            out_r.append(row)
    return (
        np.array(out_s, dtype=float),
        np.array(out_e, dtype=float),
        np.array(out_w, dtype=float),
        np.array(out_r, dtype=np.int64),
    )


def _pq(wait: np.ndarray, rows: Any, q: float) -> float:
    """The ``q`` percentile of the waits at ``rows`` (a project's jobs; NaN for none)."""
    if rows is None or not len(rows):
        return math.nan
    return float(np.percentile(wait[rows], q))
