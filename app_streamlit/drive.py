"""Drive the app in a real browser (Playwright, sync API, Debian's chromium).

Shared by the end-to-end test (``tests/app_streamlit/test_app_browser.py``) and
``scripts/screenshot.sh``. Playwright is a development dependency, imported only here.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Playwright

CHROMIUM = "/usr/bin/chromium"
# Headless, and nothing that phones home (updates, sync, field trials).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LONG = 900_000  # ms: a what-if on a 2-core machine shared with other work can take minutes


def chromium_path() -> str | None:
    """Debian's chromium, if installed (Playwright's own browser download is not used)."""
    if Path(CHROMIUM).exists():
        return CHROMIUM
    return shutil.which("chromium")


def launch(p: Playwright) -> Browser:
    """A headless chromium.

    Raises
    ------
    RuntimeError
        If chromium is not installed.
    """
    path = chromium_path()
    if path is None:
        raise RuntimeError("chromium is not installed (apt-get install chromium)")
    return p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)


def wait_idle(page: Page) -> None:
    """Wait until the script run has finished (Streamlit's running indicator is gone).

    Input typed while a run is still drawing the page can be lost when the run redraws
    the widget, so every step waits for this first.
    """
    page.wait_for_timeout(300)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=LONG
    )
    page.wait_for_timeout(300)


def open_app(page: Page, url: str, scenario: str) -> None:
    """Open the app and choose a bundled scenario in the sidebar."""
    page.goto(url)
    page.get_by_text("what if the budgets change?", exact=False).first.wait_for(timeout=LONG)
    select = page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").first
    if select.inner_text().strip().splitlines()[-1] != scenario:
        select.click()
        page.get_by_role("option", name=scenario, exact=True).click()
    page.get_by_text(f"Scenario {scenario}: what if the budgets change?").wait_for(timeout=LONG)
    wait_idle(page)


def set_days(page: Page, days: float) -> None:
    """Type the simulated period (days) into the sidebar."""
    field = page.get_by_label("Simulated period (days)", exact=True).and_(page.locator("input"))
    field.fill(f"{days:g}")
    field.press("Enter")
    wait_idle(page)


def edit_percent(page: Page, unit: str, percent: float | str, group: str | None = None) -> None:
    """Type ``percent`` as the new percentage of its parent for the org unit ``unit``
    (a path, e.g. ``vision`` or ``language/posttrain``), choosing its split first."""
    if group is not None:
        choose(page, "Split to edit", group)
    field = page.get_by_label(f"New percentage for {unit}", exact=True)
    field.fill(str(percent))
    field.press("Enter")
    wait_idle(page)


def open_tab(page: Page, name: str) -> None:
    """Click one of the app's tabs by its label (e.g. ``2. Details and charts``)."""
    page.get_by_role("tab", name=name).click()
    page.wait_for_timeout(300)


def choose(page: Page, label: str, option: str) -> None:
    """Pick ``option`` in the select box whose label is ``label``."""
    box = page.get_by_test_id("stSelectbox").filter(has_text=label).first
    box.scroll_into_view_if_needed()
    wanted = page.get_by_role("option").filter(has_text=option).first
    for _attempt in range(3):
        box.click()
        try:
            wanted.wait_for(timeout=5_000)
            break
        except Exception:  # the list did not open (a rerun redrew the box): try again
            page.keyboard.press("Escape")
            wait_idle(page)
    wanted.click()
    wait_idle(page)


def run_whatif(page: Page, scheduler: str | None = None) -> None:
    """On the first tab, pick a scheduler (by its shown name), run, and wait for the final
    results (after any preview)."""
    open_tab(page, "1. What-if by program")
    if scheduler is not None:
        choose(page, "Scheduler", scheduler)
    page.get_by_role("button", name="Run what-if").click()
    page.locator(".st-key-tree_depth").wait_for(timeout=LONG)
    wait_idle(page)


def plan_epoch(page: Page, program: str | None = None) -> None:
    """On the plan tab, plan the epoch and wait for the Gantt chart."""
    open_tab(page, "4. Plan of one epoch")
    page.get_by_role("button", name="Plan this epoch").click()
    page.get_by_text("Waiting jobs").wait_for(timeout=LONG)
    wait_idle(page)
    if program is not None:
        choose(page, "Program", program)
    wait_for_charts(page)


def wait_for_charts(page: Page) -> None:
    """Wait until Plotly has drawn every visible chart."""
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=stPlotlyChart]')]"
        ".filter(e => e.checkVisibility()).every(e => e.querySelector('.main-svg'))",
        timeout=LONG,
    )
    page.wait_for_timeout(500)


