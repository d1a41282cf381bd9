"""What Proton's raw profile buffer holds right after a launch, on the Triton installed here (issue 40): the
numbers profctl's CTA sample reads (workloads/proton_ctas.py) checked against a kernel whose records are known.

    python benchmarks/proton_buffer_probe.py [--out probe.json]

Runs, under Proton's instrumentation backend (global buffer), a kernel with two scopes in a loop of 3 iterations
(4 CTAs of 4 warps: 6 scope instances, 12 records, per warp), then profctl's Triton forward at b1 h2 s512 d64
(8 warps, 4 key blocks per CTA: 2 + 5 x 4 = 22 instances, 44 records, per warp). At each launch's exit it prints
the kernel's ``profile_scratch_size`` and ``num_warps`` (its metadata), the buffer's bytes, the first CTA region's
words 0..31, and what profctl's header reader (proton_ctas.read_headers) and tally make of the buffer.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SEEN: list[dict[str, Any]] = []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()

    import tempfile

    import torch
    import triton
    import triton.language as tl
    import triton.profiler as proton
    import triton.profiler.language as pl
    from triton.profiler.hooks import instrumentation as ih

    from profctl.workloads import proton_ctas, proton_run

    pl.enable_semantic("triton")
    proton_run._add_load_hook()
    orig = ih.InstrumentationHook.exit

    def exit(self: Any, metadata: Any) -> None:
        data = getattr(metadata, "data", None) or {}
        func = data.get("function")
        path = proton_run._metadata_of(self, func)
        got: dict[str, Any] = {"kernel": (proton_run._LOADED.get(func) or {}).get("name"), "metadata": bool(path)}
        buf = getattr(self, "buffer", None)
        if path and buf is not None:
            meta = json.loads(Path(path).read_text())
            scratch, units = int(meta.get("profile_scratch_size") or 0), int(meta.get("num_warps") or 0)
            torch.cuda.synchronize()
            words = buf[:128].view(torch.int32).cpu().tolist()
            got.update(scratch=scratch, num_warps=units, buffer_bytes=buf.numel(),
                       words=[w & 0xFFFFFFFF for w in words[:32]])
            h = proton_ctas.read_headers(buf, scratch, units)
            got.update(layout=h.layout, meta=h.meta, buf_size=h.buf_size, rows=len(h.rows),
                       counts_row0=None if h.counts is None else h.counts[0].tolist())
            t = proton_ctas.tally(buf, h, list(range(units)))
            got.update(tally={k: t[k] for k in ("counts", "overflowed", "records")})
        SEEN.append(got)
        print(json.dumps(got), flush=True)
        return orig(self, metadata)

    ih.InstrumentationHook.exit = exit

    @triton.jit
    def twice(x_ptr, y_ptr, N_ITER: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        for _ in range(N_ITER):
            with pl.scope("double"):
                x = x * 2
            with pl.scope("add"):
                x = x + 1
        tl.store(y_ptr + offs, x)

    from profctl.spec import AttentionSpec
    from profctl.workloads.kernels import triton_attention as ta

    x = torch.ones(4 * 128, device="cuda")
    y = torch.empty_like(x)
    spec = AttentionSpec.from_dict({"backend": "triton", "batch": 1, "heads": 2, "kv_heads": 2, "seqlen_q": 512,
                                    "seqlen_kv": 512, "head_dim": 64, "dtype": "bf16", "causal": False})
    call, _ = proton_run.case_call(json.dumps(spec.to_dict()))
    with tempfile.TemporaryDirectory() as d:
        mode = proton.mode.Default(buffer_type="global")
        proton.start(str(Path(d) / "probe"), data="trace", backend="instrumentation", mode=mode)
        twice[(4,)](x, y, N_ITER=3, BLOCK=128, num_warps=4)
        torch.cuda.synchronize()
        with ta.scoped():
            call()
            torch.cuda.synchronize()
        proton.finalize()
    print("expected: twice 12 records per warp (scopes double, add: 3 each); _fwd_kernel 44 per warp "
          "(load_q, store once; load_k, qk, softmax, load_v, pv 4 times)")
    if a.out:
        a.out.write_text(json.dumps(SEEN, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
