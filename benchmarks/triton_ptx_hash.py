"""Hash the instructions of profctl's Triton forward as compiled offline for sm_90 (no GPU needed: Triton's own
ptxas), to show that a change to workloads/kernels/triton_kernels.py leaves the benchmarked kernel the same code.

    python benchmarks/triton_ptx_hash.py [TREE] [NAME=1 ...]   # TREE: a checkout (default: this one)

Prints one line per (TMA, causal, PIPE) launch variant of the d128 bf16 forward at 128x128 tiles, 8 warps, 3
stages (the default non-causal config, its causal and pipelined variants), then of the e4m3 forward (with those
of the NAME=1|0 settings it has): a hash of the PTX without its debug sections, line directives and debug-scope
labels (adding a helper function or a line moves those, not the code), the number of ``%clock`` reads, and the
shared memory. ``NAME=1`` (or ``=0``) sets a constexpr (e.g. ``SCOPES=1``: the scoped forward as profctl proton
launches it, without Proton's instrumentation passes, so its scope calls compile to nothing; ``SCALE_POS=0``: a
negative softmax scale). Run it in two checkouts and compare (benchmarks/RESULTS.md, issue 30).
"""

from __future__ import annotations

import hashlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any


def code_hash(ptx: str) -> str:
    """The PTX's code: without its debug sections, line directives and the ``$L__tmpN:`` labels that mark
    inlined-scope boundaries for the debug info (only the debug sections refer to them; a function more or less
    inlined renumbers them)."""
    code = ptx.split(".section")[0]
    lines = [ln for ln in code.splitlines()
             if not re.match(r"\s*\.(loc|file)\b", ln) and not re.match(r"\$L__tmp\d+:$", ln.strip())]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def main() -> int:
    tree = Path(sys.argv[1]) if len(sys.argv) > 1 and "=" not in sys.argv[1] else Path(__file__).parents[1]
    extra = {k: v == "1" for k, v in (a.split("=", 1) for a in sys.argv[1:] if "=" in a)}
    sys.path.insert(0, str(tree))
    import os
    import tempfile

    # a cache of its own: Triton's disk cache did not tell these offline compiles apart by a constexpr given
    # by name (a LAZY=1 compile came back for SCOPES=1)
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="ptx-hash-")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from workloads.kernels import triton_fp8_kernels as fp8_kernels
    from workloads.kernels import triton_kernels as kernels

    if extra.get("SCOPES"):
        kernels.enable_scopes()
    # (kernel, label, its pointers' element types, its fp32 scalar, its descriptors' element type, launch variants)
    Kind = tuple[Any, str, dict[str, str], str, str, tuple[tuple[int, int, int], ...], dict[str, Any]]
    kinds: tuple[Kind, ...] = (
        (kernels._fwd_kernel, "", {"Q": "bf16", "K": "bf16", "V": "bf16", "Out": "bf16", "LSE": "fp32"},
         "qk_scale", "bf16", ((1, 0, 0), (1, 1, 0), (1, 0, 1), (0, 0, 0)), {"DOT_PREC": "tf32"}),
        (fp8_kernels._fwd_fp8_kernel, "fp8 ", {"Q": "fp8e4nv", "K": "fp8e4nv", "V": "fp8e4nv", "Out": "bf16",
                                           "QS": "fp32", "KS": "fp32", "VS": "fp32"},
         "sm_scale_log2", "fp8e4nv", ((1, 0, 0), (1, 1, 0), (1, 0, 1), (0, 1, 1)), {}))
    for fn, label, pointers, scalar, desc, variants, more in kinds:
        params = list(inspect.signature(fn.fn).parameters)
        defaults = {n: q.default for n, q in inspect.signature(fn.fn).parameters.items()
                    if q.default is not inspect.Parameter.empty}
        for tma, causal, pipe in variants:
            sig: dict[str, str] = {}
            cst: dict[str, object] = dict(defaults)  # the constexprs a launch leaves at their defaults
            for p in params:
                if p in pointers:
                    sig[p] = "*" + pointers[p]
                elif p in ("QD", "KD", "VD"):  # the fp8 kernel's VD is over V^T: [1, 1, dim, keys]
                    sig[p] = f"tensordesc<{desc}[1,1,128,128]>" if tma else "constexpr"
                    if not tma:
                        cst[p] = None
                elif p == scalar:
                    sig[p] = "fp32"
                else:
                    sig[p] = "constexpr" if p.isupper() else "i32"
            cst.update(HEAD_DIM=128, BLOCK_D=128, BLOCK_M=128, BLOCK_N=128, CAUSAL=bool(causal),
                       REVERSE=bool(causal), SCALE_POS=True, TMA=bool(tma), PIPE=bool(pipe), **more)
            cst.update({k: v for k, v in extra.items() if k in params})  # the settings the kernel has
            c = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=cst),
                               target=GPUTarget("cuda", 90, 32), options={"num_warps": 8, "num_stages": 3})
            print(f"{label}tma={tma:d} causal={causal:d} pipe={pipe:d} code={code_hash(c.asm['ptx'])} "
                  f"clock_reads={c.asm['ptx'].count('%clock')} shared={c.metadata.shared}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
