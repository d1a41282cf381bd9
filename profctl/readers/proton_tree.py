"""Proton's tree (hatchet) format from its instrumentation backend: ``proton.start(name,
backend="instrumentation")`` without ``data="trace"`` writes ``name.hatchet``, plain or compressed, any origin.

The file is a JSON list: the root node (``{"frame": {"name": "ROOT"}, "metrics": {}, "children": [...]}``), then
the devices (``{"CUDA": {"0": {"arch", "clock_rate" (kHz), "num_sms", ...}}}``). Under the root a node per
kernel, under it a node per scope (nested scopes nest), each with ``metrics``: ``cycles`` (summed over every warp
and CTA) and ``normalized_cycles`` (per recorded unit; checked on an H200 with Triton 3.6: cycles / (warps x
CTAs)). The tree holds no count of instances and no timeline: profctl reads totals from it, and says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profctl.errors import BadReport
from profctl.readers._compressed import DAMAGED, open_bytes

MAX_BYTES = 256 << 20


def looks_like(head: str) -> bool:
    """Whether a JSON file's first characters are those of Proton's tree."""
    h = head.lstrip()
    return h.startswith("[") and '"frame"' in h and '"children"' in h and '"metrics"' in h


@dataclass
class TreeScope:
    kernel: str
    path: tuple[str, ...]  # scope names from the kernel down
    cycles: int
    normalized_cycles: float | None


@dataclass
class ProtonTree:
    path: str
    scopes: list[TreeScope]
    clock_mhz: float | None = None  # the device's clock as Proton recorded it
    devices: dict[str, Any] = field(default_factory=dict)


def read(path: str | Path) -> ProtonTree:
    """The scopes of every kernel; BadReport for what is not Proton's tree or has no cycles in it."""
    p = Path(path)
    try:
        with open_bytes(p) as f:
            raw = f.read(MAX_BYTES + 1)
    except DAMAGED as e:
        raise BadReport(f"{p}: truncated or damaged compressed file ({e})") from None
    if len(raw) > MAX_BYTES:
        raise BadReport(f"{p}: a Proton tree over {MAX_BYTES >> 20} MiB; not read")
    if not raw.strip():
        raise BadReport(f"{p}: empty Proton tree: Proton writes nothing when no launched kernel had a scope")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise BadReport(f"{p}: not a text (UTF-8) JSON file") from None
    except json.JSONDecodeError as e:
        cut = e.pos >= len(raw.rstrip()) - 2
        raise BadReport(f"{p}: {'truncated' if cut else 'damaged'} Proton tree: {e.msg} at character {e.pos}"
                        ) from None
    except RecursionError:
        raise BadReport(f"{p}: JSON nested too deeply to be a Proton tree") from None
    if not (isinstance(doc, list) and doc and isinstance(doc[0], dict) and "children" in doc[0]):
        raise BadReport(f"{p}: JSON, but not a Proton tree (a list whose first element is the root frame)")
    tree = ProtonTree(path=str(p), scopes=[], devices=doc[1] if len(doc) > 1 and isinstance(doc[1], dict) else {})
    for kern in _children(doc[0]):
        name = str((kern.get("frame") or {}).get("name"))
        _walk(kern, name, (), tree.scopes)
    if not tree.scopes:
        raise BadReport(f"{p}: no scope with cycles in this Proton tree (a profile of another backend, or kernels "
                        "without pl.scope)")
    tree.clock_mhz = _clock(tree.devices)
    return tree


def _children(node: dict[str, Any]) -> list[dict[str, Any]]:
    kids = node.get("children")
    return [k for k in kids if isinstance(k, dict)] if isinstance(kids, list) else []


def _walk(node: dict[str, Any], kernel: str, path: tuple[str, ...], out: list[TreeScope]) -> None:
    for child in _children(node):
        name = str((child.get("frame") or {}).get("name"))
        got = child.get("metrics")
        m: dict[str, Any] = got if isinstance(got, dict) else {}
        cyc = m.get("cycles")
        if isinstance(cyc, (int, float)) and not isinstance(cyc, bool):
            norm = m.get("normalized_cycles")
            out.append(TreeScope(kernel, (*path, name), int(cyc),
                                 float(norm) if isinstance(norm, (int, float)) else None))
        _walk(child, kernel, (*path, name), out)


def _clock(devices: dict[str, Any]) -> float | None:
    """The first device's clock in MHz (Proton writes ``clock_rate`` in kHz)."""
    for per_type in devices.values():
        if isinstance(per_type, dict):
            for dev in per_type.values():
                rate = dev.get("clock_rate") if isinstance(dev, dict) else None
                if isinstance(rate, (int, float)) and rate > 0:
                    return float(rate) / 1000.0
    return None
