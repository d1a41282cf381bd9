"""One scripted agent session through `profctl mcp` (issue 42), on a GPU machine: a slow Triton attention kernel, ncu
with the explain recipe, explain (causes first), the fix, the A/B verdict, the roof figure, and the stopping rule.

    python benchmarks/mcp_session.py --out DIR

The planted kernel (written to DIR/kernels/) is a FlashAttention-style forward whose two matmuls upcast bf16 to fp32
and run in IEEE fp32 (`input_precision="ieee"`): no tensor cores, the FMA pipe does the work (the planted line is
marked PLANT). The fix keeps the operands bf16, so `tl.dot` runs on the tensor cores. The session drives the server
through the MCP SDK's own client over stdio, as an agent would, and writes every answer to DIR/session.json and the
summaries to DIR/session.md; the server's run store is DIR/reports (each call a run of kind mcp-<tool>).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _attn_fwd(Q, K, V, O, scale, S, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, FAST: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_d = tl.arange(0, D)
    base = bh * S * D
    q = tl.load(Q + base + offs_m[:, None] * D + offs_d[None, :], mask=offs_m[:, None] < S, other=0.0)
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    for start in range(0, S, BN):
        kv = start + offs_n
        k = tl.load(K + base + kv[:, None] * D + offs_d[None, :], mask=kv[:, None] < S, other=0.0)
        v = tl.load(V + base + kv[:, None] * D + offs_d[None, :], mask=kv[:, None] < S, other=0.0)
        if FAST:
            s = tl.dot(q, tl.trans(k))
        else:
            s = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)), input_precision="ieee")  # PLANT: no tensor cores
        s = tl.where(kv[None, :] < S, s * scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        if FAST:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        else:
            acc = acc * alpha[:, None] + tl.dot(p, v.to(tl.float32), input_precision="ieee")
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(O + base + offs_m[:, None] * D + offs_d[None, :], out.to(O.dtype.element_ty), mask=offs_m[:, None] < S)


def attention(q, k, v, is_causal=False, scale=None, enable_gqa=False):
    """SDPA's calling convention, non-causal, heads equal (what the session measures)."""
    if is_causal or q.shape != k.shape:
        raise ValueError("this kernel is non-causal, self-attention shaped")
    b, h, s, d = q.shape
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty_like(q)
    scale = scale if scale is not None else d ** -0.5
    _attn_fwd[(triton.cdiv(s, 64), b * h)](q, k, v, o, scale, s, D=d, BM=64, BN=64, FAST=FAST_PATH,
                                            num_warps=4, num_stages=2)
    return o
'''
SHAPE = {"seqlen": [4096], "heads": [32], "head_dim": [128], "dtype": ["bf16"], "batch": [1], "device": "cuda"}
SHAPE_KEY = "b1,s4096,h32,d128,bf16"


def write_kernels(out: Path) -> tuple[str, str]:
    """The slow kernel and its fix, as two files whose `attention` a backend names (path/file.py:attention)."""
    d = out / "kernels"
    d.mkdir(parents=True, exist_ok=True)
    (d / "slow_attn.py").write_text(KERNEL.replace("FAST=FAST_PATH", "FAST=False"), encoding="utf-8")
    (d / "fixed_attn.py").write_text(KERNEL.replace("FAST=FAST_PATH", "FAST=True"), encoding="utf-8")
    return f"{d / 'slow_attn.py'}:attention", f"{d / 'fixed_attn.py'}:attention"


async def steps(session: Any, slow: str, fixed: str, log: list[dict[str, Any]]) -> None:
    """The agent's loop, once round: profile, explain, fix, A/B, the roof, explain the fix, stop."""
    async def call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
        res = await session.call_tool(tool, args)
        a = dict(res.structured_content or {})
        log.append({"tool": tool, "arguments": args, "answer": a})
        print(f"## {tool}\n{a.get('summary')}\n", flush=True)
        if res.is_error:
            raise SystemExit(f"{tool} failed: {a.get('error')}")
        return a

    ncu = await call("ncu", {"recipe": "explain", "workload": {"backends": [slow], **SHAPE, "iters": 1},
                             "clock_control": "none"})
    await call("explain", {"report": ncu["run"], "kernel": "_attn_fwd", "shape": SHAPE_KEY})
    await call("ab", {"a": slow, "b": fixed, "workload": SHAPE, "rounds": 20})
    await call("bench", {"workload": {"backends": [slow, fixed, "sdpa-flash"], **SHAPE}, "baseline": "none"})
    ncu2 = await call("ncu", {"recipe": "explain", "workload": {"backends": [fixed], **SHAPE, "iters": 1},
                              "clock_control": "none"})
    await call("explain", {"report": ncu2["run"], "kernel": "_attn_fwd", "shape": SHAPE_KEY})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="folder for the kernels, the run store and the answers")
    p.add_argument("--timeout", type=float, default=600.0, help="the server's time limit per call, seconds")
    args = p.parse_args(argv)
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    out = args.out.resolve()
    slow, fixed = write_kernels(out)
    params = StdioServerParameters(command=sys.executable, args=["-m", "profctl", "mcp", "--reports",
                                                                  str(out / "reports"), "--timeout",
                                                                  f"{args.timeout:g}", "--page-rows", "0"],
                                    env=dict(os.environ))  # the SDK's default passes no PYTHONPATH
    log: list[dict[str, Any]] = []

    async def go() -> None:
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            await steps(s, slow, fixed, log)

    try:
        anyio.run(go)
    finally:
        (out / "session.json").write_text(json.dumps(log, indent=1, default=str), encoding="utf-8")
        (out / "session.md").write_text("".join(f"## {e['tool']}\n\n{e['answer'].get('summary')}\n\n" for e in log),
                                        encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
