"""Read ``profctl bench`` rows: a run's ``bench.json`` or ``profctl bench --json`` output (gzipped or not), the
one reader every command uses for them (report, compare, show, the Python API)."""

from __future__ import annotations

import json
from pathlib import Path

from profctl.errors import BadReport
from profctl.readers._compressed import DAMAGED, open_bytes
from profctl.schema.bench import BenchRow


def looks_like(path: Path) -> bool:
    """A JSON list of rows with a backend and a status (a cheap look at the first 4 KiB)."""
    try:
        with open_bytes(path) as f:
            head = f.read(4096)
    except (*DAMAGED, BadReport):
        return False
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff").lstrip()
    return text.startswith("[") and '"backend"' in text and ('"status"' in text or '"median_ms"' in text)


def read(path: str | Path, *, strict: bool = True) -> list[BenchRow]:
    """The rows of a bench JSON file (profctl.schema.bench.BenchRow, every field kept); BadReport with one line for
    anything else. `strict` also requires the case fields a table needs
    (profctl.schema.bench.ATTENTION_REQUIRED, MODEL_REQUIRED) in every row."""
    p = Path(path)
    try:
        with open_bytes(p) as f:
            raw = f.read()
        rows = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise BadReport(f"{p}: JSON nested too deeply to be bench rows") from None
    except (*DAMAGED, ValueError, UnicodeDecodeError) as e:
        raise BadReport(f"{p}: not a readable bench JSON file: {str(e)[:200]}") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "backend" in r for r in rows):
        raise BadReport(f"{p}: a bench JSON file is a list of rows (profctl bench --json)")
    out = [BenchRow.from_dict(r) for r in rows]
    if strict:
        for i, r in enumerate(out):
            miss = r.missing()
            if miss:
                raise BadReport(f"{p}: row {i} lacks {', '.join(miss)}: not a profctl bench --json file")
    return out
