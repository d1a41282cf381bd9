"""The real headline pair: PyTorch SDPA's FlashAttention-2 forward (`flash_fwd_kernel`, Ampere mma.sync / HMMA)
against cuDNN's SDPA forward (Hopper wgmma fed by TMA), b1 h32 s4096 d128 bf16, non-causal. Plain script.

    python sdpa_pair.py --time OUT.json   median of 60 per-launch CUDA event times after 5 warm-ups, and a check
    python sdpa_pair.py --record          3 warm-ups each, then one call each inside NVTX ranges
                                          measure/sdpa_fa2_cudnn.<a|b> (a: FlashAttention-2, b: cuDNN)
"""

from __future__ import annotations

import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

PAIR = "sdpa_fa2_cudnn"


def flash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        return F.scaled_dot_product_attention(q, k, v)


def cudnn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        return F.scaled_dot_product_attention(q, k, v)


def _median_us(fn, args, reps: int = 60) -> float:  # type: ignore[no-untyped-def]
    for _ in range(5):
        fn(*args)
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    torch.cuda._sleep(200_000_000)  # the host queues every launch before the GPU reaches them
    for e0, e1 in ev:
        e0.record()
        fn(*args)
        e1.record()
    torch.cuda.synchronize()
    t = sorted(e0.elapsed_time(e1) * 1e3 for e0, e1 in ev)
    return 0.5 * (t[reps // 2 - 1] + t[reps // 2])


def main(argv: list[str]) -> int:
    b, h, s, d = 1, 32, 4096, 128
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    if argv[:1] == ["--time"]:
        oa, ob = flash(q, k, v), cudnn(q, k, v)
        diff = float((oa.float() - ob.float()).abs().max())
        ok = diff < 2e-2
        ta, tb = _median_us(flash, (q, k, v)), _median_us(cudnn, (q, k, v))
        print(f"time {PAIR} legacy-mma A flash_fwd_kernel {ta:.1f} us  B cudnn {tb:.1f} us  A/B {ta / tb:.2f}  "
              f"check {'ok' if ok else 'FAIL'} ({diff:.3g})")
        with open(argv[1], "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "cudnn": torch.backends.cudnn.version(), "reps": 60,
                       "stat": "median of per-launch CUDA event times",
                       "pairs": [{"id": PAIR, "cause": "legacy-mma", "time_a_us": round(ta, 2),
                                  "time_b_us": round(tb, 2), "check": "ok" if ok else "FAIL",
                                  "max_abs_diff": diff}]}, fh, indent=1)
        return 0 if ok else 1
    if argv[:1] == ["--record"]:
        for tag, fn in (("a", flash), ("b", cudnn)):
            for _ in range(3):
                fn(q, k, v)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push("measure")
            torch.cuda.nvtx.range_push(f"{PAIR}.{tag}")
            fn(q, k, v)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
            torch.cuda.nvtx.range_pop()
        print("recorded", PAIR)
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
