"""Two real attention forward kernels in one plain script, for `profctl explain` tests: profctl's own Triton
FlashAttention-2 forward and PyTorch SDPA's cuDNN forward, batch 1, 32 heads, seqlen 4096, head dim 128, bf16,
non-causal. Three warm-up calls each, then one call inside an NVTX push/pop range `measure` (default domain),
which record.sh selects with `ncu --nvtx --nvtx-include measure/`. Independent of profctl's runner: it only
imports profctl's Triton kernel as a function.
"""

import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

try:
    from profctl.workloads.kernels.triton_attention import attention as triton_attention
except ImportError:  # before the workloads moved into profctl's namespace
    from workloads.triton_attention import attention as triton_attention  # noqa: I001


def cudnn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        return F.scaled_dot_product_attention(q, k, v)


def main() -> None:
    which = sys.argv[1:] or ["triton", "cudnn"]
    b, h, s, d = 1, 32, 4096, 128
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    fns = {"triton": triton_attention, "cudnn": cudnn}
    for name in which:
        fn = fns[name]
        for _ in range(3):
            fn(q, k, v)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("measure")
        torch.cuda.nvtx.range_push(name)
        fn(q, k, v)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_pop()
    print("ok", which)


if __name__ == "__main__":
    main()
