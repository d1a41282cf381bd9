"""Run directories: every profiling or bench command writes ``reports/<run-id>/`` with a manifest, the tools'
raw outputs and logs, and the summaries. The id sorts by time and never collides between concurrent runs."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import secrets
import sys
from pathlib import Path
from typing import Any

from profctl.fsutil import atomic_write_json

MANIFEST = "manifest.json"


def reports_root(root: Path | str | None = None) -> Path:
    """`root`, else $PROFCTL_REPORTS, else ./reports."""
    return Path(root or os.environ.get("PROFCTL_REPORTS") or "reports")


def new_run(kind: str, *, root: Path | str | None = None, argv: list[str] | None = None,
            extra: dict[str, Any] | None = None) -> Path:
    """Create a fresh run directory and its manifest (status 'running')."""
    base = reports_root(root)
    base.mkdir(parents=True, exist_ok=True)
    now = _dt.datetime.now(_dt.timezone.utc)
    for _ in range(100):
        run_id = f"{now:%Y%m%dT%H%M%SZ}-{kind}-{secrets.token_hex(3)}"
        path = base / run_id
        try:
            path.mkdir()  # atomic: two runs never get the same directory
            break
        except FileExistsError:
            continue
    else:  # pragma: no cover
        raise RuntimeError("could not create a unique run directory")
    manifest = {
        "run_id": run_id, "kind": kind, "status": "running",
        "command": argv if argv is not None else sys.argv,
        "started": now.isoformat(), "host": platform.node(), "python": platform.python_version(),
        **(extra or {}),
    }
    atomic_write_json(path / MANIFEST, manifest)
    return path


def update_manifest(run_dir: Path, **fields: Any) -> dict[str, Any]:
    import json

    p = run_dir / MANIFEST
    m = json.loads(p.read_text()) if p.exists() else {}
    m.update(fields)
    atomic_write_json(p, m)
    return m


def finish(run_dir: Path, status: str, **fields: Any) -> dict[str, Any]:
    """Mark a run complete, failed or incomplete (interrupted), with its end time."""
    return update_manifest(run_dir, status=status, ended=_dt.datetime.now(_dt.timezone.utc).isoformat(), **fields)
