"""Start the app with ``streamlit run``: the one command line, used by ``gpuplan app``,
the browser test and ``scripts/screenshot.sh``."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ADDRESS = "127.0.0.1"


def app_path() -> Path:
    """The installed package's ``app.py`` (not a copy in the working folder)."""
    return Path(__file__).resolve().parent / "app.py"


def streamlit_command(port: int, headless: bool, address: str = ADDRESS) -> list[str]:
    """The ``streamlit run`` command line for the app.

    It serves on ``address`` (this machine only by default: the app has no log-in);
    naming the address also keeps Streamlit from looking up the machine's external IP on
    the internet. Usage statistics stay off, and error details are cut to the message so
    that a bug never shows users a traceback.
    """
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(app_path()),
        "--server.port",
        str(port),
        "--server.address",
        address,
        "--server.headless",
        "true" if headless else "false",
        "--browser.gatherUsageStats",
        "false",
        "--client.showErrorDetails",
        "none",
        "--client.toolbarMode",
        "viewer",
    ]


def free_port() -> int:
    """A TCP port on localhost that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((ADDRESS, 0))
        port: int = s.getsockname()[1]
        return port


def wait_until_up(url: str, process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """Wait for Streamlit's health endpoint to answer.

    Raises
    ------
    RuntimeError
        If the server exits or does not answer within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit exited with code {process.returncode} before serving {url}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.25)
    raise RuntimeError(f"streamlit did not answer at {url} within {timeout:.0f} s")


@contextmanager
def running_app(port: int | None = None, log: Path | None = None) -> Iterator[str]:
    """Run the app headless on a free localhost port; yield its URL; stop it afterwards."""
    port = port or free_port()
    url = f"http://{ADDRESS}:{port}"
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - closed below
    process = subprocess.Popen(streamlit_command(port, headless=True), stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until_up(url, process)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if log:
            out.close()  # type: ignore[union-attr]
