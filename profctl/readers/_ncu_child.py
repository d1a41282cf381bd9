"""The child process that reads an .ncu-rep with ncu_report for the loader, profctl.readers._ncu_load (which
see): native code that may abort on a damaged report runs here, not in profctl's own process.

Usage: ``python -m profctl.readers._ncu_child REPORT OUT.json SHOWN_NAME WANT``, WANT being the JSON of the loader's
``{"launches": bool, "profiles": bool, "kernels": [regex, ...] | null}``; writes ``{"launches": [...],
"profiles": [...]}`` or ``{"error": "one line"}`` to OUT.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from profctl.errors import BadReport
from profctl.readers._ncu_load import walk


def main(argv: list[str]) -> int:
    rep, out, shown, want = Path(argv[0]), Path(argv[1]), Path(argv[2]), json.loads(argv[3])
    try:
        import ncu_report as mod

        got = walk(mod, rep, shown, **want)
        doc: dict[str, Any] = {"launches": [x.to_dict() for x in got.launches],
                               "profiles": [p.to_dict() for p in got.profiles]}
        code = 0
    except BadReport as e:
        doc, code = {"error": e.one_line()}, 3
    out.write_text(json.dumps(doc, allow_nan=True))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
