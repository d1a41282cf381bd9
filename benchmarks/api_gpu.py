"""The Python API's GPU paths on the GPU machine (issue 51): the notebook's GPU cell (docs/notebooks/explain.ipynb, its
last code cell, run as a script with `display` printing the Markdown form), `profctl.ab` of two SDPA backends and
`profctl.proton` of profctl's Triton forward; each result's `.to_dict()` set against what the command's JSON holds.

    python benchmarks/api_gpu.py REPORTS_DIR     (bash benchmarks/gpu.sh api-gpu)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def display(x: Any) -> None:
    text = x._repr_markdown_() if hasattr(x, "_repr_markdown_") else repr(x)
    print(text[:1500])


def main() -> int:
    import profctl

    reports = sys.argv[1] if len(sys.argv) > 1 else "/tmp/api-gpu-reports"
    nb = json.loads((ROOT / "docs" / "notebooks" / "explain.ipynb").read_text())
    cell = "".join([c for c in nb["cells"] if c["cell_type"] == "code"][-1]["source"])
    t0 = time.time()
    exec(compile(cell, "explain.ipynb:gpu-cell", "exec"), {"profctl": profctl, "REPORTS": reports, "display": display})
    print(f"== notebook GPU cell: {time.time() - t0:.1f} s")
    t0 = time.time()
    ab = profctl.ab("sdpa-flash", "sdpa-cudnn", seqlen=[2048], heads=[16], head_dim=[128], rounds=5, reports=reports)
    d = ab.to_dict()
    print(f"== profctl.ab: {time.time() - t0:.1f} s; answers: {ab.answers}; keys: {sorted(d)[:12]}")
    t0 = time.time()
    pr = profctl.proton(backend=["triton"], seqlen=[1024], heads=[4], head_dim=[64], reports=reports)
    d2 = pr.to_dict()
    print(f"== profctl.proton: {time.time() - t0:.1f} s; {type(d2).__name__} of {len(d2)}; "
          f"{str(pr.to_dataframe().head(3))[:600]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
