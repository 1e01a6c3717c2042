"""gpuplan what-if app: explore budgets before deciding them (``gpuplan app``).

The page is laid out here; the work is done in importable modules (``state``,
``whatif``, ``planview``, ``progress``, ``charts``) through ``views``. Nothing here writes
to a live ledger: simulations and plans use in-memory state only.
"""

from __future__ import annotations

import importlib.machinery

import streamlit as st

# Streamlit runs this file as a module named ``__main__`` with a ``__file__`` and no spec,
# and leaves it in ``sys.modules``. A process that multiprocessing spawns from this
# server (the local Dask cluster's workers) then runs this whole file again as its own
# main: each Dask worker drew the app at start, and since the page starts the Dask
# connection, tried to start a cluster of its own ("daemonic processes are not allowed
# to have children"). A spec named ``__main__`` tells multiprocessing to leave the
# child's main alone.
__spec__ = importlib.machinery.ModuleSpec("__main__", None)

from app_streamlit import live, views

st.set_page_config(page_title="gpuplan: budget what-if", page_icon=":bar_chart:", layout="wide")

chosen = views.sidebar()
if chosen is not None:
    loaded, days = chosen
    whatif_tab, details_tab, budgets_tab, plan_tab, live_tab = st.tabs(
        ["1. What-if by program", "2. Details and charts", "3. Cluster and budgets",
         "4. Plan of one epoch", "5. Live cluster"]
    )
    with whatif_tab:
        edits = views.whatif_page(loaded, days)
    with details_tab:
        views.details_page(loaded)
    with budgets_tab:
        views.budgets_page(loaded, days, edits)
    with plan_tab:
        views.plan_page(loaded, days, edits)
    with live_tab:
        live.page()
