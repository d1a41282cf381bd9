"""The attention workload: the child process a profiler launches, also runnable on its own.

    python -m workloads.attention --backend sdpa-flash --batch 4 --seqlen-q 2048 --seqlen-kv 2048 --heads 16 \
        --kv-heads 4 --head-dim 128 --dtype bf16 --causal --pass fwd+bwd --warmup 3 --iters 10 --device cuda

Every option takes a comma-separated list; the process runs the cartesian product, one case at a time, each in
profctl's NVTX scheme (workloads/nvtx_scheme.py) with cudaProfilerStart/Stop around its measured iterations.
With ``--jsonl FILE`` it appends one JSON line when a case starts and one with its result, so a parent can follow
progress, sample clocks per case, and keep every finished row if the process dies.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from workloads import nvtx_scheme as ns
from workloads.spec import (
    BACKENDS,
    CAUSAL_ALIGN,
    DEVICES,
    DTYPES,
    LAYOUTS,
    PASSES,
    AttentionSpec,
    SpecError,
    specs_from_options,
)

#: relative-error tolerance of the output against a float64 reference, per dtype
TOLERANCE = {"bf16": 3e-2, "fp16": 4e-3, "fp32": 1e-4}


# ---------------------------------------------------------------------------------------------------------- NVTX
class Nvtx:
    """Push/pop in profctl's domain; a no-op when disabled or when the nvtx package is missing."""

    def __init__(self, enabled: bool, mirror: Any = None) -> None:
        self.enabled = False
        self._nvtx: Any = None
        self._mirror = mirror  # an object with push(name)/pop(), e.g. torch.profiler ranges (Hooks.ranges())
        if enabled:
            try:
                import nvtx

                self._nvtx = nvtx
                self._domain = nvtx.get_domain(ns.DOMAIN)
                self.enabled = True
            except Exception as e:  # pragma: no cover - depends on the environment
                print(f"warning: NVTX disabled ({type(e).__name__}: {e})", file=sys.stderr)

    def push(self, name: str) -> None:
        if self.enabled:
            self._domain.push_range(self._domain.get_event_attributes(message=name))
        if self._mirror is not None:
            self._mirror.push(name)

    def pop(self) -> None:
        if self.enabled:
            self._domain.pop_range()
        if self._mirror is not None:
            self._mirror.pop()

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        self.push(name)
        try:
            yield
        finally:
            self.pop()


