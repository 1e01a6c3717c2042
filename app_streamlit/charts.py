"""Plotly figures of the what-if app: plain titles, units on every axis, readable labels.

Each function takes plain data (DataFrames, models) and returns a ``go.Figure``; none
touches Streamlit, so the tests can check what a chart shows.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from models import Scenario, effective_shares, walk

# One colour per result set, kept the same across all charts of a run (the first two are
# "current" and "edited" budgets; baselines follow).
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


def org_sunburst(scenario: Scenario) -> go.Figure:
    """The org tree as rings: each unit's area is its effective share of the cluster."""
    eff = effective_shares(scenario.org)
    capacity = scenario.capacity_h100()
    ids, labels, parents, values, hover = [], [], [], [], []
    for path, unit in walk(scenario.org):
        ids.append(path)
        labels.append(unit.name)
        parents.append(path.rsplit("/", 1)[0] if "/" in path else "")
        values.append(eff[path])
        hover.append(
            f"<b>{path}</b><br>share {unit.share:g} among siblings<br>"
            f"{eff[path]:.1%} of the cluster = {eff[path] * capacity:,.0f} H100-eq GPUs"
        )
    fig = go.Figure(
        go.Sunburst(
            ids=ids,
            labels=labels,
            parents=parents,
            values=values,
            branchvalues="total",
            hovertext=hover,
            hoverinfo="text",
            texttemplate="%{label}<br>%{percentRoot:.1%}",
            insidetextorientation="horizontal",
        )
    )
    return _layout(fig, "Effective share of the cluster per org unit (edited budgets)", height=520)


def owed_bars(table: pd.DataFrame) -> go.Figure:
    """Owed GPU-hours per project, now and with the edited budgets, as horizontal bars."""
    projects = list(table["Project"])[::-1]  # first project at the top
    fig = go.Figure()
    for column, name, colour in (
        ("Owed now (H100-eq GPU-h)", "current budgets", VARIANT_COLOURS[0]),
        ("Owed edited (H100-eq GPU-h)", "edited budgets", VARIANT_COLOURS[1]),
    ):
        fig.add_bar(
            y=projects,
            x=list(table[column])[::-1],
            name=name,
            orientation="h",
            marker_color=colour,
            hovertemplate="%{y}: %{x:,.0f} GPU-h<extra>" + name + "</extra>",
        )
    fig.update_layout(barmode="group")
    fig.update_xaxes(title_text="Owed GPU-hours (H100-equivalent)", tickformat=",")
    fig.update_yaxes(title_text="Project", automargin=True)
    return _layout(fig, "Owed GPU-hours per project", height=_bar_height(len(projects), 2))


def _bar_height(rows: int, bars_per_row: int) -> int:
    return max(320, 120 + rows * max(ROW_PX, 12 * bars_per_row))


def delivered_vs_owed(projects: pd.DataFrame, variants: Sequence[str]) -> go.Figure:
    """Delivered over owed GPU-hours per project, one bar per result set.

    ``projects`` has columns ``variant``, ``project`` and ``delivered_over_owed``; 100%
    means the project got every GPU-hour it was owed.
    """
    names = list(dict.fromkeys(projects["project"]))[::-1]
    fig = go.Figure()
    for i, variant in enumerate(variants):
        rows = projects[projects["variant"] == variant].set_index("project")
        values = [100.0 * float(rows.loc[p, "delivered_over_owed"]) if p in rows.index else None for p in names]
        fig.add_bar(
            y=names,
            x=values,
            name=variant,
            orientation="h",
            marker_color=VARIANT_COLOURS[i % len(VARIANT_COLOURS)],
            hovertemplate="%{y}: %{x:.1f}% of owed<extra>" + variant + "</extra>",
        )
    fig.add_vline(x=100, line_dash="dash", line_color="black", annotation_text="100% = all owed hours")
    fig.update_layout(barmode="group")
    fig.update_xaxes(title_text="Delivered / owed GPU-hours (%)", ticksuffix="%")
    fig.update_yaxes(title_text="Project", automargin=True)
    return _layout(
        fig, "Delivered vs owed GPU-hours per project", height=_bar_height(len(names), len(variants))
    )


