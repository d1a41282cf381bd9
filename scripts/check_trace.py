"""Load profctl's timelines (`profctl report FILE -f perfetto -o trace.json`) in the Chromium trace viewer and say
what it met: import warnings, page errors, and what its model holds (processes, threads, slices, kernels).

The viewer is catapult's trace viewer, the code behind chrome://tracing, made into one page with the trace inside
by catapult's own `tracing/bin/trace2html` (a checkout of github.com/catapult-project/catapult); the page is
opened in the system's Chromium through playwright. (chrome://tracing itself would need a Chromium whose internal
debugging pages load in headless mode.)

    pip install playwright        # the Python driver only; the browser is the system's Chromium
    python scripts/check_trace.py trace.json [more.json ...] --catapult ~/catapult [--chromium /usr/bin/chromium]
        [--shots DIR]

Exit 1 when a trace has an import warning or a page error. Not part of the test suite: it needs a browser and a
catapult checkout that CI does not have.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROBE = """() => {
  const v = document.querySelector('tr-ui-timeline-view');
  if (!v || !v.model) return {error: 'the viewer made no model'};
  const m = v.model, threads = m.getAllThreads();
  let slices = 0, kernels = 0, asyncs = 0;
  for (const t of threads) {
    slices += t.sliceGroup.slices.length;
    kernels += t.sliceGroup.slices.filter(s => s.category === 'kernel').length;
    asyncs += t.asyncSliceGroup.slices.length;
  }
  return {warnings: m.importWarnings.map(w => w.type + ': ' + w.message), processes: Object.keys(m.processes).length,
          threads: threads.length, slices, kernels, asyncs};
}"""
#: console messages of the viewer itself, not of the trace
BENIGN = ("WebComponentsV0 polyfill", "'slider-vertical'")


def viewer_page(trace: Path, catapult: Path, out: Path) -> Path:
    """The trace inside catapult's viewer, one HTML file (trace2html; a .gz trace is read decompressed)."""
    src = trace
    if trace.name.endswith(".gz"):
        import gzip

        src = out.with_suffix(".json")
        with gzip.open(trace, "rb") as f:
            src.write_bytes(f.read())
    page = out.with_suffix(".html")
    subprocess.run([sys.executable, str(catapult / "tracing" / "bin" / "trace2html"), str(src), "--output",
                    str(page)], check=True, capture_output=True, timeout=600)
    return page


def check(page: Path, browser: object, shots: Path | None) -> tuple[dict[str, object], list[str]]:
    p = browser.new_page(viewport={"width": 1600, "height": 1000})  # type: ignore[attr-defined]
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    p.on("console", lambda m: errors.append(f"console {m.type}: {m.text}")
         if m.type in ("error", "warning") and not any(b in m.text for b in BENIGN) else None)
    p.goto(page.as_uri())
    p.wait_for_function("() => { const v = document.querySelector('tr-ui-timeline-view'); return v && v.model; }",
                        timeout=120_000)
    res: dict[str, object] = p.evaluate(PROBE)
    if shots is not None:
        p.screenshot(path=str(shots / (page.stem + ".png")))
    p.close()
    return res, errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+", type=Path)
    ap.add_argument("--catapult", type=Path, required=True, help="a checkout of catapult-project/catapult")
    ap.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    ap.add_argument("--shots", type=Path, help="a folder for a screenshot of each trace")
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright

    if a.shots:
        a.shots.mkdir(parents=True, exist_ok=True)
    bad = 0
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=a.chromium, args=["--no-sandbox", "--disable-gpu"])
        for t in a.traces:
            res, errors = check(viewer_page(t, a.catapult, Path(tmp) / t.name.split(".")[0]), browser, a.shots)
            problems = [*map(str, res.get("warnings") or []), *errors] + ([str(res["error"])] if "error" in res
                                                                          else [])
            bad += bool(problems)
            held = json.dumps({k: v for k, v in res.items() if k != "warnings"})
            print(f"{t}: {'FAIL' if problems else 'ok'} {held}")
            for msg in problems:
                print(f"  {msg}")
        browser.close()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