def _bwd_markers(nv: Nvtx, stack: list[str]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Identity autograd functions that push/pop the backward range on autograd's worker thread.

    ``begin`` wraps the output: its backward runs first in the backward pass and pushes ``stack`` (read when it
    runs, so the phase can change from warmup to measure). ``end`` wraps q, k, v: its backward runs after the
    attention's backward and pops. The backward kernels then nest in the same ranges as on the main thread.
    """
    import torch

    class Begin(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, o: torch.Tensor) -> torch.Tensor:
            return o.view_as(o)

        @staticmethod
        def backward(ctx: Any, go: torch.Tensor) -> torch.Tensor:
            for name in stack:
                nv.push(name)
            return go

    class End(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Any:
            return q.view_as(q), k.view_as(k), v.view_as(v)

        @staticmethod
        def backward(ctx: Any, gq: torch.Tensor, gk: torch.Tensor, gv: torch.Tensor) -> Any:
            for _ in stack:
                nv.pop()
            return gq, gk, gv

    return Begin.apply, End.apply


# ---------------------------------------------------------------------------------------------------------- hooks
class Hooks:
    """Points where a profiler wrapped around the workload (torch.profiler) starts and stops recording, so it
    records the measured iterations only. The default does nothing."""

    def measure_begin(self, spec: AttentionSpec) -> None:
        """Called right before the first measured iteration of a case."""

    def iteration_end(self, spec: AttentionSpec) -> None:
        """Called after each measured iteration (torch.profiler's step())."""

    def measure_end(self, spec: AttentionSpec) -> None:
        """Called after the last measured iteration, once the GPU is idle."""

    def close(self) -> None:
        """Called once when the process is done with all cases."""

    def ranges(self) -> Any:
        """An object whose push(name)/pop() mirror the NVTX ranges (torch.profiler's record_function)."""
        return None


def make_hooks(a: argparse.Namespace) -> Hooks:
    """The hooks the command line asks for (``--torch-trace``)."""
    if getattr(a, "torch_trace", None):
        from workloads.torch_profile import TorchProfileHooks

        return TorchProfileHooks(a)
    return Hooks()


# ---------------------------------------------------------------------------------------------------------- timing
class Timer:
    """Per-iteration timing: CUDA events on the GPU (queued back to back, read after one sync), wall clock on CPU."""

    def __init__(self, device: str) -> None:
        import torch

        self.cuda = device == "cuda"
        self._torch = torch
        self._marks: list[Any] = []

    def mark(self) -> None:
        if self.cuda:
            e = self._torch.cuda.Event(enable_timing=True)
            e.record()
            self._marks.append(e)
        else:
            self._marks.append(time.perf_counter())

    def intervals_ms(self, stride: int) -> list[list[float]]:
        """Group marks into iterations of `stride`+1 marks each and return the gaps (ms) inside each one."""
        if self.cuda:
            self._torch.cuda.synchronize()
            ms = lambda a, b: a.elapsed_time(b)  # noqa: E731
        else:
            ms = lambda a, b: (b - a) * 1e3  # noqa: E731
        out = []
        n = stride + 1
        for i in range(0, len(self._marks), n):
            grp = self._marks[i : i + n]
            out.append([ms(grp[j], grp[j + 1]) for j in range(stride)])
        self._marks.clear()
        return out


# ---------------------------------------------------------------------------------------------------------- reference
def reference(spec: AttentionSpec, q: Any, k: Any, v: Any) -> Any:
    """float64 attention on the same inputs and device, one (batch, head) slice at a time, with the backend's
    causal alignment; rows that see no key are 0 (as FlashAttention returns)."""
    import torch

    lay = spec.layout
    q64 = (q if lay == "bhsd" else q.transpose(1, 2)).detach()
    k64 = (k if lay == "bhsd" else k.transpose(1, 2)).detach()
    v64 = (v if lay == "bhsd" else v.transpose(1, 2)).detach()
    rep = spec.heads // spec.kv_heads
    sq, skv = spec.seqlen_q, spec.seqlen_kv
    out = torch.empty(q64.shape, dtype=torch.float64, device=q.device)
    mask = None
    if spec.causal:
        offset = 0 if CAUSAL_ALIGN[spec.backend] == "top-left" else skv - sq
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(skv, device=q.device)[None, :]
        mask = j > i + offset
    scale = spec.head_dim ** -0.5
    for b in range(spec.batch):
        for h in range(spec.heads):
            qs = q64[b, h].double()
            ks = k64[b, h // rep].double()
            vs = v64[b, h // rep].double()
            s = (qs @ ks.T) * scale
            if mask is not None:
                s = s.masked_fill(mask, float("-inf"))
            p = torch.softmax(s, dim=-1)
            p = torch.nan_to_num(p, nan=0.0)
            out[b, h] = p @ vs
    return out if lay == "bhsd" else out.transpose(1, 2)


def rel_error(o: Any, ref: Any) -> float:
    o = o.detach().double()
    denom = ref.norm().item()
    return float((o - ref).norm().item() / denom) if denom > 0 else float((o - ref).norm().item())


# ---------------------------------------------------------------------------------------------------------- one case
def _inputs(spec: AttentionSpec, requires_grad: bool, seed: int) -> tuple[Any, Any, Any, Any]:
    import torch

    from workloads.backends import TORCH_DTYPES

    g = torch.Generator(device="cpu").manual_seed(seed)
    dt = TORCH_DTYPES[spec.dtype]

    def t(h: int, s: int) -> torch.Tensor:
        shape = (spec.batch, h, s, spec.head_dim) if spec.layout == "bhsd" else (spec.batch, s, h, spec.head_dim)
        x = torch.randn(shape, generator=g, dtype=torch.float32).to(device=spec.device, dtype=dt)
        return x.requires_grad_(requires_grad)

    q = t(spec.heads, spec.seqlen_q)
    k = t(spec.kv_heads, spec.seqlen_kv)
    v = t(spec.kv_heads, spec.seqlen_kv)
    do = t(spec.heads, spec.seqlen_q).detach() if requires_grad else None
    return q, k, v, do


def run_case(spec: AttentionSpec, *, warmup: int, iters: int, nvtx: bool, check: bool, flush_l2: bool,
             seed: int = 0, hooks: Hooks | None = None) -> dict[str, Any]:
    """Run one case and return its result row (status ok/unsupported/oom/error)."""
    import torch

    from workloads import backends

    hooks = hooks or Hooks()
    row: dict[str, Any] = {"status": "ok", "reason": None}
    cuda = spec.device == "cuda"
    nv = Nvtx(nvtx, mirror=hooks.ranges())
    case = ns.case_range(spec.backend, spec.shape_key)
    want_bwd = spec.pass_ in ("bwd", "fwd+bwd")
    q: Any = None
    k: Any = None
    v: Any = None
    do: Any = None
    o: Any = None
    ref: Any = None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                fn = backends.make(spec)
                q, k, v, do = _inputs(spec, want_bwd, seed)
                with nv.range(case), nv.range(ns.SETUP), torch.no_grad():
                    o = fn(q, k, v)  # first call: compiles/autotunes; also tells us if the shape is supported
                if cuda:
                    torch.cuda.synchronize()
            except Exception as e:
                status, reason = backends.classify_failure(e, list(caught))
                return {"status": status, "reason": reason}
        if check:
            ref = reference(spec, q, k, v)
            err = rel_error(o, ref)
            row["rel_error"] = err
            row["tolerance"] = TOLERANCE[spec.dtype]
            row["check"] = "pass" if err <= TOLERANCE[spec.dtype] and math.isfinite(err) else "fail"
            del ref
        o = None

        stack = [case, ns.WARMUP, ns.pass_range(spec.backend, "bwd")]
        markers = _bwd_markers(nv, stack) if (want_bwd and nv.enabled) else None

        def forward() -> Any:
            if markers is None:
                return fn(q, k, v)
            begin, end = markers
            qq, kk, vv = end(q, k, v)
            return begin(fn(qq, kk, vv))

        l2 = None
        if flush_l2 and cuda:
            l2 = torch.empty(256 * 2**20, dtype=torch.int8, device="cuda")
        timer = Timer(spec.device)
        retained: Any = None
        if spec.pass_ == "bwd":
            retained = forward()  # one graph, backward replayed with retain_graph

        def one_iter() -> None:
            nonlocal retained
            if l2 is not None:
                l2.zero_()
            if spec.pass_ == "fwd":
                timer.mark()
                with nv.range(ns.pass_range(spec.backend, "fwd")), torch.no_grad():
                    fn(q, k, v)
                timer.mark()
            elif spec.pass_ == "bwd":
                q.grad = k.grad = v.grad = None
                timer.mark()
                with nv.range(ns.pass_range(spec.backend, "bwd")):
                    retained.backward(do, retain_graph=True)
                timer.mark()
            else:
                q.grad = k.grad = v.grad = None
                timer.mark()
                with nv.range(ns.pass_range(spec.backend, "fwd")):
                    out = forward()
                timer.mark()
                with nv.range(ns.pass_range(spec.backend, "bwd")):
                    out.backward(do)
                timer.mark()

        stride = 2 if spec.pass_ == "fwd+bwd" else 1
        with nv.range(case):
            stack[1] = ns.WARMUP
            with nv.range(ns.WARMUP):
                for _ in range(warmup):
                    one_iter()
            timer.intervals_ms(stride)  # drop warm-up marks (synchronizes)
            if cuda:
                torch.cuda.reset_peak_memory_stats()
                mem_before = torch.cuda.memory_allocated()
                torch.cuda.cudart().cudaProfilerStart()
            stack[1] = ns.MEASURE
            hooks.measure_begin(spec)
            t0 = time.perf_counter()
            try:
                with nv.range(ns.MEASURE):
                    for _ in range(iters):
                        one_iter()
                        hooks.iteration_end(spec)
                    if cuda:
                        torch.cuda.synchronize()
            finally:
                if cuda:
                    torch.cuda.cudart().cudaProfilerStop()
                hooks.measure_end(spec)
            wall = time.perf_counter() - t0
            per_iter = timer.intervals_ms(stride)
        times = [sum(x) for x in per_iter]
        row.update(_stats(times))
        if stride == 2:
            row["fwd_median_ms"] = statistics.median(x[0] for x in per_iter)
            row["bwd_median_ms"] = statistics.median(x[1] for x in per_iter)
        row["times_ms"] = times
        row["wall_s"] = wall
        if cuda:
            row["peak_mem_bytes"] = int(torch.cuda.max_memory_allocated())
            row["workspace_bytes"] = int(torch.cuda.max_memory_allocated() - mem_before)
        else:
            row["peak_mem_bytes"] = None
        return row
    except Exception as e:
        status, reason = backends.classify_failure(e, [])
        if status == "unsupported":  # a refusal after the first call is still a failure of this run
            status = "error"
        row.update({"status": status, "reason": reason})
        if os.environ.get("PROFCTL_DEBUG"):
            traceback.print_exc()
        return row
    finally:
        q = k = v = do = o = ref = None
        if cuda:
            with contextlib.suppress(Exception):
                torch.cuda.synchronize()
            torch.cuda.empty_cache()


def _stats(times: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times),
            "mean_ms": statistics.fmean(times), "std_ms": statistics.stdev(times) if len(times) > 1 else 0.0,
            "iters": len(times)}


def _inject_fault(spec: AttentionSpec) -> None:
    """Fault injection for profctl's own tests: PROFCTL_FAULT=crash:<backend> ends the process abruptly (as a
    segfault or CUDA fault would) and hang:<backend> blocks, when a case of that backend starts."""
    fault = os.environ.get("PROFCTL_FAULT", "")
    kind, _, backend = fault.partition(":")
    if backend != spec.backend:
        return
    if kind == "crash":
        os._exit(139)
    if kind == "hang":
        time.sleep(3600)


def _sticky_cuda_error(reason: str | None) -> bool:
    """Errors after which the CUDA context is unusable: the process must end and the parent starts a new one."""
    r = (reason or "").lower()
    return any(s in r for s in ("illegal memory access", "unspecified launch failure", "device-side assert",
                                "misaligned address", "illegal instruction", "cuda error: an illegal"))


# ---------------------------------------------------------------------------------------------------------- CLI
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m workloads.attention", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", "--backends", dest="backend", default="sdpa-flash",
                   help=f"comma list of {', '.join(BACKENDS)}")
    p.add_argument("--batch", default="1")
    p.add_argument("--seqlen", default=None, help="sets both --seqlen-q and --seqlen-kv")
    p.add_argument("--seqlen-q", default=None)
    p.add_argument("--seqlen-kv", default=None, help="default: equal to seqlen-q")
    p.add_argument("--heads", default="16")
    p.add_argument("--kv-heads", default=None, help="default: equal to heads")
    p.add_argument("--head-dim", default="128")
    p.add_argument("--dtype", default="bf16", help=f"comma list of {', '.join(DTYPES)}")
    p.add_argument("--causal", nargs="?", const="true", default="false",
                   help="flag, or a list such as 'false,true'")
    p.add_argument("--pass", dest="pass_", default="fwd", help=f"comma list of {', '.join(PASSES)}")
    p.add_argument("--layout", default="bhsd", help=f"comma list of {', '.join(LAYOUTS)}")
    p.add_argument("--device", default="cuda", choices=DEVICES)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-nvtx", action="store_true", help="no NVTX ranges (to measure their cost)")
    p.add_argument("--no-check", action="store_true", help="skip the float64 reference check")
    p.add_argument("--flush-l2", action="store_true", help="zero a 256 MiB buffer before each iteration")
    p.add_argument("--jsonl", default=None, help="append start/result events here, one JSON object a line")
    p.add_argument("--skip", type=int, default=0, help="start at this case index (a parent resuming a sweep)")
    p.add_argument("--torch-trace", default=None,
                   help="record the measured iterations with torch.profiler into this trace (.json.gz)")
    p.add_argument("--torch-shapes", action="store_true", help="torch.profiler: record input shapes")
    p.add_argument("--torch-memory", action="store_true", help="torch.profiler: record memory allocations")
    p.add_argument("--torch-stacks", action="store_true", help="torch.profiler: record Python stacks")
    return p


def specs_from_args(a: argparse.Namespace) -> list[AttentionSpec]:
    sq = a.seqlen_q or a.seqlen or "1024"
    skv = a.seqlen_kv  # None: equal to each case's seqlen_q (--seqlen sets both)
    if a.warmup < 0 or a.iters <= 0:
        raise SpecError(f"--iters must be positive and --warmup >= 0 (got iters={a.iters}, warmup={a.warmup})")
    return specs_from_options(backend=a.backend, batch=a.batch, seqlen_q=sq, seqlen_kv=skv, heads=a.heads,
                              kv_heads=a.kv_heads, head_dim=a.head_dim, dtype=a.dtype, causal=a.causal,
                              pass_=a.pass_, layout=a.layout, device=a.device)


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    try:
        specs = specs_from_args(a)
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not specs:
        print("error: the options select no case", file=sys.stderr)
        return 2

    def emit(obj: dict[str, Any]) -> None:
        if a.jsonl:
            with open(a.jsonl, "a", encoding="utf-8") as f:
                f.write(json.dumps(obj) + "\n")
                f.flush()
                os.fsync(f.fileno())

    import torch

    if a.device == "cuda" and torch.cuda.is_available():
        emit({"event": "device", "name": torch.cuda.get_device_name(0),
              "capability": list(torch.cuda.get_device_capability(0)), "torch": torch.__version__,
              "cuda": torch.version.cuda, "sm_count": torch.cuda.get_device_properties(0).multi_processor_count})
    else:
        emit({"event": "device", "name": "cpu", "torch": torch.__version__, "threads": torch.get_num_threads()})
    hooks = make_hooks(a)
    try:
        rc = _run_all(a, specs, emit, hooks)
    finally:
        hooks.close()
    return rc


def _run_all(a: argparse.Namespace, specs: list[AttentionSpec], emit: Callable[[dict[str, Any]], None],
             hooks: Hooks) -> int:
    """Exit status: 0 when at least one case ran, 1 when none did, 3 after a CUDA error that broke the context."""
    ran = 0
    for i, spec in enumerate(specs):
        if i < a.skip:
            continue
        emit({"event": "start", "index": i, "spec": spec.to_dict(), "t": time.time()})
        _inject_fault(spec)
        row = run_case(spec, warmup=a.warmup, iters=a.iters, nvtx=not a.no_nvtx, check=not a.no_check,
                       flush_l2=a.flush_l2, seed=a.seed, hooks=hooks)
        emit({"event": "row", "index": i, "spec": spec.to_dict(), "t": time.time(), **row})
        label = f"{spec.case_id} {spec.pass_}"
        if row["status"] == "ok":
            err = row.get("rel_error")
            print(f"{label}: median {row['median_ms']:.4f} ms (min {row['min_ms']:.4f}, max {row['max_ms']:.4f})"
                  + (f" rel_err {err:.2e} {row['check']}" if err is not None else ""), flush=True)
        else:
            print(f"{label}: {row['status']}: {row['reason']}", flush=True)
            if _sticky_cuda_error(row.get("reason")):
                return 3  # the CUDA context is broken; a parent restarts us with --skip i+1
        ran += row["status"] == "ok"
    return 0 if ran or a.skip >= len(specs) else 1


if __name__ == "__main__":
    sys.exit(main())
