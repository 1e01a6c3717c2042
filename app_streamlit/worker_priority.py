"""The app's local Dask workers yield the CPU to the page.

The what-if page runs simulations on the app's own machine: the current side's warm-up
as the page opens (:mod:`app_streamlit.warmup`) and the runs of **Run what-if**. On a
small machine those take every core, and the Streamlit server and the browser drawing
the page would queue behind them. Workers of the app's local cluster import this module
as they start (:data:`app_streamlit.whatif.WORKER_PRELOAD`) and lower their own priority,
so the page gets the CPU when it needs it and the runs take the rest: with the page
idle, they run as fast as before. A cluster given by address is left as it is.
"""

from __future__ import annotations

import contextlib
import os

NICENESS = 10
"""How much lower the workers' priority is than the app's (``nice``)."""


def dask_setup(worker: object) -> None:
    """Dask's preload hook, called in each worker process as it starts."""
    del worker
    with contextlib.suppress(OSError):  # not allowed here: the workers keep the app's priority
        os.nice(NICENESS)