def _content_height(page: Page) -> int:
    height = page.evaluate(
        "() => { const m = document.querySelector('[data-testid=stMain]');"
        " return m ? m.scrollHeight : document.body.scrollHeight; }"
    )
    return int(height) + 40



def visible_chart_titles(page: Page) -> list[str]:
    """Titles of the Plotly charts on the visible tab."""
    titles: list[str] = page.evaluate(
        "() => [...document.querySelectorAll('[data-testid=stPlotlyChart]')]"
        ".filter(e => e.checkVisibility())"
        ".map(e => (e.querySelector('.gtitle') || {}).textContent || '')"
    )
    return titles


def screenshot(page: Page, path: Path, width: int = 1400, height: int | None = None) -> None:
    """A PNG of the visible tab: the whole of it (``height=None``; the app scrolls inside
    its main pane), or the first screen of a ``width`` x ``height`` window."""
    page.set_viewport_size({"width": width, "height": height or 1000})
    page.wait_for_timeout(800)  # the page re-lays out to the new width
    if height is None:
        page.set_viewport_size({"width": width, "height": _content_height(page)})
        page.wait_for_timeout(800)  # charts re-layout to the new size
    page.screenshot(path=str(path), full_page=height is None)
    page.set_viewport_size({"width": 1400, "height": 1000})
    _shrink(path)


def _shrink(path: Path) -> None:
    """Re-save a PNG with a 256-colour palette: a third of the size, same look (flat UI)."""
    from PIL import Image  # Pillow comes with Streamlit

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def take_screenshots(
    out: Path, scenario: str, unit: str, percent: float, days: float | None, scheduler: str | None
) -> list[Path]:
    """Start the app, edit one percentage, run the what-if, and save a PNG of each tab
    (and of the first tab at 1280x720 and 800 px wide) into ``out``."""
    from playwright.sync_api import sync_playwright

    from app_streamlit.serve import running_app

    out.mkdir(parents=True, exist_ok=True)
    shots: list[Path] = []
    with running_app() as url, sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        open_app(page, url, scenario)
        if days is not None:
            set_days(page, days)
        edit_percent(page, unit, percent)
        run_whatif(page, scheduler)
        for name, width, height in (
            ("app-whatif.png", 1400, None),
            ("app-whatif-1280x720.png", 1280, 720),
            ("app-whatif-800.png", 800, None),
        ):
            shots.append(out / name)
            screenshot(page, shots[-1], width, height)
        open_tab(page, "2. Details and charts")
        wait_for_charts(page)
        for name, width in (("app-details.png", 1400), ("app-details-800.png", 800)):
            shots.append(out / name)
            screenshot(page, shots[-1], width)
        open_tab(page, "3. Cluster and budgets")
        shots.append(out / "app-budgets.png")
        screenshot(page, shots[-1])
        plan_epoch(page)
        shots.append(out / "app-plan.png")
        screenshot(page, shots[-1])
        browser.close()
    return shots


def main(argv: list[str] | None = None) -> int:
    """``python -m app_streamlit.drive``: the screenshots of ``docs/app.md``."""
    import argparse

    parser = argparse.ArgumentParser(description="Screenshot each tab of the what-if app.")
    parser.add_argument("--out", type=Path, default=Path("docs/img"), help="folder for the PNGs")
    parser.add_argument("--scenario", default="ai2-like", help="bundled scenario (default: ai2-like)")
    parser.add_argument("--unit", default="vision", help="org unit whose percentage to edit")
    parser.add_argument(
        "--percent", type=float, default=25.0, help="its new percentage of its parent (default: 25)"
    )
    parser.add_argument("--days", type=float, default=None, help="simulated period in days (default: the app's)")
    parser.add_argument("--scheduler", default=None, help="scheduler as the app names it")
    args = parser.parse_args(argv)
    for path in take_screenshots(args.out, args.scenario, args.unit, args.percent, args.days, args.scheduler):
        print(path)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
