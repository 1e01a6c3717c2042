"""gpuplan what-if app: explore budgets before deciding them (``gpuplan app``).

The page is laid out here; the work is done in importable modules (``state``,
``whatif``, ``planview``, ``charts``) through ``views``. Nothing here writes to a live
ledger: simulations and plans use in-memory state only.
"""

from __future__ import annotations

import streamlit as st

from app_streamlit import live, views

st.set_page_config(page_title="gpuplan: budget what-if", page_icon=":bar_chart:", layout="wide")

chosen = views.sidebar()
if chosen is not None:
    loaded, days = chosen
    budgets_tab, whatif_tab, plan_tab, live_tab = st.tabs(
        ["1. Cluster and budgets", "2. What-if results", "3. Plan of one epoch", "Live cluster"]
    )
    with budgets_tab:
        edits = views.budgets_page(loaded, days)
    with whatif_tab:
        views.whatif_page(loaded, days, edits)
    with plan_tab:
        views.plan_page(loaded, days, edits)
    with live_tab:
        live.page()
