#!/usr/bin/env bash
# Screenshot each tab of the what-if app (budgets, what-if results, plan) into docs/img/
# for docs/app.md. Starts the app headless on a free localhost port, drives it with
# Playwright and Debian's chromium, and stops it. Extra arguments go to
# `python -m app_streamlit.drive` (see --help), e.g. --scenario tiny --days 0.5.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m app_streamlit.drive --out docs/img "$@"
