"""Plotly figures of the what-if app: plain titles, units on every axis, readable labels.

Each function takes plain data (DataFrames, models) and returns a ``go.Figure``; none
touches Streamlit, so the tests can check what a chart shows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

# One colour per result set, kept the same across all charts of a run (the first two are
# "current" and "edited" budgets).
VARIANT_COLOURS = ("#7f8c8d", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd")
FONT = {"size": 14}
ROW_PX = 26


def _layout(fig: go.Figure, title: str, height: int = 420) -> go.Figure:
    fig.update_layout(
        title={"text": title, "x": 0.0, "xanchor": "left"},
        font=FONT,
        height=height,
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "right", "x": 1.0},
    )
    return fig


def _bar_height(rows: int, bars_per_row: int) -> int:
    return max(320, 120 + rows * max(ROW_PX, 12 * bars_per_row))


WAIT_TICKS = (
    (1.0, "≤1 s"), (10.0, "10 s"), (60.0, "1 min"), (600.0, "10 min"), (3600.0, "1 h"),
    (4 * 3600.0, "4 h"), (86400.0, "1 day"), (7 * 86400.0, "1 week"),
)


def _line_style(i: int) -> dict[str, object]:
    # The current budgets are dashed, so a line that the edited one covers still shows.
    return {"color": VARIANT_COLOURS[i % len(VARIANT_COLOURS)], "width": 3, "dash": "dash" if i == 0 else "solid"}


def wait_cdf(jobs: pd.DataFrame, variants: Sequence[str], job_class: str) -> go.Figure:
    """Share of jobs started within a given wait, per result set, for one job class.

    ``jobs`` has columns ``variant``, ``class``, ``wait_s`` and ``started``; jobs not
    started by the end of the simulated period count in the total but never on the
    curve, so its top shows the share of jobs that started at all. Waits under a second
    (most debug jobs under a good scheduler) sit at the axis's left end, "≤1 s".
    """
    fig = go.Figure()
    longest = 3600.0
    counted = 0
    for i, variant in enumerate(variants):
        rows = jobs[jobs["variant"] == variant]
        if job_class != "all":
            rows = rows[rows["class"] == job_class]
        total = len(rows)
        if not total:
            continue
        counted += total
        waits = sorted(max(float(w), 1.0) for w in rows.loc[rows["started"], "wait_s"])
        longest = max(longest, *waits) if waits else longest
        xs = [1.0, *waits]
        ys = [0.0, *(100.0 * (k + 1) / total for k in range(len(waits)))]
        fig.add_scatter(
            x=xs,
            y=ys,
            mode="lines",
            line_shape="hv",
            name=variant,
            line=_line_style(i),
            customdata=[_wait_words(x) for x in xs],
            hovertemplate="%{y:.0f}% of jobs started within %{customdata}<extra>" + variant + "</extra>",
        )
    ticks = [(v, t) for v, t in WAIT_TICKS if v <= longest * 1.5]
    fig.update_xaxes(
        title_text="Wait from submission to first start (log scale)",
        type="log",
        range=[0, math.log10(longest * 1.5)],
        tickvals=[v for v, _ in ticks],
        ticktext=[t for _, t in ticks],
    )
    fig.update_yaxes(title_text="Jobs started (%)", range=[0, 102], ticksuffix="%")
    label = "all jobs" if job_class == "all" else f"{job_class} jobs"
    if not counted:
        fig.add_annotation(
            text=f"No {label} in the simulated period", showarrow=False, x=0.5, y=0.5,
            xref="paper", yref="paper", font={"size": 16},
        )
    return _layout(fig, f"Wait-time distribution: {label}", height=380)


def _wait_words(seconds: float) -> str:
    if seconds <= 1.0:
        return "1 s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def occupancy_over_time(occupancy: pd.DataFrame, variants: Sequence[str]) -> go.Figure:
    """Busy share of the available GPUs over simulated time, one line per result set.

    ``occupancy`` has columns ``variant``, ``hours`` (since the scenario's start) and
    ``occupancy`` (0-1).
    """
    fig = go.Figure()
    for i, variant in enumerate(variants):
        rows = occupancy[occupancy["variant"] == variant]
        fig.add_scatter(
            x=rows["hours"],
            y=100.0 * rows["occupancy"],
            mode="lines",
            line_shape="hv",
            name=variant,
            line=_line_style(i),
            hovertemplate="hour %{x:.1f}: %{y:.0f}% busy<extra>" + variant + "</extra>",
        )
    fig.update_xaxes(title_text="Simulated time since the scenario's start (hours)")
    fig.update_yaxes(title_text="GPUs busy (% of available)", range=[0, 105], ticksuffix="%")
    return _layout(fig, "Occupancy over time", height=360)


def preemption_bars(summary: pd.DataFrame, variants: Sequence[str]) -> go.Figure:
    """Preemptions and GPU-hours lost to them, per result set.

    ``summary`` has one row per variant with ``preemptions`` and ``preempted_gpu_h``.
    """
    rows = summary.set_index("variant").loc[list(variants)]
    colours = [VARIANT_COLOURS[i % len(VARIANT_COLOURS)] for i in range(len(variants))]
    fig = go.Figure()
    fig.add_bar(
        x=list(variants),
        y=rows["preemptions"],
        marker_color=colours,
        text=[f"{int(v):,}" for v in rows["preemptions"]],
        textposition="outside",
        name="preemptions",
        showlegend=False,
    )
    fig.update_xaxes(title_text="Result set")
    fig.update_yaxes(title_text="Preemptions (count)", rangemode="tozero")
    return _layout(fig, "Preemptions", height=340)


def project_colours(projects: Sequence[str]) -> dict[str, str]:
    """A distinct colour per project, in the given order: the qualitative palettes
    first, then evenly spaced hues, so no two projects ever share a colour."""
    palette = list(dict.fromkeys(c.lower() for c in (*qualitative.Dark24, *qualitative.Alphabet, *qualitative.Light24)))
    out: dict[str, str] = {}
    for i, p in enumerate(projects):
        if i < len(palette):
            out[p] = palette[i]
        else:
            out[p] = f"hsl({(i * 137.5) % 360:.1f}, 65%, {35 + (i % 3) * 12}%)"
    return out


def program_deltas(units: pd.DataFrame) -> go.Figure:
    """The change in delivered GPU-hours per program, with its spread as error bars.

    ``units`` is :func:`app_streamlit.whatif.compare_units`; a change within noise is
    grey, a gain green, a loss red.
    """
    rows = units[units["level"] == 0].iloc[::-1]
    colours = [
        "#9e9e9e" if not sep else ("#1a7f37" if ch >= 0 else "#cf222e")
        for ch, sep in zip(rows["delivered_gpu_h_change"], rows["delivered_gpu_h_separated"], strict=True)
    ]
    # The figures go into the row labels: text on the bars would collide with the error bars.
    labels = [
        f"{unit}  {c:+,.0f} ± {sp:,.0f}" + (" (within noise)" if not sep else "")
        for unit, c, sp, sep in zip(
            rows["unit"], rows["delivered_gpu_h_change"], rows["delivered_gpu_h_spread"],
            rows["delivered_gpu_h_separated"], strict=True,
        )
    ]
    fig = go.Figure()
    fig.add_bar(
        y=labels,
        x=list(rows["delivered_gpu_h_change"]),
        orientation="h",
        marker_color=colours,
        error_x={"type": "data", "array": list(rows["delivered_gpu_h_spread"]), "color": "#444"},
        hovertemplate="%{y}<extra></extra>",
        showlegend=False,
    )
    fig.add_vline(x=0, line_color="black", line_width=1)
    fig.update_xaxes(title_text="Edited − current GPU-hours (± spread)", tickformat=",")
    fig.update_yaxes(title_text="Program", automargin=True)
    return _layout(fig, "Change in delivered GPU-hours per program", height=_bar_height(len(rows), 1))


def delivered_vs_owed_units(units: pd.DataFrame) -> go.Figure:
    """Delivered within owed over owed per unit, current and edited budgets (%)."""
    rows = units.iloc[::-1]
    fig = go.Figure()
    for i, (side, name) in enumerate((("now", "current budgets"), ("edited", "edited budgets"))):
        owed = rows[f"owed_gpu_h_{side}"].where(rows[f"owed_gpu_h_{side}"] > 0)
        ratio = 100.0 * rows[f"delivered_within_owed_gpu_h_{side}"] / owed
        fig.add_bar(
            y=list(rows["unit"]),
            x=list(ratio),
            name=name,
            orientation="h",
            marker_color=VARIANT_COLOURS[i],
            hovertemplate="%{y}: %{x:.1f}% of owed<extra>" + name + "</extra>",
        )
    fig.add_vline(x=100, line_dash="dash", line_color="black")
    fig.update_layout(barmode="group")
    fig.update_xaxes(title_text="Delivered within owed / owed (%; 100% = all owed)", ticksuffix="%", range=[0, 105])
    fig.update_yaxes(title_text="Program", automargin=True)
    fig = _layout(fig, "Share of owed GPU-hours delivered, per program", height=_bar_height(len(rows), 2))
    # The legend under the plot: it never collides with the title, at any width.
    fig.update_layout(legend={"orientation": "h", "y": -0.25, "yanchor": "top", "x": 0, "xanchor": "left"},
                      margin={"b": 90})
    return fig


def program_gantt(
    bars: pd.DataFrame,
    title: str,
    boundaries: Sequence[float] = (),
    projects: Sequence[str] = (),
) -> go.Figure:
    """One program's epoch as a Gantt chart: a row per job, coloured by its project.

    ``bars`` is :func:`app_streamlit.planview.job_bars`. Each row reads ``job · project``
    and its bar says how many GPUs on how many nodes; the colour of each project is
    unique and the same in every chart (:func:`project_colours`).
    """
    colours = project_colours(list(projects) if projects else list(dict.fromkeys(bars["project"])))
    order = bars.sort_values(["project", "start_h", "job"]) if len(bars) else bars
    rows = list(dict.fromkeys(f"{j} · {p.rsplit('/', 1)[-1]}" for j, p in zip(order["job"], order["project"], strict=True)))
    fig = go.Figure()
    for project in dict.fromkeys(order["project"]) if len(order) else []:
        mine = order[order["project"] == project]
        fig.add_bar(
            y=[f"{j} · {project.rsplit('/', 1)[-1]}" for j in mine["job"]],
            x=mine["end_h"] - mine["start_h"],
            base=mine["start_h"],
            orientation="h",
            name=project,
            marker_color=colours.get(project, "#888"),
            marker_line={"color": "white", "width": 1},
            text=[f"{g} GPUs on {n} node{'s' if n > 1 else ''}" for g, n in zip(mine["gpus"], mine["nodes"], strict=True)],
            textposition="inside",
            insidetextanchor="middle",
            customdata=mine[["pool", "charged"]].to_numpy(),
            hovertemplate=(
                "<b>%{y}</b> (" + project + ")<br>from hour %{base:.2f} for %{x:.2f} h<br>%{text} of "
                "%{customdata[0]}<br>charged to its budget: %{customdata[1]}<extra></extra>"
            ),
        )
    for x in boundaries:
        fig.add_vline(x=x, line_dash="dot", line_color="#888", line_width=1)
    fig.update_layout(barmode="overlay", bargap=0.25)
    fig.update_xaxes(
        title_text="Time since the scenario's start (hours)",
        range=[min(boundaries), max(boundaries)] if boundaries else None,
    )
    fig.update_yaxes(
        title_text="Job · project", categoryorder="array", categoryarray=rows[::-1], type="category",
        automargin=True,
    )
    height = max(320, 200 + ROW_PX * len(rows))
    fig = _layout(fig, title, height=height)
    fig.update_layout(
        legend={"orientation": "h", "x": 0, "xanchor": "left", "y": -110 / height, "yanchor": "top",
                "title": {"text": "Project"}},
        margin={"l": 10, "r": 10, "t": 60, "b": 150},
    )
    if not len(bars):
        fig.add_annotation(
            text="No job of this program is planned in this epoch", showarrow=False, x=0.5, y=0.5,
            xref="paper", yref="paper", font={"size": 16},
        )
    return fig
