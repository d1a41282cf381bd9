"""The size of every MCP answer on every recorded report in tests/data (issue 48, section 2): `report` of each
report, `explain` of each ncu report's longest kernel alone and against its second (`vs`), and `runs` of the store
the session filled (newest first), driven through the MCP SDK's own client over stdio as an agent would.

    python benchmarks/mcp_answer_sizes.py [--budget 8000] [--out DIR]

For each call: the characters of the text content and of the structured content (compact JSON), and of the whole
CLI JSON it stands for (`full.chars`: the file in the call's run directory). Prints a markdown table and the
largest of each; writes DIR/sizes.json. Exit 1 if any answer is over the budget.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
#: not reports: sources, logs, CSV exports of ncu/nsys, the notes of a recording
SKIP = (".csv", ".csv.gz", ".csv.xz", ".py", ".md", ".txt", ".log", ".sh", ".cu", ".py.txt", ".log.gz")


def reports() -> list[Path]:
    """Every recorded report under tests/data (files, and run directories with a manifest)."""
    notes = ("manifest.json", "summary.json", "timings.json", "times.json", "truth.json", "events.json")

    def report(p: Path) -> bool:
        if p.is_dir():
            return (p / "manifest.json").is_file() and (p / "summary.json").is_file()
        return not p.name.startswith("README") and not p.name.endswith(SKIP) and p.name not in notes

    return [p for p in sorted(DATA.rglob("*")) if report(p)]


async def measure(s: Any, log: list[dict[str, Any]], tool: str, args: dict[str, Any], what: str) -> dict[str, Any]:
    res = await s.call_tool(tool, args)
    a = dict(res.structured_content or {})
    text = "".join(getattr(c, "text", "") for c in res.content)
    row = {"tool": tool, "what": what, "text": len(text),
           "structured": len(json.dumps(a, default=str, separators=(",", ":"))),
           "full": (a.get("full") or {}).get("chars"), "exit": a.get("exit_code"),
           "first_line": (a.get("summary") or "").splitlines()[0][:100] if a.get("summary") else ""}
    log.append(row)
    print(f"{tool:8} {what[:60]:60} text {row['text']:6} structured {row['structured']:6} whole "
          f"{row['full'] or 0:8} exit {row['exit']}", flush=True)
    return a


async def session(s: Any, log: list[dict[str, Any]]) -> None:
    for p in reports():
        rel = str(p.relative_to(DATA))
        rep = await measure(s, log, "report", {"paths": [str(p)]}, rel)
        if ".ncu-rep" not in p.name or not rep.get("ok"):
            continue
        whole = json.loads(Path(rep["full"]["path"]).read_text())
        names = []
        for k in sorted(whole.get("kernels") or [], key=lambda k: -float(k.get("total_ns") or 0)):
            n = str(k.get("short_name") or k.get("name"))
            if n not in names and "…" not in n:
                names.append(n)
        if not names:
            continue
        a = re.escape(names[0])
        await measure(s, log, "explain", {"report": str(p), "kernel": f"^{a}$"}, f"{rel} -k {names[0][:30]}")
        if len(names) > 1:
            await measure(s, log, "explain", {"report": str(p), "kernel": f"^{a}$", "vs": f"^{re.escape(names[1])}$"},
                          f"{rel} -k {names[0][:20]} --vs {names[1][:20]}")
    for page in (1, 2):
        await measure(s, log, "runs", {"page": page}, f"the session's store, page {page} (newest first)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=int, default=8000, help="the server's --budget (characters)")
    p.add_argument("--out", type=Path, default=None, help="folder for the run store and sizes.json [a temp dir]")
    args = p.parse_args(argv)
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    out = (args.out or Path(tempfile.mkdtemp(prefix="mcp-sizes-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    params = StdioServerParameters(command=sys.executable, args=["-m", "profctl", "mcp", "--reports",
                                                                  str(out / "reports"), "--budget", str(args.budget)],
                                   cwd=str(out), env={**os.environ, "PYTHONPATH": str(ROOT)})
    log: list[dict[str, Any]] = []

    async def go() -> None:
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            await session(s, log)

    anyio.run(go)
    (out / "sizes.json").write_text(json.dumps(log, indent=1), encoding="utf-8")
    over = [r for r in log if max(r["text"], r["structured"]) > args.budget]
    print(f"\n{len(log)} answers; budget {args.budget}; over it: {len(over)}; written {out / 'sizes.json'}")
    for tool in sorted({r["tool"] for r in log}):
        rows = [r for r in log if r["tool"] == tool]
        big = max(rows, key=lambda r: r["structured"])
        print(f"{tool}: {len(rows)} answers; text max {max(r['text'] for r in rows)}, median "
              f"{sorted(r['text'] for r in rows)[len(rows) // 2]}; structured max {big['structured']} "
              f"({big['what']}), median {sorted(r['structured'] for r in rows)[len(rows) // 2]}; whole data max "
              f"{max(r['full'] or 0 for r in rows)}")
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
