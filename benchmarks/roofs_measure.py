"""Measure the roofs profctl quotes against the GPU itself: a large bf16 (and fp16) matmul, an FP8 matmul
(torch._scaled_mm, e4m3), a device-to-device copy, and (from tests/data/planted/planted.cu --time) the
exponentials per second of the special-function unit. Prints one JSON object; RESULTS.md keeps the numbers.

    python3 benchmarks/roofs_measure.py > roofs.json
"""

from __future__ import annotations

import json
import statistics
import subprocess

import torch


def _time(fn, reps: int = 20, warm: int = 5) -> float:
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    return statistics.median(times)


def _clocks() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu",
                               "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e:
        return f"unavailable: {e}"


def main() -> None:
    out: dict = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    n = 8192
    for dt in (torch.bfloat16, torch.float16):
        a = torch.randn(n, n, device="cuda", dtype=dt)
        b = torch.randn(n, n, device="cuda", dtype=dt)
        s = _time(lambda a=a, b=b: a @ b)
        out[f"matmul_{str(dt).split('.')[-1]}_tflops"] = 2 * n**3 / s / 1e12
        out[f"clocks_after_{str(dt).split('.')[-1]}"] = _clocks()
    try:
        a8 = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        b8 = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
        one = torch.ones((), device="cuda")
        s = _time(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
        out["matmul_fp8_e4m3_tflops"] = 2 * n**3 / s / 1e12
    except Exception as e:
        out["matmul_fp8_error"] = str(e)[:300]
    x = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    s = _time(lambda: y.copy_(x))
    out["copy_bytes_moved_per_s"] = 2 * x.numel() / s  # read + write
    out["copy_read_per_s"] = x.numel() / s
    out["clocks_end"] = _clocks()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
