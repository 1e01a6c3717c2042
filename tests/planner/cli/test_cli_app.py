"""``gpuplan app``: the command line it starts."""

from __future__ import annotations

from pathlib import Path

import pytest

import app_streamlit
from planner.cli import main
from planner.cli.app import command


def test_app_runs_streamlit_on_the_installed_app_file() -> None:
    """The command runs `streamlit run` on the package's app.py, on the port, localhost only."""
    argv = command(8600, headless=True)
    assert argv[1:4] == ["-m", "streamlit", "run"]
    assert Path(argv[4]) == Path(app_streamlit.__file__).resolve().parent / "app.py"
    options = dict(zip(argv[5::2], argv[6::2], strict=True))
    assert options["--server.port"] == "8600"
    assert options["--server.headless"] == "true"
    assert options["--server.address"] == "127.0.0.1"
    assert options["--browser.gatherUsageStats"] == "false"
    assert dict(zip(command(8501, headless=False)[5::2], command(8501, headless=False)[6::2], strict=True))[
        "--server.headless"
    ] == "false"


def test_app_rejects_a_port_out_of_range(capsys: pytest.CaptureFixture[str]) -> None:
    """A port outside 1-65535 exits 2 with one message."""
    assert main(["app", "--port", "70000"]) == 2
    assert "--port: 70000 is not a TCP port" in capsys.readouterr().err


def test_app_help_names_its_options(capsys: pytest.CaptureFixture[str]) -> None:
    """`gpuplan app --help` documents --port and --headless."""
    with pytest.raises(SystemExit) as exit_:
        main(["app", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "--port" in out and "--headless" in out
