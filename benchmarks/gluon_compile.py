"""Compile profctl's Gluon forward (workloads/kernels/gluon_attention.py) offline for sm_90, without a GPU: that it
compiles, its registers, spills and shared memory per launch variant (Triton's own ptxas). Run it with the Triton the
GPU machine has (3.6), e.g. from a venv with `pip install triton==3.6.0` put first on the path:

    PYTHONPATH=/tmp/t36/lib/python3.11/site-packages python benchmarks/gluon_compile.py
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


#: (head dim, BLOCK_M, BLOCK_N, warps, stages): the launch variants compiled
TILES = ((128, 128, 128, 8, 3), (128, 64, 64, 4, 3), (128, 128, 64, 8, 3), (64, 128, 128, 8, 4), (64, 64, 64, 4, 4))


def main() -> int:
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="gluon-compile-"))
    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.runtime.jit import mangle_type

    from workloads.kernels import gluon_attention as ga
    from workloads.kernels import gluon_ws_persistent as gp

    if ga.IMPORT_ERROR:
        print("no Gluon:", ga.IMPORT_ERROR)
        return 1
    print("triton", triton.__version__)
    fn = ga._gl_fwd_kernel
    for d, bm, bn, warps, stages in TILES:
        for causal in (False, True):
            def desc(rows: int, d: int = d) -> str:
                x = torch.empty(4 * 128, d, dtype=torch.bfloat16)
                return mangle_type(ga.tma_desc(x, [rows, d], ga.gl.bfloat16))
            sig = {"q_desc": desc(bm), "k_desc": desc(bn), "v_desc": desc(bn), "o_desc": desc(bm), "LSE": "*fp32",
                   "seqlen_q": "i32", "seqlen_kv": "i32", "heads": "i32", "group": "i32", "diag_off": "i32",
                   "qk_scale": "fp32", "HEAD_DIM": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr",
                   "STAGES": "constexpr", "CAUSAL": "constexpr", "num_warps": "constexpr"}
            cst = {"HEAD_DIM": d, "BLOCK_M": bm, "BLOCK_N": bn, "STAGES": stages, "CAUSAL": causal,
                   "num_warps": warps}
            src = GluonASTSource(fn=fn, signature=sig, constexprs=cst)
            c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
            regs, spills = _ptxas_stats(c.asm["ptx"])
            print(f"d{d} m{bm}n{bn}w{warps}s{stages} causal={int(causal)} shared={c.metadata.shared} "
                  f"registers={regs} spill_bytes={spills} "
                  f"wgmma={c.asm['ptx'].count('wgmma.mma_async')} waits={c.asm['ptx'].count('wgmma.wait_group')}")
    for d, bn, stages in WS_TILES:
        for causal in (False, True):
            def desc2(rows: int, d: int = d) -> str:
                x = torch.empty(4 * 128, d, dtype=torch.bfloat16)
                return mangle_type(ga.tma_desc(x, [rows, d], ga.gl.bfloat16))
            sig = {"q_desc": desc2(64), "k_desc": desc2(bn), "v_desc": desc2(bn), "o_desc": desc2(64),
                   "LSE": "*fp32", "seqlen_q": "i32", "seqlen_kv": "i32", "heads": "i32", "group": "i32",
                   "diag_off": "i32", "qk_scale": "fp32", "HEAD_DIM": "constexpr", "BLOCK_N": "constexpr",
                   "STAGES": "constexpr", "CAUSAL": "constexpr", "CONSUMER_REGS": "constexpr",
                   "PRODUCER_REGS": "constexpr"}
            cst = {"HEAD_DIM": d, "BLOCK_N": bn, "STAGES": stages, "CAUSAL": causal,
                   "CONSUMER_REGS": ga.WS_REGS[0], "PRODUCER_REGS": ga.WS_REGS[1]}
            for persistent in (False, True):  # the persistent kernel (gluon_ws_persistent) takes the heads' count
                sig_p = {**sig, "n_bh": "i32"}
                fn = gp._gl_wsp_fwd_kernel if persistent else ga._gl_ws_fwd_kernel
                src = GluonASTSource(fn=fn, signature=_ordered(fn, sig_p if persistent else sig), constexprs=cst)
                c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
                regs, spills = _ptxas_stats(c.asm["ptx"])
                print(f"ws{'p' if persistent else ''} d{d} n{bn}s{stages} causal={int(causal)} "
                      f"shared={c.metadata.shared} registers={regs} spill_bytes={spills} "
                      f"setmaxnreg={c.asm['ptx'].count('setmaxnreg')}")
    _compile_fp8(triton, GPUTarget, GluonASTSource, mangle_type)
    return 0


def _compile_fp8(triton: Any, GPUTarget: Any, GluonASTSource: Any, mangle_type: Any) -> None:
    """The FP8 forwards (workloads/kernels/gluon_fp8_attention.py): warp-specialized and one warpgroup a block (and
    its variant with the next Q·Kᵀ issued ahead of the softmax), with
    K's keys permuted (its 5-D descriptor) and in their plain order; the SASS's byte and lane moves (PRMT, SEL,
    SHFL: what explain's register-shuffle counts) beside the MUFU count."""
    import torch

    from workloads.kernels import gluon_attention as ga
    from workloads.kernels import gluon_fp8_attention as g8

    f8, bf = ga.gl.float8e4nv, ga.gl.bfloat16
    e4m3 = torch.float8_e4m3fn

    def desc(block: list[int], dtype: Any, tdtype: Any) -> str:
        x = torch.empty(4 * 128, 4 * 128, dtype=tdtype)
        return mangle_type(ga.tma_desc(x, block, dtype))

    def kdesc(d: int, bn: int, perm: bool) -> str:
        return mangle_type(g8.k_desc(torch.empty(1, 1, 512, d, dtype=e4m3), bn, perm))

    common = {"QS": "*fp32", "KS": "*fp32", "VS": "*fp32", "seqlen_q": "i32", "seqlen_kv": "i32", "heads": "i32",
              "group": "i32", "diag_off": "i32", "sm_scale_log2": "fp32", "HEAD_DIM": "constexpr",
              "BLOCK_N": "constexpr", "STAGES": "constexpr", "CAUSAL": "constexpr", "PERM": "constexpr"}
    for ws, d, keys, stages, ahead in ((True, 128, 128, 4, False), (True, 128, 128, 3, False),
                                       (True, 64, 128, 4, False), (True, 128, 192, 3, False),
                                       (False, 128, 128, 3, False), (False, 64, 128, 3, False),
                                       (False, 128, 128, 3, True), (False, 64, 128, 3, True)):
        bn, bn2 = g8.SPLIT.get(keys, (keys, 0))  # a block of two tiles (warp-specialized only)
        for causal, perm in ((False, True), (True, True), (False, False)):
            if bn2 and not perm:
                continue
            sig = {"q_desc": desc([64, d], f8, e4m3), "k_desc": kdesc(d, bn, perm),
                   "vt_desc": desc([d, bn], f8, e4m3), **common}
            cst = {"HEAD_DIM": d, "BLOCK_N": bn, "STAGES": stages, "CAUSAL": causal, "PERM": perm}
            if ws:
                sig.update({"k2_desc": kdesc(d, bn2 or bn, perm), "vt2_desc": desc([d, bn2 or bn], f8, e4m3),
                            "o_desc": desc([64, d], bf, torch.bfloat16), "CONSUMER_REGS": "constexpr",
                            "PRODUCER_REGS": "constexpr", "BLOCK_N2": "constexpr"})
                cst.update({"CONSUMER_REGS": ga.WS_REGS[0], "PRODUCER_REGS": ga.WS_REGS[1], "BLOCK_N2": bn2})
                fn = g8._gl_ws_fp8_kernel
            else:
                sig["Out"] = "*bf16"
                fn = g8._gl_fp8_ahead_kernel if ahead else g8._gl_fp8_fwd_kernel
            c = triton.compile(GluonASTSource(fn=fn, signature=sig, constexprs=cst),
                               target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
            regs, spills = _ptxas_stats(c.asm["ptx"])
            ops = _sass_ops(c.asm["cubin"], ("PRMT", "SEL", "SHFL", "MUFU"))
            kind = "ws " if ws else "ahead " if ahead else ""
            print(f"{kind}fp8 d{d} n{keys}s{stages} causal={int(causal)} perm={int(perm)} "
                  f"shared={c.metadata.shared} registers={regs} spill_bytes={spills} "
                  + " ".join(f"{k}={v}" for k, v in ops.items()))


def _ordered(fn: Any, sig: dict[str, str]) -> dict[str, str]:
    """The signature in the order of the kernel's parameters (then the launch options)."""
    names = list(fn.arg_names)
    return {**{n: sig[n] for n in names if n in sig}, **{k: v for k, v in sig.items() if k not in names}}


def _sass_ops(cubin: bytes, names: tuple[str, ...]) -> dict[str, int]:
    """How many of the SASS's instructions have each opcode (Triton's nvdisasm on the cubin)."""
    import triton

    nvdisasm = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(cubin)
        sass = subprocess.run([str(nvdisasm), "-c", str(path)], capture_output=True, text=True, timeout=300).stdout
    ops = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", sass)
    return {n: ops.count(n) for n in names}


#: (head dim, BLOCK_N, stages) of the warp-specialized forward
WS_TILES = ((128, 128, 2), (128, 128, 3), (128, 64, 3), (64, 128, 3))


def _ptxas_stats(ptx: str) -> tuple[str, str]:
    """Registers and spill bytes from Triton's ptxas (-v) on the PTX."""
    from triton.backends.nvidia.compiler import get_ptxas

    path = get_ptxas(90).path
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        r = subprocess.run([path, "-v", "--gpu-name=sm_90a", str(src), "-o", str(Path(tmp) / "k.cubin")],
                           capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    regs = re.search(r"Used (\d+) registers", out)
    spill = re.search(r"(\d+) bytes spill stores", out)
    return (regs[1] if regs else "?"), (spill[1] if spill else out[-300:])


if __name__ == "__main__":
    sys.exit(main())
