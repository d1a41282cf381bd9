"""Triton kernels under Proton's instrumentation backend (``profctl proton``): a user's Python program, or one
case of profctl's Triton FlashAttention-2 forward with its steps in Proton scopes.

    python -m profctl.workloads.proton_run --out run/proton --jsonl run/workload.jsonl [mode options] -- SCRIPT.py ARGS
    python -m profctl.workloads.proton_run --out run/case-0 --case '{"backend": "triton", ...}' [--time 20]

Proton writes ``<out>.chrome_trace`` (``--data trace``) or ``<out>.hatchet`` (``--data tree``) when the session is
finalized; what it drops from a full buffer it prints on standard error (the parent keeps the log).

* A program runs in this process as on its own (profctl.workloads.pyprofile.run_program), after Proton's Triton
  semantic is on and its session started, so the scopes its kernels name are recorded; its exit status is this
  process's, and an ``exit`` event.
* A case (``--case``, an AttentionSpec as JSON): the plain forward runs a few times first (the GPU clocks up,
  the plain kernel compiles), then ONE launch of the scoped forward (triton_attention.scoped) is recorded, and
  the SM clock NVML reports right after it is written in a ``recorded`` event (cycles -> time). With
  ``--time N`` nothing is recorded: the plain and the scoped forward are each launched N times and their kernel
  times measured by torch.profiler (the GPU's own start and end of each kernel, not the host-side buffer
  allocation and copies Proton adds around a launch), written in an ``overhead`` event; the process then exits
  without finalizing (the N launches' timelines are not wanted).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from profctl.spec import AttentionSpec

from .attention import inputs
from .pyprofile import run_program as run
from .results import jsonl_emitter


def mode_of(a: argparse.Namespace) -> Any:
    """Proton's instrumentation mode from the options (triton.profiler.mode.Default)."""
    import triton.profiler as proton

    kw: dict[str, Any] = {"buffer_type": a.buffer, "granularity": a.granularity}
    if a.buffer_size:
        kw["buffer_size"] = a.buffer_size
    if a.warps:
        kw.update(sampling_strategy="selective", sampling_options=a.warps)
    opts = [o for o, on in (("clock32", a.clock == 32), ("time_shift", a.time_shift)) if on]
    if opts:
        kw["optimizations"] = ",".join(opts)
    return proton.mode.Default(**kw)


def versions() -> dict[str, Any]:
    import torch
    import triton

    cuda = torch.cuda.is_available()
    return {"event": "device", "name": torch.cuda.get_device_name(0) if cuda else "cpu", "torch": torch.__version__,
            "cuda": torch.version.cuda if cuda else None, "triton": triton.__version__,
            "capability": list(torch.cuda.get_device_capability(0)) if cuda else None}


