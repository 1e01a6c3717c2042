"""``report.html``: the side-by-side comparison with plotly plots, readable offline.

plotly.js is embedded once (``include_plotlyjs=True`` on the first figure), so the file
needs no network.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from planner.scheduler.state import WAIT_CLASSES
from planner.simulator import SimulationResult

COLORS = {"legacy": "#8c8c8c", "fairshare": "#1f77b4", "mip": "#d62728"}


def summary_rows(results: Mapping[str, SimulationResult]) -> list[tuple[str, list[str]]]:
    """(metric, value per policy) rows of the comparison table, as display text."""
    names = list(results)
    rows: list[tuple[str, list[str]]] = []
    first = results[names[0]].summary
    for key, value in first.items():
        if isinstance(value, dict):
            for cls in value:
                rows.append(
                    (f"{key}[{cls}]", [_fmt(results[n].summary[key].get(cls)) for n in names])
                )
        else:
            rows.append((key, [_fmt(results[n].summary[key]) for n in names]))
    return rows


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


def figures(results: Mapping[str, SimulationResult]) -> list[go.Figure]:
    """Delivered vs owed per project, wait CDF per class, occupancy over time."""
    names = list(results)
    color = [COLORS.get(n) for n in names]

    # 1. Delivered vs owed per project: owed as outlined bars, delivered within owed filled.
    fig1 = make_subplots(rows=len(names), cols=1, shared_xaxes=True, subplot_titles=names,
                         vertical_spacing=0.06)
    for i, n in enumerate(names, start=1):
        p = results[n].projects
        fig1.add_bar(x=p["project"], y=p["owed_gpu_h"], name=f"{n}: owed", row=i, col=1,
                     marker={"color": "rgba(0,0,0,0)", "line": {"color": "black", "width": 1}})
        fig1.add_bar(x=p["project"], y=p["delivered_gpu_h"], name=f"{n}: delivered", row=i,
                     col=1, marker={"color": color[i - 1]}, opacity=0.8)
    fig1.update_layout(
        title="Delivered vs owed H100-equivalent GPU-hours per project",
        barmode="overlay", height=300 * len(names) + 150,
    )

    # 2. Wait CDF per class.
    fig2 = make_subplots(rows=2, cols=2, subplot_titles=list(WAIT_CLASSES))
    for k, cls in enumerate(WAIT_CLASSES):
        r, c = divmod(k, 2)
        for i, n in enumerate(names):
            j = results[n].jobs
            w = np.sort(j["wait_s"].to_numpy() if cls == "all" else j.loc[j["class"] == cls, "wait_s"].to_numpy())
            if not len(w):
                continue
            y = np.arange(1, len(w) + 1) / len(w)
            fig2.add_scatter(x=np.maximum(w, 1.0), y=y, mode="lines", name=n, legendgroup=n,
                             showlegend=k == 0, line={"color": color[i]}, row=r + 1, col=c + 1)
    fig2.update_xaxes(type="log", title_text="wait (s, from 1 s)")
    fig2.update_yaxes(range=[0, 1.01])
    fig2.update_layout(title="Queue wait CDF per class (submit to first start)", height=700)

    # 3. Occupancy over time.
    fig3 = go.Figure()
    for i, n in enumerate(names):
        o = results[n].occupancy
        occ = np.where(o["available"] > 0, o["busy"] / o["available"].where(o["available"] > 0, 1), np.nan)
        fig3.add_scatter(x=o["hour"], y=occ, mode="lines", name=n, line={"color": color[i]})
    o = results[names[0]].occupancy
    fill = np.where(o["available"] > 0, o["fillable"] / o["available"].where(o["available"] > 0, 1), np.nan)
    fig3.add_scatter(x=o["hour"], y=fill, mode="lines", name="fillable (demand, first policy)",
                     line={"color": "black", "dash": "dot"})
    fig3.update_layout(title="Occupancy per hour (busy / available GPUs, drained nodes excluded)",
                       xaxis_title="hour", yaxis_title="occupancy", height=450)
    return [fig1, fig2, fig3]


def render(results: Mapping[str, SimulationResult], title: str = "") -> str:
    """The whole HTML document."""
    names = list(results)
    head = "".join(f"<th>{html.escape(n)}</th>" for n in names)
    body = "".join(
        f"<tr><td>{html.escape(k)}</td>" + "".join(f"<td>{html.escape(v)}</td>" for v in vals) + "</tr>"
        for k, vals in summary_rows(results)
    )
    figs = figures(results)
    plots = [
        f.to_html(full_html=False, include_plotlyjs=(i == 0), default_height="auto")
        for i, f in enumerate(figs)
    ]
    first = results[names[0]]
    title = title or f"gpuplan simulate: {first.scenario}"
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
        "td:first-child{text-align:left}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f"<p>Simulated {first.horizon / 3600:g} h. Metric definitions: docs/metrics.md.</p>"
        f"<table><tr><th>metric</th>{head}</tr>{body}</table>"
        + "".join(plots)
        + "<script type='application/json' id='summary'>"
        # JSON as summary.json has it; inside <script> entities are not decoded, so only
        # "</" is escaped (a string could otherwise end the element).
        + json.dumps(summary_json(results)).replace("</", "<\\/")
        + "</script></body></html>"
    )


def json_ready(value: Any) -> Any:
    """``value`` with non-finite floats as ``None`` (JSON has no NaN)."""
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def summary_json(results: Mapping[str, SimulationResult]) -> dict[str, Any]:
    """What ``summary.json`` holds: each policy's summary, under ``policies``."""
    return {"policies": {n: json_ready(r.summary) for n, r in results.items()}}


def write_report(results: Mapping[str, SimulationResult], path: str | Path) -> None:
    """Write :func:`render` to ``path``."""
    Path(path).write_text(render(results), encoding="utf-8")
