"""A small NVTX-annotated torch script for profctl's reader tests (tests/data/README.md, nvtx_mixed_*, says how it ran).

NVTX, on purpose varied: push/pop ranges in the default domain and nested in a custom domain `attnbench`,
start/end ranges in both domains overlapping the push/pop ranges, launches outside any range, a backward pass
whose kernels autograd launches from its worker thread while the main thread sits in `attnbench@train/bwd`, and a
CUTLASS 2 sparse GEMM (`cutlass::Kernel<...>`) when the build has one.
"""
import argparse
import os
import sys

import nvtx
import torch

D = "attnbench"


def work(dev: str) -> None:
    torch.manual_seed(0)
    a = torch.randn(64, 64, device=dev, dtype=torch.bfloat16)  # outside any range
    b = torch.randn(64, 64, device=dev, dtype=torch.bfloat16)
    nvtx.push_range("outer")  # default domain, push/pop
    s0 = nvtx.start_range(message="step 0")  # default domain, start/end
    nvtx.push_range("attention[fa4]", domain=D)
    nvtx.push_range("forward", domain=D)
    c = (a @ b).softmax(-1)
    d = c.t().contiguous()  # a strided copy: elementwise_kernel<128, 4, gpu_kernel_impl_nocast<direct_copy...>>
    nvtx.pop_range(domain=D)
    e1 = nvtx.start_range(message="epoch 1", domain=D)  # custom domain, start/end, open across the pops below
    nvtx.push_range("scale", domain=D)
    f = d * 2.0
    nvtx.pop_range(domain=D)
    nvtx.pop_range(domain=D)
    nvtx.end_range(s0)
    g = f.float()  # outer (default push/pop) + epoch 1 (attnbench start/end)
    nvtx.pop_range()
    g = g + 1.0  # epoch 1 only
    nvtx.end_range(e1)
    x = torch.randn(64, 64, device=dev, requires_grad=True)
    nvtx.push_range("train", domain=D)
    nvtx.push_range("fwd", domain=D)
    y = (x @ x.t()).softmax(-1).sum()
    nvtx.pop_range(domain=D)
    nvtx.push_range("bwd", domain=D)  # on the main thread; autograd launches the kernels from its own thread
    y.backward()
    nvtx.pop_range(domain=D)
    nvtx.pop_range(domain=D)
    nvtx.push_range("sparse", domain=D)
    try:
        from torch.sparse import SparseSemiStructuredTensor, to_sparse_semi_structured

        SparseSemiStructuredTensor._FORCE_CUTLASS = True
        for dt in (torch.float16, torch.bfloat16):
            w = torch.tensor([0, 0, 1, 1], dtype=dt, device=dev).tile((128, 32)) * torch.rand(128, 128, dtype=dt,
                                                                                               device=dev)
            ws = to_sparse_semi_structured(w)
            _ = torch.mm(ws, torch.rand(128, 128, dtype=dt, device=dev))
    except Exception as ex:  # noqa: BLE001
        print("sparse (CUTLASS 2) skipped:", type(ex).__name__, str(ex)[:200], file=sys.stderr)
    nvtx.pop_range(domain=D)
    torch.cuda.synchronize()


def work_small(dev: str) -> None:
    """The same NVTX layout with few, small kernel modules (an .ncu-rep embeds each kernel's module: the full
    script's report is 115 MB): GEMMs (cuBLAS nvjet) and the two copy kernels, inputs made on the CPU."""
    bf = torch.bfloat16
    torch.manual_seed(0)
    a = torch.randn(64, 64, dtype=bf).to(dev)  # copies, no kernel
    b = torch.randn(64, 64, dtype=bf).to(dev)
    nvtx.push_range("outer")
    s0 = nvtx.start_range(message="step 0")
    nvtx.push_range("attention[fa4]", domain=D)
    nvtx.push_range("forward", domain=D)
    c = a @ b
    d = c.t().contiguous()  # elementwise_kernel<128, 4, gpu_kernel_impl_nocast<direct_copy_kernel_cuda ...>>
    nvtx.pop_range(domain=D)
    e1 = nvtx.start_range(message="epoch 1", domain=D)
    nvtx.push_range("scale", domain=D)
    f = d @ b
    nvtx.pop_range(domain=D)
    nvtx.pop_range(domain=D)
    nvtx.end_range(s0)
    g = f.float()  # outer + epoch 1
    nvtx.pop_range()
    h = f @ b  # epoch 1 only
    nvtx.end_range(e1)
    x = torch.randn(64, 64, dtype=bf).to(dev).requires_grad_()
    gy = torch.ones(64, 64, dtype=bf).to(dev)
    nvtx.push_range("train", domain=D)
    nvtx.push_range("fwd", domain=D)
    y = x @ b
    nvtx.pop_range(domain=D)
    nvtx.push_range("bwd", domain=D)
    y.backward(gy)  # the GEMM for x.grad runs on autograd's thread
    nvtx.pop_range(domain=D)
    nvtx.pop_range(domain=D)
    torch.cuda.synchronize()
    del g, h


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--torch-trace", default=None)
    args = ap.parse_args()
    if args.torch_trace:
        work("cuda")  # warm-up outside the capture
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            work("cuda")
        prof.export_chrome_trace(args.torch_trace)
    elif os.environ.get("REC_SMALL"):
        work_small("cuda")
    else:
        work("cuda")
    print("done", torch.__version__, torch.cuda.get_device_name(0))


if __name__ == "__main__":
    main()
