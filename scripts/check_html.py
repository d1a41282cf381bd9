"""Open profctl's HTML reports in a real Chromium and say what a reader would meet: console errors, page errors,
plots that did not render, tables wider than the window outside a scroll box. Issue 17's browser check.

    pip install playwright        # the Python driver only; the browser is the system's Chromium
    python scripts/check_html.py report.html [more.html ...] [--chromium /usr/bin/chromium] [--shots DIR]

Exit 1 when a page has a problem. Not part of the test suite: it needs a browser that CI does not install.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

WIDTH, HEIGHT = 1440, 900  # a laptop window

PROBE = """() => {
  const imgs = [...document.images].map(i => ({src: i.src.slice(0, 40), ok: i.complete && i.naturalWidth > 0,
                                               w: i.getBoundingClientRect().width}));
  const svgs = [...document.querySelectorAll('svg')].map(s => s.getBoundingClientRect().width);
  const wide = [...document.querySelectorAll('table')].filter(t => {
    const r = t.getBoundingClientRect();
    let p = t.parentElement, boxed = false;
    while (p) { const o = getComputedStyle(p).overflowX; if (o === 'auto' || o === 'scroll') { boxed = true; break; }
                p = p.parentElement; }
    return r.width > window.innerWidth && !boxed;
  }).length;
  return {imgs, svgs, tables: document.querySelectorAll('table').length, wide,
          scrollX: document.documentElement.scrollWidth > window.innerWidth + 1};
}"""


def check(page_path: Path, browser: object, shots: Path | None) -> list[str]:
    page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})  # type: ignore[attr-defined]
    console: list[str] = []
    page.on("console", lambda m: console.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning")
            else None)
    page.on("pageerror", lambda e: console.append(f"page error: {e}"))
    page.goto(page_path.resolve().as_uri(), wait_until="load")
    page.wait_for_timeout(300)
    got = page.evaluate(PROBE)
    problems = list(console)
    problems += [f"plot not rendered: {i['src']}" for i in got["imgs"] if not i["ok"] or i["w"] < 50]
    if got["wide"]:
        problems.append(f"{got['wide']} table(s) wider than a {WIDTH}px window outside a scroll box")
    if got["scrollX"]:
        problems.append(f"the page scrolls sideways at {WIDTH}px")
    if shots is not None:
        page.screenshot(path=str(shots / (page_path.stem + ".png")), full_page=True)
    print(f"{page_path}: {got['tables']} tables, {len(got['imgs'])} images, {len(got['svgs'])} svg; "
          + ("ok" if not problems else "; ".join(problems)))
    page.close()
    return problems


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("pages", nargs="+", type=Path)
    ap.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    ap.add_argument("--shots", type=Path)
    a = ap.parse_args()
    if not a.chromium:
        print("check_html: no chromium found (--chromium PATH)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    if a.shots:
        a.shots.mkdir(parents=True, exist_ok=True)
    bad = 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=a.chromium, args=["--no-sandbox", "--disable-gpu"])
        for f in a.pages:
            bad += bool(check(f, browser, a.shots))
        browser.close()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
