#!/usr/bin/env bash
# Screenshot each tab of the what-if app (budgets, what-if results, plan) into docs/img/
# (and the first tab at 1280x720 and 800 px wide) for docs/app.md. Starts the app
# headless on a free localhost port, drives it with
# Playwright and Debian's chromium, and stops it. Extra arguments go to
# `python -m app_streamlit.drive` (see --help), e.g. --days 0.25 (what docs/img shows:
# a quarter day of ai2-like under mip, after its fairshare preview).
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m app_streamlit.drive --out docs/img "$@"
