"""Time profctl's Triton forward under several launch configs (triton.testing.do_bench medians) at one shape, with
each config's output checked against SDPA's flash backend: the candidates for the change `profctl explain`
points to (benchmarks/RESULTS.md, "profctl's Triton forward"). Prints one JSON object.

    python3 benchmarks/triton_fwd_configs.py [--seqlen 4096] [--causal] [--head-dim 128]
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F
from triton.testing import do_bench

from profctl.workloads.kernels import triton_attention as ta

CANDIDATES = ("m128n128w8s3", "m128n128w8s3-pipe", "m128n128w8s2-pipe", "m128n64w8s3-pipe", "m128n64w8s4-pipe",
              "m128n64w8s3", "m64n128w4s3-pipe", "m64n64w4s3-pipe", "m128n128w8s3-ptr-pipe", "m128n128w8s2",
              "m64n64w4s3")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--configs", default=",".join(CANDIDATES))
    a = ap.parse_args()
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(1, a.heads, a.seqlen, a.head_dim, device="cuda", dtype=torch.bfloat16, generator=g)
               for _ in range(3))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=a.causal)
    flops = 4 * a.heads * a.seqlen * a.seqlen * a.head_dim * (0.5 if a.causal else 1.0)
    out: dict = {"shape": f"b1 h{a.heads} s{a.seqlen} d{a.head_dim} {'causal' if a.causal else 'full'}",
                 "gpu": torch.cuda.get_device_name(), "configs": {}}
    for name in a.configs.split(","):
        cfg = ta.parse_configs(f"fwd={name}")["fwd"]
        try:
            with ta.use_configs(fwd=cfg):
                o = ta.attention(q, k, v, is_causal=a.causal)
                err = float((o.float() - ref.float()).abs().max())
                ms = do_bench(lambda: ta.attention(q, k, v, is_causal=a.causal), warmup=25, rep=200,
                              return_mode="median")
            out["configs"][name] = {"ms": ms, "tflops": flops / (ms * 1e-3) / 1e12, "max_abs_err": err}
        except Exception as e:  # a config over the shared-memory or register budget
            out["configs"][name] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