def sm_clock_mhz() -> dict[str, Any]:
    """The SM clock NVML reports now, and its maximum (None where NVML is not there)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(int(os.environ.get("PROFCTL_NVML_INDEX", "0")))
        return {"clock_mhz": int(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
                "clock_max_mhz": int(pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM))}
    except Exception:
        return {"clock_mhz": None, "clock_max_mhz": None}


def case_call(spec_json: str) -> tuple[Any, Any]:
    """The forward of one case as a no-argument call, and the spec."""
    from .kernels import triton_attention as ta

    spec = AttentionSpec.from_dict(json.loads(spec_json))
    q, k, v, _ = inputs(spec, False, 0)
    fn = ta.attention_bottom_right if spec.causal_align == "bottom-right" else ta.attention
    return (lambda: fn(q, k, v, is_causal=spec.causal)), spec


def record_case(a: argparse.Namespace, emit: Any) -> int:
    """Warm up with the plain forward, then record one launch of the scoped one."""
    import torch
    import triton.profiler as proton

    from .kernels import triton_attention as ta

    call, spec = case_call(a.case)
    for _ in range(max(3, a.warmup)):
        call()
    torch.cuda.synchronize()
    with ta.scoped():
        proton.start(a.out, data=a.data, backend="instrumentation", mode=mode_of(a))
        try:
            call()
            torch.cuda.synchronize()
            clock = sm_clock_mhz()
        finally:
            proton.finalize()
    emit({"event": "recorded", "case": spec.to_dict(), "kernel": "_fwd_kernel", **clock})
    return 0


def _kernel_times(fn: Any, n: int, name: str) -> tuple[list[float], str]:
    """The GPU times (µs) of the kernels named `name` in `n` calls of `fn`: torch.profiler's CUDA activity (the
    kernel alone), else CUDA events around each call (then also what Proton adds on the stream per launch)."""
    import torch

    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                fn()
            torch.cuda.synchronize()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            prof.export_chrome_trace(path)
            with open(path, encoding="utf-8") as f:
                events = json.load(f).get("traceEvents", [])
        times = [float(e["dur"]) for e in events if e.get("cat") == "kernel" and name in str(e.get("name"))]
        if len(times) >= n:
            return times[-n:], "torch.profiler"
    except Exception as e:  # CUPTI unavailable, or taken by another profiler
        print(f"proton_run: torch.profiler kernel times unavailable ({type(e).__name__}: {e})", file=sys.stderr)
    out = []
    for _ in range(n):
        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0.record()
        fn()
        t1.record()
        t1.synchronize()
        out.append(t0.elapsed_time(t1) * 1000.0)
    return out, "cuda-events"


def time_case(a: argparse.Namespace, emit: Any) -> int:
    """The plain and the scoped forward, `a.time` launches each, their kernel times; no trace is written."""
    import torch
    import triton.profiler as proton

    from .kernels import triton_attention as ta

    call, spec = case_call(a.case)
    for _ in range(max(3, a.warmup)):
        call()
    torch.cuda.synchronize()
    plain, how_plain = _kernel_times(call, a.time, "_fwd_kernel")
    with ta.scoped():
        proton.start(a.out, data=a.data, backend="instrumentation", mode=mode_of(a))
        call()  # compiles the scoped kernel
        torch.cuda.synchronize()
        scoped, how_scoped = _kernel_times(call, a.time, "_fwd_kernel")
    emit({"event": "overhead", "case": spec.to_dict(), "plain_us": plain, "scoped_us": scoped,
          "method": how_plain if how_plain == how_scoped else f"{how_plain} (plain), {how_scoped} (scoped)",
          "plain_median_us": statistics.median(plain) if plain else None,
          "scoped_median_us": statistics.median(scoped) if scoped else None, **sm_clock_mhz()})
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no finalize: the timed launches' timelines are not wanted (and would take long to write)


def run_program(a: argparse.Namespace, entry: list[str], emit: Any) -> int:
    """The user's program inside a Proton session; its exit status."""
    import triton.profiler as proton


    error: dict[str, Any] = {}
    proton.start(a.out, data=a.data, backend="instrumentation", mode=mode_of(a))
    try:
        status = run(entry, error)
    finally:
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.synchronize()
        except Exception:
            pass
        proton.finalize()
    emit({"event": "exit", "status": status, **sm_clock_mhz(), **error})
    return status


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(prog="python -m profctl.workloads.proton_run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="Proton's output, without its suffix")
    p.add_argument("--jsonl", default=None, help="append the events here")
    p.add_argument("--data", choices=("trace", "tree"), default="trace")
    p.add_argument("--buffer", choices=("shared", "global"), default="shared")
    p.add_argument("--buffer-size", type=int, default=0, help="bytes per CTA (0: Proton's default)")
    p.add_argument("--warps", default="", help="record only these warps (comma list of warp ids)")
    p.add_argument("--granularity", default="warp")
    p.add_argument("--clock", type=int, choices=(32, 64), default=64)
    p.add_argument("--time-shift", action="store_true")
    p.add_argument("--case", default=None, help="an AttentionSpec as JSON (profctl's Triton forward)")
    p.add_argument("--time", type=int, default=0, help="with --case: time N plain and N scoped launches instead")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("program", nargs=argparse.REMAINDER, help="-- SCRIPT.py ARGS... or -- -m MODULE ARGS...")
    a = p.parse_args(argv)
    entry = a.program[1:] if a.program[:1] == ["--"] else a.program
    if (a.case is None) == (not entry):
        p.error("give either --case SPEC or the program after --")
    return a, entry


def main(argv: list[str] | None = None) -> int:
    a, entry = parse(argv)
    if entry and entry[0] != "-m" and not Path(entry[0]).is_file():
        print(f"error: {entry[0]}: no such file", file=sys.stderr)
        return 2
    emit = jsonl_emitter(a.jsonl)
    try:
        import triton.profiler as proton  # noqa: F401
        import triton.profiler.language as pl
    except Exception as e:
        emit({"event": "no-proton", "error": f"{type(e).__name__}: {e}"})
        print(f"error: Proton cannot be imported: {type(e).__name__}: {e}", file=sys.stderr)
        return 3
    emit(versions())
    pl.enable_semantic("triton")
    if a.case is None:
        return run_program(a, entry, emit)
    return time_case(a, emit) if a.time else record_case(a, emit)


if __name__ == "__main__":
    sys.exit(main())