def wait_cdf(jobs: pd.DataFrame, variants: Sequence[str], job_class: str) -> go.Figure:
    """Share of jobs started within a given wait, per result set, for one job class.

    ``jobs`` has columns ``variant``, ``class``, ``wait_s`` and ``started``; jobs not
    started by the end of the simulated period count in the total but never on the
    curve, so its top shows the share of jobs that started at all.
    """
    fig = go.Figure()
    for i, variant in enumerate(variants):
        rows = jobs[jobs["variant"] == variant]
        if job_class != "all":
            rows = rows[rows["class"] == job_class]
        total = len(rows)
        waits = sorted(float(w) / 60.0 for w in rows.loc[rows["started"], "wait_s"])
        if not total:
            continue
        xs = [0.0, *waits]
        ys = [0.0, *(100.0 * (k + 1) / total for k in range(len(waits)))]
        fig.add_scatter(
            x=[max(x, 0.01) for x in xs],
            y=ys,
            mode="lines",
            line_shape="hv",
            name=variant,
            line={"color": VARIANT_COLOURS[i % len(VARIANT_COLOURS)], "width": 3},
            hovertemplate="%{y:.0f}% of jobs started within %{x:.1f} min<extra>" + variant + "</extra>",
        )
    fig.update_xaxes(title_text="Wait from submission to first start (minutes, log scale)", type="log")
    fig.update_yaxes(title_text="Jobs started (%)", range=[0, 101], ticksuffix="%")
    label = "all jobs" if job_class == "all" else f"{job_class} jobs"
    return _layout(fig, f"Wait-time distribution: {label}", height=380)


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
            line={"color": VARIANT_COLOURS[i % len(VARIANT_COLOURS)], "width": 2},
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


def plan_gantt(slices: pd.DataFrame, nodes: Sequence[str], title: str) -> go.Figure:
    """A Gantt chart of one epoch: a row per node, a bar per job and slice.

    ``slices`` has columns ``node``, ``start_h``, ``end_h`` (hours since the scenario's
    start), ``job``, ``project``, ``gpus``, ``charged``, and ``lane``/``lanes`` (jobs
    sharing a node in a slice sit in thin lanes of its row instead of hiding each other);
    ``nodes`` orders the rows (all nodes of the pool, idle ones included so that free
    capacity shows as gaps).
    """
    fig = go.Figure()
    projects = list(dict.fromkeys(slices["project"])) if len(slices) else []
    palette = (
        "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
        "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173",
    )
    for i, project in enumerate(projects):
        rows = slices[slices["project"] == project]
        fig.add_bar(
            y=rows["node"],
            x=rows["end_h"] - rows["start_h"],
            base=rows["start_h"],
            orientation="h",
            width=0.8 / rows["lanes"],
            offset=-0.4 + 0.8 * rows["lane"] / rows["lanes"],
            name=project,
            marker_color=palette[i % len(palette)],
            marker_line={"color": "white", "width": 1},
            text=rows["job"],
            textposition="inside",
            insidetextanchor="middle",
            customdata=rows[["job", "gpus", "charged"]].to_numpy(),
            hovertemplate=(
                "<b>%{customdata[0]}</b> (" + project + ")<br>%{y}<br>"
                "%{base:.2f} h to %{x:.2f} h long<br>%{customdata[1]} GPUs on this node<br>"
                "charged to budget: %{customdata[2]}<extra></extra>"
            ),
        )
    fig.update_layout(barmode="overlay", bargap=0.15)
    fig.update_xaxes(title_text="Time since the scenario's start (hours)")
    fig.update_yaxes(
        title_text="Node",
        categoryorder="array",
        categoryarray=list(nodes)[::-1],
        type="category",
        automargin=True,
    )
    return _layout(fig, title, height=max(300, 140 + ROW_PX * len(nodes)))
