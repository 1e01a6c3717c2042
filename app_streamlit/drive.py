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
ROW_PX = 35  # the height of a header or data row in Streamlit's tables
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
    page.get_by_text("cluster and budgets", exact=False).first.wait_for(timeout=LONG)
    select = page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").first
    if select.inner_text().strip().splitlines()[-1] != scenario:
        select.click()
        page.get_by_role("option", name=scenario, exact=True).click()
    page.get_by_text(f"Scenario {scenario}: cluster and budgets").wait_for(timeout=LONG)
    wait_idle(page)


def _share_editor(page: Page):  # type: ignore[no-untyped-def]
    return (
        page.get_by_test_id("stDataFrame")
        .filter(has=page.locator("th", has_text="Share (edit me)"))
        .first
    )


def edit_share(page: Page, unit: str, share: float) -> None:
    """Type a new share for the org unit ``unit`` into the share editor.

    The editor draws on a canvas; its accessible copy tells which row holds ``unit``.
    The viewport is made as tall as the page first, so that no scrolling moves the grid
    between locating the row and typing; the row's first cell is clicked and the
    keyboard moves to the share (column 3).
    """
    editor = _share_editor(page)
    editor.locator("td", has_text=unit).first.wait_for(state="attached", timeout=LONG)
    units = [t.strip() for t in editor.locator("td[aria-colindex='1']").all_inner_texts()]
    row = units.index(unit)
    viewport = page.viewport_size or {"width": 1400, "height": 1000}
    page.set_viewport_size({"width": viewport["width"], "height": _content_height(page)})
    canvas = editor.get_by_test_id("data-grid-canvas")
    done = page.get_by_text(f"{unit} share").first
    for _attempt in range(3):
        box = _settled_box(page, canvas)
        page.mouse.click(box["x"] + 20, box["y"] + ROW_PX * (row + 1) + ROW_PX / 2)
        page.wait_for_timeout(200)
        for _ in range(2):
            page.keyboard.press("ArrowRight")
        page.wait_for_timeout(200)
        # Enter opens the cell's editor with its value; replace that value, then commit.
        # (Typing straight onto the cell keeps only the keys after the first one.)
        page.keyboard.press("Enter")
        page.wait_for_timeout(400)
        page.keyboard.press("ControlOrMeta+A")
        page.keyboard.type(f"{share:g}")
        page.wait_for_timeout(300)
        page.keyboard.press("Enter")
        try:
            done.wait_for(timeout=10_000)
            break
        except Exception:  # the grid moved under the click (a rerun re-laid it out): retry
            page.keyboard.press("Escape")
            wait_idle(page)
    done.wait_for(timeout=LONG)
    wait_idle(page)
    page.set_viewport_size(viewport)


def _settled_box(page: Page, locator):  # type: ignore[no-untyped-def]
    """The element's box once it has stopped moving (the page re-lays out after a resize)."""
    last = None
    for _ in range(20):
        box = locator.bounding_box()
        if box is not None and box == last:
            return box
        last = box
        page.wait_for_timeout(250)
    assert last is not None
    return last


def _content_height(page: Page) -> int:
    height = page.evaluate(
        "() => { const m = document.querySelector('[data-testid=stMain]');"
        " return m ? m.scrollHeight : document.body.scrollHeight; }"
    )
    return int(height) + 40


def open_tab(page: Page, name: str) -> None:
    """Click one of the app's tabs by its label (e.g. ``2. What-if results``)."""
    page.get_by_role("tab", name=name).click()


def choose(page: Page, label: str, option: str) -> None:
    """Pick ``option`` in the select box whose label is ``label``."""
    box = page.get_by_test_id("stSelectbox").filter(has_text=label).first
    box.click()
    page.get_by_role("option", name=option).click()
    wait_idle(page)


def run_whatif(page: Page, scheduler: str | None = None) -> None:
    """On the what-if tab, pick a scheduler (by its shown name), run, and wait for results."""
    open_tab(page, "2. What-if results")
    if scheduler is not None:
        choose(page, "Scheduler", scheduler)
    page.get_by_role("button", name="Run what-if").click()
    page.get_by_text("Verdict per project").wait_for(timeout=LONG)
    wait_idle(page)
    _wait_for_charts(page)


def plan_epoch(page: Page, pool: str | None = None) -> None:
    """On the plan tab, plan the epoch and wait for the Gantt chart."""
    open_tab(page, "3. Plan of one epoch")
    page.get_by_role("button", name="Plan this epoch").click()
    page.get_by_text("Waiting jobs").wait_for(timeout=LONG)
    wait_idle(page)
    if pool is not None:
        choose(page, "Pool", pool)
    _wait_for_charts(page)


def _wait_for_charts(page: Page) -> None:
    # Plotly draws asynchronously; wait until no chart container is empty.
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=stPlotlyChart]')]"
        ".filter(e => e.checkVisibility()).every(e => e.querySelector('.main-svg'))",
        timeout=LONG,
    )
    page.wait_for_timeout(500)


def visible_chart_titles(page: Page) -> list[str]:
    """Titles of the Plotly charts on the visible tab."""
    titles: list[str] = page.evaluate(
        "() => [...document.querySelectorAll('[data-testid=stPlotlyChart]')]"
        ".filter(e => e.checkVisibility())"
        ".map(e => (e.querySelector('.gtitle') || {}).textContent || '')"
    )
    return titles


def screenshot(page: Page, path: Path, width: int = 1400) -> None:
    """A PNG of the whole visible tab (the app scrolls inside its main pane)."""
    page.set_viewport_size({"width": width, "height": _content_height(page)})
    page.wait_for_timeout(800)  # charts re-layout to the new size
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size({"width": width, "height": 1000})
    _shrink(path)


def _shrink(path: Path) -> None:
    """Re-save a PNG with a 256-colour palette: a third of the size, same look (flat UI)."""
    from PIL import Image  # Pillow comes with Streamlit

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def take_screenshots(
    out: Path, scenario: str, unit: str, share: float, days: float | None, scheduler: str | None
) -> list[Path]:
    """Start the app, walk through its three tabs and save a PNG of each into ``out``."""
    from playwright.sync_api import sync_playwright

    from app_streamlit.serve import running_app

    out.mkdir(parents=True, exist_ok=True)
    shots: list[Path] = []
    with running_app() as url, sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        open_app(page, url, scenario)
        if days is not None:
            field = page.get_by_label("Simulated period (days)", exact=True).and_(page.locator("input"))
            field.fill(f"{days:g}")
            field.press("Enter")
            wait_idle(page)
        edit_share(page, unit, share)
        _wait_for_charts(page)
        shots.append(out / "app-budgets.png")
        screenshot(page, shots[-1])
        run_whatif(page, scheduler)
        shots.append(out / "app-whatif.png")
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
    parser.add_argument("--unit", default="vision", help="org unit whose share to edit")
    parser.add_argument("--share", type=float, default=35.0, help="its new share")
    parser.add_argument(
        "--days", type=float, default=0.5, help="simulated period in days (default: 0.5, as in docs/app.md)"
    )
    parser.add_argument("--scheduler", default=None, help="scheduler as the app names it")
    args = parser.parse_args(argv)
    for path in take_screenshots(args.out, args.scenario, args.unit, args.share, args.days, args.scheduler):
        print(path)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
