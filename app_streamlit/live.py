"""The live page: a running cluster's standings, owed against delivered, and the queue.

Read-only. It opens the ledger of a ``gpuplan run`` with ``Ledger.open_read_only`` and
reads the status file next to it (``LEDGER.status.json``); it never writes either, so
pointing it at a production ledger is safe. ``app.py`` shows it as a tab; it also runs on
its own: ``streamlit run app_streamlit/live.py``.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from models import LiveStatus
from planner.fairshare import fair_share_ratio
from planner.ledger import Ledger, LedgerError
from planner.reasons import wait_text, window_text
from planner.status_file import StatusFileError, read_status, status_path

HOUR = 3600.0
DEFAULT_LOOKBACK = 7 * 86400.0
LEDGER_ENV = "GPUPLAN_LEDGER"


def program_of(project: str) -> str:
    """The program a project belongs to: the top unit of its org path."""
    return project.split("/")[0]


def standing_over_time(ledger: Ledger, lookback: float, points: int = 120) -> pd.DataFrame:
    """Fair-share standing per project and per program at ``points`` times of the ledger.

    At each time ``t`` the standing is charged over owed GPU-hours in ``[t - lookback, t)``
    (``planner.fairshare.fair_share_ratio`` of ``Ledger.window_totals``, as the scheduler
    ranks projects). Columns: ``hour``, ``level`` (``project`` or ``program``), ``name``,
    ``ratio``, ``owed_gpu_h``, ``charged_gpu_h``.
    """
    span = ledger.span()
    columns = ["hour", "level", "name", "ratio", "owed_gpu_h", "charged_gpu_h"]
    if span is None:
        return pd.DataFrame(columns=columns)
    start, end = span
    rows = []
    for t in np.linspace(start, end, max(points, 2))[1:]:
        totals = ledger.window_totals(float(t) - lookback, float(t))
        programs: dict[str, list[float]] = {}
        for project, tot in totals.items():
            rows.append([t / HOUR, "project", project,
                         fair_share_ratio(tot.charged_gpu_h, tot.owed_gpu_h),
                         tot.owed_gpu_h, tot.charged_gpu_h])
            acc = programs.setdefault(program_of(project), [0.0, 0.0])
            acc[0] += tot.owed_gpu_h
            acc[1] += tot.charged_gpu_h
        for program, (owed, charged) in programs.items():
            rows.append([t / HOUR, "program", program, fair_share_ratio(charged, owed), owed, charged])
    return pd.DataFrame(rows, columns=columns)


def owed_delivered(ledger: Ledger, at: float, lookback: float) -> pd.DataFrame:
    """Owed, delivered (funded), charged and unallocated GPU-hours per project over the lookback."""
    totals = ledger.window_totals(at - lookback, at)
    rows = [
        [p, t.owed_gpu_h, t.allocated_gpu_h, t.charged_gpu_h, t.unallocated_gpu_h,
         t.allocated_gpu_h / t.owed_gpu_h if t.owed_gpu_h > 0 else None]
        for p, t in sorted(totals.items())
    ]
    return pd.DataFrame(rows, columns=["Project", "Owed (GPU-h)", "Delivered (GPU-h)",
                                       "Charged (GPU-h)", "Unallocated (GPU-h)",
                                       "Delivered / owed"])


def queue_frame(status: LiveStatus) -> pd.DataFrame:
    """The queue in start order, with each job's reason in plain words."""
    rows = [
        [q.position, q.job, q.project, q.user, q.gpus, wait_text(q.wait_s), q.text]
        for q in sorted(status.queue, key=lambda q: q.position)
    ]
    return pd.DataFrame(rows, columns=["Position", "Job", "Project", "User", "GPUs", "Waiting",
                                       "Reason"])


def standing_chart(frame: pd.DataFrame, level: str) -> go.Figure:
    """One line per project (or program): its standing ratio over time, with 1.0 marked."""
    fig = go.Figure()
    part = frame[frame["level"] == level]
    for name, rows in part.groupby("name", sort=True):
        fig.add_trace(go.Scatter(x=rows["hour"], y=rows["ratio"], mode="lines", name=str(name)))
    fig.add_hline(y=1.0, line_dash="dot", annotation_text="at its share")
    fig.update_layout(
        title={"text": f"Standing per {level} (charged / owed over the lookback; lower goes first)",
               "x": 0.0},
        xaxis_title="Scenario time (hours)", yaxis_title="Charged / owed", height=420,
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
    )
    return fig


def owed_chart(frame: pd.DataFrame) -> go.Figure:
    """Owed against delivered GPU-hours per project, side by side."""
    fig = go.Figure([
        go.Bar(name="Owed", y=frame["Project"], x=frame["Owed (GPU-h)"], orientation="h"),
        go.Bar(name="Delivered", y=frame["Project"], x=frame["Delivered (GPU-h)"], orientation="h"),
    ])
    fig.update_layout(barmode="group", title={"text": "Owed against delivered over the lookback",
                                              "x": 0.0},
                      xaxis_title="H100-equivalent GPU-hours",
                      height=max(300, 60 + 40 * len(frame)),
                      margin={"l": 10, "r": 10, "t": 60, "b": 10})
    return fig


def page() -> None:
    """The live page: ask for a ledger, then show what it and its status file hold."""
    st.header("Live cluster (read-only)")
    st.caption("Reads the ledger of a running `gpuplan run --ledger LEDGER` and its status "
               "file; nothing here writes to either.")
    path = st.text_input("Ledger file", value=os.environ.get(LEDGER_ENV, ""), key="live_ledger",
                         help=f"The run's SQLite ledger (default: ${LEDGER_ENV}).")
    if not path:
        st.info("Give the ledger file of a live run to see its standings and queue.")
        return
    try:
        ledger = Ledger.open_read_only(path)
    except LedgerError as exc:
        st.error(str(exc))
        return
    try:
        status: LiveStatus | None = None
        try:
            status = read_status(status_path(path))
        except StatusFileError as exc:
            st.warning(f"{exc}. Showing the ledger only.")
        span = ledger.span()
        if span is None:
            st.info(f"{path}: the ledger has no usage records yet.")
            return
        lookback = status.lookback_s if status is not None else DEFAULT_LOOKBACK
        at = status.at if status is not None else span[1]
        st.button("Refresh", key="live_refresh")
        st.subheader(f"Standing over time ({window_text(lookback)} at each point)")
        frame = standing_over_time(ledger, lookback)
        program_tab, project_tab = st.tabs(["Per program", "Per project"])
        with program_tab:
            st.plotly_chart(standing_chart(frame, "program"), key="live_standing_program")
        with project_tab:
            st.plotly_chart(standing_chart(frame, "project"), key="live_standing_project")
        st.subheader(f"Owed against delivered, {window_text(lookback)} up to "
                     f"{wait_text(at)} of scenario time")
        owed = owed_delivered(ledger, at, lookback)
        st.plotly_chart(owed_chart(owed), key="live_owed")
        st.dataframe(owed, hide_index=True)
        st.subheader("Queue")
        if status is None:
            st.info("No live status file: the queue is shown while `gpuplan run` runs.")
        elif not status.queue:
            st.write("The queue is empty.")
        else:
            st.dataframe(queue_frame(status), hide_index=True)
    finally:
        ledger.close()


if __name__ == "__main__":
    page()
