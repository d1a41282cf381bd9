"""Where FlexAttention's generated kernel carries the user's ``mask_mod`` and ``score_mod`` (issue 41, item 4).

Inductor compiles ``flex_attention`` into a Triton template (``triton_tem_fused_flex_attention_*``) and inlines the
user's functions as straight-line code on generated temporaries: the ``score_mod`` as ``tmp0 = (qk)`` ... ending in
``post_mod_scores = tmpN``, the ``mask_mod`` as ``tmp1 = (m)`` ... ending in ``mask_mod_output = tmpM`` (Triton 3.6,
torch 2.11: tests/data/flex/flex_generated_kernel.py.txt, lines 362-374). The user's Python lines are not carried,
so profctl names the generated lines by what they came from: a hot line there is the user's mask or score function.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_TMP = re.compile(r"^\s*tmp\d+\s*=\s*")
_END = {"score_mod": re.compile(r"^\s*post_mod_scores\s*=\s*tmp\d+\s*$"),
        "mask_mod": re.compile(r"^\s*mask_mod_output\s*=\s*tmp\d+\s*$")}


def mod_lines(text: Mapping[int, str]) -> dict[int, str]:
    """Line -> ``mask_mod`` / ``score_mod`` for the lines of a generated flex kernel that compute the user's
    functions (a run of ``tmpN = ...`` lines and the line that hands the result on); {} for any other source."""
    out: dict[int, str] = {}
    run: list[int] = []
    prev = None
    for n in sorted(text):
        line = text[n]
        if prev is not None and n != prev + 1:
            run = []  # a gap in the text kept: the run is not known whole
        prev = n
        role = next((k for k, rx in _END.items() if rx.match(line)), None)
        if role is not None:
            for m in [*run, n]:
                out[m] = role
            run = []
        elif _TMP.match(line):
            run.append(n)
        elif line.strip() and not line.strip().startswith("#"):
            run = []
    return out


def is_flex_kernel(name: str) -> bool:
    """Inductor's flex templates (forward and backward)."""
    return "flex_attention" in name and name.startswith("triton_tem_")


__all__ = ["is_flex_kernel", "mod_lines"]
