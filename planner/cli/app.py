"""``gpuplan app [--port N] [--headless]``: start the Streamlit what-if app."""

from __future__ import annotations

import argparse
import os

from planner.cli.errors import UsageError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "app",
        help="start the what-if app for budgets (Streamlit)",
        description="Start the Streamlit what-if app on this machine (http://localhost:PORT): "
        "choose or upload a scenario, edit budgets, simulate current against edited "
        "budgets, and look at one epoch's plan. The app never writes to a live ledger. "
        "It serves on localhost only (it has no log-in); from another machine, use an SSH "
        "tunnel. Stop it with Ctrl-C.",
    )
    p.add_argument("--port", type=int, default=8501, help="local port to serve on (default: 8501)")
    p.add_argument(
        "--headless",
        action="store_true",
        help="do not open a browser window (for servers and scripts)",
    )
    p.set_defaults(func=run)


def command(port: int, headless: bool) -> list[str]:
    """The ``streamlit run`` command line ``gpuplan app`` starts."""
    if not 1 <= port <= 65535:
        raise UsageError(f"--port: {port} is not a TCP port (1-65535)")
    from app_streamlit.serve import streamlit_command

    return streamlit_command(port, headless)


def run(args: argparse.Namespace) -> int:
    argv = command(args.port, args.headless)
    print(f"gpuplan: starting the what-if app on http://localhost:{args.port} (Ctrl-C stops it)", flush=True)
    # Become the Streamlit server rather than its parent, so that stopping this process
    # (Ctrl-C, or a signal from a service manager) stops the server too.
    os.execv(argv[0], argv)
    return 0  # pragma: no cover - execv does not return
