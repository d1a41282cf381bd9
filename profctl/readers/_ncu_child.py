"""The child process that reads an .ncu-rep with ncu_report for profctl.readers.ncu_report (which see): native
code that may abort on a damaged report runs here, not in profctl's own process.

Usage: ``python -m profctl.readers._ncu_child REPORT OUT.json SHOWN_NAME [launches|profiles]``; writes
``{"launches": [...]}`` (or ``{"profiles": [...]}``, profctl.readers.ncu_source) or ``{"error": "one line"}`` to
OUT.json.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from profctl.errors import BadReport
from profctl.readers._ncu import Launch


def launch_to_dict(ln: Launch) -> dict[str, Any]:
    return dataclasses.asdict(ln)


def launch_from_dict(d: dict[str, Any]) -> Launch:
    """A Launch from its JSON (tuples were lists)."""
    x = dict(d)
    for k in ("grid", "block"):
        if x.get(k) is not None:
            x[k] = tuple(x[k])
    x["nvtx"] = tuple(x.get("nvtx") or ())
    return Launch(**x)


def main(argv: list[str]) -> int:
    rep, out, shown = Path(argv[0]), Path(argv[1]), Path(argv[2])
    mode = argv[3] if len(argv) > 3 else "launches"
    from profctl.readers.ncu_report import _read_with_module
    from profctl.readers.ncu_source import profiles_with_module

    try:
        import ncu_report as mod

        if mode == "profiles":
            doc: dict[str, Any] = {"profiles": [p.to_dict() for p in profiles_with_module(mod, rep, shown)]}
        else:
            doc = {"launches": [launch_to_dict(x) for x in _read_with_module(mod, rep, shown)]}
        code = 0
    except BadReport as e:
        doc, code = {"error": e.one_line()}, 3
    out.write_text(json.dumps(doc, allow_nan=True))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
