"""Warpgroup MMAs the compiler made synchronous: read from the SASS of an ncu report (issue 50).

A Hopper kernel issues an accumulation as a chain of wgmma instructions (one per k-slice: ``QGMMA.64x128x32 R24,
gdesc[UR32], R24``) and waits for the chain once (``WARPGROUP.DEPBAR.LE gsb0, N``), so its other work runs while
the tensor cores do. When ptxas cannot prove that no other instruction touches a running wgmma's accumulator
registers, it serializes every wgmma of the function (``ptxas info: (C7514) Potential Performance Loss:
wgmma.mma_async instructions are serialized ...``, shown only with ``-v``): each k-slice is its own group, waited
for to zero before the next is issued; it does the same when the registers run short (C7512). The program's
overlap is gone without a word in its source; the SASS shows it as chains split by full waits. profctl's FP8
forward with the next block's Q·Kᵀ issued ahead of the softmax compiled so, both ways
(tests/data/ladder50/plant_serial.ncu-rep.xz, fp8_ahead_causal.ncu-rep.xz).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_GMMA = re.compile(r"^[A-Z]GMMA\.")
_FULL_WAIT = re.compile(r"^WARPGROUP\.DEPBAR\.LE\s+gsb0\s*,\s*0x0\b")
#: instructions ptxas may schedule between two wgmma of one chain (the full wait it added, an arrive, moves)
_BETWEEN = 12


@dataclass(frozen=True)
class Serial:
    """The kernel's accumulating wgmma links and how many the compiler split with a full wait (executed counts),
    the share of warp samples at those waits, and the source lines (file, line) they are on."""

    links: float
    split: float
    wait_samples: int
    lines: tuple[tuple[str, int], ...]

    @property
    def ratio(self) -> float:
        return self.split / self.links if self.links else 0.0


def _ops(sass: str) -> list[str]:
    toks = sass.replace(",", " ").split()
    return toks[1:] if toks and toks[0].startswith("@") else toks


def _accumulates(ops: list[str]) -> bool:
    """A wgmma whose accumulator input is its own destination (a k-slice after the first of a chain)."""
    rest = [o for o in ops[2:] if not o.startswith(("gdesc", "!"))]
    return len(ops) > 1 and bool(rest) and rest[-1].split(".")[0] == ops[1]


def serialized(p: Any) -> Serial | None:
    """The kernel's wgmma chain links (an accumulating wgmma whose nearest earlier wgmma, a few instructions back,
    writes the same accumulator) and those the compiler split with a full wait between the two; None without SASS
    or without a chain."""
    pcs = sorted(getattr(p, "pcs", ()) or (), key=lambda x: x.offset)
    ops = [_ops(x.sass) for x in pcs]
    links = split = 0.0
    samples = 0
    lines: list[tuple[str, int]] = []
    for i, x in enumerate(pcs):
        if not ops[i] or not _GMMA.match(ops[i][0]) or not _accumulates(ops[i]):
            continue
        back = range(i - 1, max(i - 1 - _BETWEEN, -1), -1)
        k = next((k for k in back if ops[k] and _GMMA.match(ops[k][0])), None)
        if k is None or len(ops[k]) < 2 or ops[k][1] != ops[i][1]:
            continue  # the first slice of a chain (into a running accumulator), or too far to tell
        links += x.executed or 0
        waits = [w for w in range(k + 1, i) if _FULL_WAIT.match(pcs[w].sass)]
        if not waits:
            continue
        split += x.executed or 0
        # ncu books a wait on the instruction after the one that waits: the full wait up to the wgmma
        samples += sum(pcs[w].samples for w in range(waits[0], i))
        where = (pcs[waits[0]].file, pcs[waits[0]].line)
        if where[0] and where[1] and where not in lines:
            lines.append((str(where[0]), int(where[1])))
    if not links:
        return None
    return Serial(links, split, samples, tuple(lines))
