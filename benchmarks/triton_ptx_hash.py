"""Hash the instructions of profctl's Triton forward as compiled offline for sm_90 (no GPU needed: Triton's own
ptxas), to show that a change to workloads/kernels/triton_kernels.py leaves the benchmarked kernel the same code.

    python benchmarks/triton_ptx_hash.py [TREE] [NAME=1 ...]   # TREE: a checkout (default: this one)

Prints one line per (TMA, causal, PIPE) launch variant of the d128 bf16 forward at 128x128 tiles, 8 warps, 3
stages (the default non-causal config, its causal and pipelined variants): a hash of the PTX without its debug
sections and line directives (adding a helper function or a line moves those, not the code), the number of
``%clock`` reads, and the shared memory. ``NAME=1`` sets a constexpr (e.g. ``SCOPES=1``: the scoped forward as
profctl proton launches it, without Proton's instrumentation passes, so its scope calls compile to nothing).
Run it in two checkouts and compare (benchmarks/RESULTS.md, issue 30).
"""

from __future__ import annotations

import hashlib
import inspect
import re
import sys
from pathlib import Path


def code_hash(ptx: str) -> str:
    code = ptx.split(".section")[0]
    lines = [ln for ln in code.splitlines() if not re.match(r"\s*\.(loc|file)\b", ln)]
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

    from workloads import triton_kernels as kernels

    if extra.get("SCOPES"):
        kernels.enable_scopes()
    params = list(inspect.signature(kernels._fwd_kernel.fn).parameters)
    for tma, causal, pipe in ((True, False, False), (True, True, False), (True, False, True), (False, False, False)):
        sig: dict[str, str] = {}
        cst: dict[str, object] = {}
        for p in params:
            if p in ("Q", "K", "V", "Out"):
                sig[p] = "*bf16"
            elif p == "LSE":
                sig[p] = "*fp32"
            elif p in ("QD", "KD", "VD"):
                sig[p] = "tensordesc<bf16[1,1,128,128]>" if tma else "constexpr"
                if not tma:
                    cst[p] = None
            elif p == "qk_scale":
                sig[p] = "fp32"
            elif p.isupper():
                sig[p] = "constexpr"
            else:
                sig[p] = "i32"
        cst.update(HEAD_DIM=128, BLOCK_D=128, BLOCK_M=128, BLOCK_N=128, CAUSAL=causal, REVERSE=causal,
                   SCALE_POS=True, DOT_PREC="tf32", TMA=tma, PIPE=pipe, **extra)
        c = triton.compile(ASTSource(fn=kernels._fwd_kernel, signature=sig, constexprs=cst),
                           target=GPUTarget("cuda", 90, 32), options={"num_warps": 8, "num_stages": 3})
        print(f"tma={tma:d} causal={causal:d} pipe={pipe:d} code={code_hash(c.asm['ptx'])} "
              f"clock_reads={c.asm['ptx'].count('%clock')} shared={c.metadata.shared}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
