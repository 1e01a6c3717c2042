"""``gpuplan app [--port N] [--headless]``: start the Streamlit what-if app."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from planner.cli.errors import UsageError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "app",
        help="start the what-if app for budgets (Streamlit)",
        description="Start the Streamlit what-if app: choose or upload a scenario, edit "
        "budgets, simulate current against edited budgets, and look at one epoch's plan. "
        "The app never writes to a live ledger. Stop it with Ctrl-C.",
    )
    p.add_argument("--port", type=int, default=8501, help="local port to serve on (default: 8501)")
    p.add_argument(
        "--headless",
        action="store_true",
        help="do not open a browser window (for servers and scripts)",
    )
    p.set_defaults(func=run)


def app_path() -> Path:
    """The installed package's ``app_streamlit/app.py`` (not a copy in the working folder)."""
    import app_streamlit

    return Path(app_streamlit.__file__).resolve().parent / "app.py"


def streamlit_command(port: int, headless: bool) -> list[str]:
    """The ``streamlit run`` command line for the app.

    Error details are limited to the message so that a bug never shows users a traceback,
    and usage statistics stay off: the app must not reach the network on its own.
    """
    if not 1 <= port <= 65535:
        raise UsageError(f"--port: {port} is not a TCP port (1-65535)")
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(app_path()),
        "--server.port",
        str(port),
        "--server.headless",
        "true" if headless else "false",
        "--browser.gatherUsageStats",
        "false",
        "--client.showErrorDetails",
        "none",
    ]


def run(args: argparse.Namespace) -> int:
    command = streamlit_command(args.port, args.headless)
    print(f"gpuplan: starting the what-if app on http://localhost:{args.port} (Ctrl-C stops it)")
    try:
        return subprocess.call(command)
    except KeyboardInterrupt:
        return 130
