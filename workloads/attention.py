"""The attention workload: the child process a profiler launches, also runnable on its own.

    python -m profctl.workloads.attention --backend sdpa-flash --batch 4 --seqlen-q 2048 --seqlen-kv 2048 --heads 16 \
        --kv-heads 4 --head-dim 128 --dtype bf16 --causal true --pass fwd+bwd --warmup 3 --iters 10 --device cuda

Every option takes a comma-separated list; the process runs the cartesian product, one case at a time, each in
profctl's NVTX scheme (profctl/nvtx.py) with cudaProfilerStart/Stop around its measured iterations. A backend is
a built-in name or a user's function (``path/to/file.py:fn``, ``package.module:fn``), called like
``scaled_dot_product_attention`` (workloads/backends.py). With ``--jsonl FILE`` it appends one JSON line when a
case starts and one with its result, so a parent can follow progress, sample clocks per case, and keep every
finished row if the process dies.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

from profctl import faults, memory
from profctl import nvtx as ns
from profctl.errors import SpecError
from profctl.spec import BUILTIN_BACKENDS, AttentionSpec, AttentionSweep

from .hooks import Hooks
from .ranges import Nvtx, backward_markers
from .results import jsonl_emitter, timing_stats
from .serve import EXIT_FAST_HELP, finish, release_memory
from .torch_profile import make_hooks

#: when this module started running (``time.time()``): a parent that knows when it started the process learns
#: what Python's start and the imports cost (the warm child's ``ready`` event)
T_MAIN = time.time()

#: relative-error tolerance of the output against a float64 reference, per dtype. fp8 is checked against attention
#: of the *dequantized* e4m3 inputs, so what is left is the rounding of P to e4m3 (3 mantissa bits, up to 2^-4
#: relative): 2.0-2.6 % on random inputs (float64 emulation, b1 h2 s4096 d64/d128, benchmarks/fp8_tolerance.py),
#: at most 6.25 % if every P rounded the same way; 5e-2 is twice the typical and still fails a 10 % wrong softmax
#: scale (6-15 %). docs/bench.md, "FP8".
TOLERANCE = {"bf16": 3e-2, "fp16": 4e-3, "fp32": 1e-4, "fp8": 5e-2}


# ---------------------------------------------------------------------------------------------------------- timing
class Timer:
    """Per-iteration timing: CUDA events on the GPU (queued back to back, read after one sync), wall clock on CPU.
    On the GPU the host's own time between the marks is kept too (:attr:`host_ms`): where it nears the events' time,
    the steps wait for the host and time the launch as much as the kernel."""

    def __init__(self, device: str) -> None:
        import torch

        self.cuda = device == "cuda"
        self._torch = torch
        self._marks: list[Any] = []
        self._walls: list[float] = []
        #: per iteration of the last :meth:`intervals_ms`, the host's time from its first mark to its last (GPU only)
        self.host_ms: list[float] = []

    def mark(self) -> None:
        if self.cuda:
            e = self._torch.cuda.Event(enable_timing=True)
            e.record()
            self._marks.append(e)
            self._walls.append(time.perf_counter())
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
        self.host_ms = [(self._walls[i + stride] - self._walls[i]) * 1e3 for i in range(0, len(self._walls), n)]
        self._marks.clear()
        self._walls.clear()
        return out


# ---------------------------------------------------------------------------------------------------------- reference
def reference(spec: AttentionSpec, q: Any, k: Any, v: Any) -> Any:
    """float64 attention of (batch, heads, seqlen, dim) inputs, one (batch, head) slice at a time, with the
    backend's causal alignment; rows that see no key are 0 (as FlashAttention returns)."""
    import torch

    rep = spec.heads // spec.kv_heads
    out = torch.empty(q.shape, dtype=torch.float64, device=q.device)
    mask = hidden_pairs(spec, q.device)
    scale = spec.head_dim ** -0.5
    for b in range(spec.batch):
        for h in range(spec.heads):
            s = (q[b, h].detach().double() @ k[b, h // rep].detach().double().T) * scale
            if mask is not None:
                s = s.masked_fill(mask, float("-inf"))
            p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
            out[b, h] = p @ v[b, h // rep].detach().double()
    return out


def hidden_pairs(spec: AttentionSpec, device: Any) -> Any:
    """The (seqlen_q, seqlen_kv) bool matrix of the pairs the mask hides (True: hidden), or None without a mask:
    causal with the backend's alignment, a sliding window about the same diagonal, documents (profctl.flops counts
    the pairs it leaves)."""
    import torch

    if not (spec.causal or spec.masked):
        return None
    from profctl.shapes import doc_lengths

    sq, skv = spec.seqlen_q, spec.seqlen_kv
    offset = 0 if (spec.mask_align or "top-left") == "top-left" else skv - sq
    i = torch.arange(sq, device=device)[:, None]
    j = torch.arange(skv, device=device)[None, :]
    diag = i + offset
    hidden = torch.zeros(sq, skv, dtype=torch.bool, device=device)
    if spec.causal:
        hidden |= j > diag
    if spec.window:
        hidden |= j <= diag - spec.window
        if not spec.causal:
            hidden |= j >= diag + spec.window
    if spec.docs:
        lengths = doc_lengths(spec.docs, sq)
        doc = torch.repeat_interleave(torch.arange(len(lengths), device=device),
                                      torch.tensor(lengths, device=device))
        hidden |= doc[:, None] != doc[None, :]
    return hidden


def dequantized(q: Any, k: Any, v: Any, descales: dict[str, Any] | None) -> tuple[Any, Any, Any]:
    """The inputs the reference takes: fp8 ones dequantized to float64 (``x8 * x_descale``), others as they are."""
    if not descales:
        return q, k, v
    from .fp8 import dequantize

    return (dequantize(q, descales["q_descale"]), dequantize(k, descales["k_descale"]),
            dequantize(v, descales["v_descale"]))


def rel_error(o: Any, ref: Any) -> float:
    o = o.detach().double()
    denom = ref.norm().item()
    return float((o - ref).norm().item() / denom) if denom > 0 else float((o - ref).norm().item())


# ---------------------------------------------------------------------------------------------------------- one case
def inputs(spec: AttentionSpec, requires_grad: bool, seed: int) -> tuple[Any, Any, Any, Any]:
    """q, k, v as (batch, heads, seqlen, dim) tensors -- views of (batch, seqlen, heads, dim) storage for the
    bshd layout -- and the output gradient; seeded, so every backend on a device sees the same numbers. A GPU
    draws them itself: the CPU's generator took ~2 s a point at b4 h32 s8192 (1.6 GB of float32, one thread, then
    a pageable copy), outside the measured loop but a fifth of a bench sweep's time (issue 31)."""
    import torch

    from .backends import TORCH_DTYPES

    where = torch.device(spec.device)
    g = torch.Generator(device=where).manual_seed(seed)
    dt = TORCH_DTYPES[spec.dtype]

    def t(h: int, s: int) -> torch.Tensor:
        shape = (spec.batch, h, s, spec.head_dim) if spec.layout == "bhsd" else (spec.batch, s, h, spec.head_dim)
        # a GPU draws in the dtype itself (no float32 copy at the point's peak); the CPU in float32, as it did
        x = torch.randn(shape, generator=g, dtype=dt if where.type == "cuda" else torch.float32,
                        device=where).to(dtype=dt)
        x.requires_grad_(requires_grad)
        return x if spec.layout == "bhsd" else x.transpose(1, 2)

    q = t(spec.heads, spec.seqlen_q)
    k = t(spec.kv_heads, spec.seqlen_kv)
    v = t(spec.kv_heads, spec.seqlen_kv)
    do = t(spec.heads, spec.seqlen_q).detach() if requires_grad else None
    return q, k, v, do


def fp8_inputs(spec: AttentionSpec, seed: int) -> tuple[Any, Any, Any, dict[str, Any]]:
    """fp8 cases: the numbers :func:`inputs` draws in fp32, each tensor quantized to e4m3 with its own scale
    (``amax / 448``, workloads/fp8.py), and the descale keywords the backend is called with (FlashAttention-3's
    ``q_descale``, ``k_descale``, ``v_descale``). The bshd layout survives: quantizing keeps the strides."""
    from .fp8 import quantize

    q, k, v, _ = inputs(spec.with_(dtype="fp32"), False, seed)
    (q8, qd), (k8, kd), (v8, vd) = quantize(q), quantize(k), quantize(v)
    return q8, k8, v8, {"q_descale": qd, "k_descale": kd, "v_descale": vd}


class Case:
    """One case being run: its backend function, inputs, ranges and timer (set up, checked, measured)."""

    def __init__(self, spec: AttentionSpec, fn: Any, *, nv: Nvtx, hooks: Hooks, seed: int) -> None:
        import torch

        self.torch = torch
        self.spec, self.fn, self.nv, self.hooks, self.seed = spec, fn, nv, hooks, seed
        self.cuda = spec.device == "cuda"
        self.case = ns.case_range(spec.label, spec.shape_key)
        self.want_bwd = spec.pass_ in ("bwd", "fwd+bwd")
        self.kw: dict[str, Any] = {"is_causal": spec.causal, "scale": spec.head_dim ** -0.5}
        if spec.heads != spec.kv_heads:
            self.kw["enable_gqa"] = True
        if spec.window:  # masks beyond causal: only to a backend that declares it takes them (backends.check)
            self.kw["window"] = spec.window
        if spec.docs:
            from profctl.shapes import doc_lengths

            self.kw["doc_lengths"] = tuple(doc_lengths(spec.docs, spec.seqlen_q))
        self.q: Any = None
        self.k: Any = None
        self.v: Any = None
        self.do: Any = None
        self.descales: dict[str, Any] | None = None
        self.stack = [self.case, ns.WARMUP, ns.pass_range(spec.label, "bwd")]
        self.markers: Any = None
        self.retained: Any = None
        self.l2: Any = None
        self.timer: Timer | None = None
        self.host_peak = False

    def call(self, q: Any, k: Any, v: Any) -> Any:
        return self.fn(q, k, v, **self.kw)

    def first_call(self) -> Any:
        """Inputs (and the backend's own preparation of them), then one call in the setup range: it
        compiles/autotunes, and tells whether the backend takes the shape at all."""
        if self.spec.dtype == "fp8":
            self.q, self.k, self.v, self.descales = fp8_inputs(self.spec, self.seed)
            self.kw.update(self.descales)
        else:
            self.q, self.k, self.v, self.do = inputs(self.spec, self.want_bwd, self.seed)
        with self.nv.range(self.case), self.nv.range(ns.SETUP):
            self.prepare()
            with self.torch.no_grad():
                o = self.call(self.q, self.k, self.v)
        if self.cuda:
            self.torch.cuda.synchronize()
        return o

    def prepare(self) -> None:
        """The backend's ``prepare(q, k, v)``, once per input and outside the timed calls (FP8's K-major V for
        the triton backend): same values, the layout its calls want; a prepared tensor that needs gradients is a
        new leaf."""
        prep = getattr(self.fn, "prepare", None)
        if prep is None:
            return
        with self.torch.no_grad():
            new = prep(self.q, self.k, self.v)
        self.q, self.k, self.v = (n.requires_grad_() if (o.requires_grad and not n.requires_grad) else n
                                  for n, o in zip(new, (self.q, self.k, self.v), strict=True))

    def differentiable(self) -> bool:
        """Whether autograd can take the output back to q, k, v (a function with no backward cannot run
        the bwd passes)."""
        o = self.call(self.q, self.k, self.v)
        return bool(getattr(o, "requires_grad", False))

    def forward(self) -> Any:
        if self.markers is None:
            return self.call(self.q, self.k, self.v)
        begin, end = self.markers
        qq, kk, vv = end(self.q, self.k, self.v)
        return begin(self.call(qq, kk, vv))

    def one_iter(self) -> None:
        spec, nv, timer = self.spec, self.nv, self.timer
        assert timer is not None
        if self.l2 is not None:
            self.l2.zero_()
        if spec.pass_ == "fwd":
            timer.mark()
            with nv.range(ns.pass_range(spec.label, "fwd")), self.torch.no_grad():
                self.call(self.q, self.k, self.v)
            timer.mark()
            return
        self.q.grad = self.k.grad = self.v.grad = None
        if spec.pass_ == "bwd":
            timer.mark()
            with nv.range(ns.pass_range(spec.label, "bwd")):
                self.retained.backward(self.do, retain_graph=True)
            timer.mark()
            return
        timer.mark()
        with nv.range(ns.pass_range(spec.label, "fwd")):
            out = self.forward()
        timer.mark()
        with nv.range(ns.pass_range(spec.label, "bwd")):
            out.backward(self.do)
        timer.mark()

    def measure(self, *, warmup: int, iters: int, flush_l2: bool) -> dict[str, Any]:
        """Warm-up, then the measured iterations between cudaProfilerStart and Stop; the timing row."""
        torch, spec, nv = self.torch, self.spec, self.nv
        self.markers = backward_markers(nv, self.stack) if (self.want_bwd and nv.enabled) else None
        if flush_l2 and self.cuda:
            self.l2 = torch.empty(256 * 2**20, dtype=torch.int8, device="cuda")
        self.timer = Timer(spec.device)
        if spec.pass_ == "bwd":
            self.retained = self.forward()  # one graph, backward replayed with retain_graph
        stride = 2 if spec.pass_ == "fwd+bwd" else 1
        with nv.range(self.case):
            self.stack[1] = ns.WARMUP
            with nv.range(ns.WARMUP):
                for _ in range(warmup):
                    self.one_iter()
            self.timer.intervals_ms(stride)  # drop warm-up marks (synchronizes)
            mem_before = self._start_measuring()
            t0 = time.perf_counter()
            try:
                with nv.range(ns.MEASURE):
                    for _ in range(iters):
                        self.one_iter()
                        self.hooks.iteration_end(spec)
                    if self.cuda:
                        torch.cuda.synchronize()
            finally:
                if self.cuda:
                    torch.cuda.cudart().cudaProfilerStop()
                self.hooks.measure_end(spec)
            wall = time.perf_counter() - t0
            per_iter = self.timer.intervals_ms(stride)
        return self._row(per_iter, stride, wall, mem_before)

    def _start_measuring(self) -> int:
        torch = self.torch
        mem_before = 0
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
            mem_before = torch.cuda.memory_allocated()
            torch.cuda.cudart().cudaProfilerStart()
        else:
            self.host_peak = memory.reset_peak()  # the peak resident memory of the measured iterations
        self.stack[1] = ns.MEASURE
        self.hooks.measure_begin(self.spec)
        return mem_before

    def _row(self, per_iter: list[list[float]], stride: int, wall: float, mem_before: int) -> dict[str, Any]:
        times = [sum(x) for x in per_iter]
        row: dict[str, Any] = {**timing_stats(times), "iters": len(times), "times_ms": times, "wall_s": wall}
        if self.timer is not None and self.timer.host_ms:  # the host's time a step (bench_rows.add_host_warnings)
            row["host_ms"] = statistics.median(self.timer.host_ms)
        if stride == 2:
            row["fwd_median_ms"] = statistics.median(x[0] for x in per_iter)
            row["bwd_median_ms"] = statistics.median(x[1] for x in per_iter)
        if self.cuda:
            peak = int(self.torch.cuda.max_memory_allocated())
            row["peak_mem_bytes"] = peak
            row["workspace_bytes"] = peak - mem_before
        else:
            row["peak_mem_bytes"] = None
            row["peak_host_mem_bytes"] = memory.peak() if self.host_peak else None
        return row

    def release(self) -> None:
        self.q = self.k = self.v = self.do = self.retained = self.l2 = self.markers = None
        if self.cuda:
            with contextlib.suppress(Exception):
                self.torch.cuda.synchronize()
            self.torch.cuda.empty_cache()


def load_backend(spec: AttentionSpec) -> tuple[AttentionSpec, Any, dict[str, Any]]:
    """The backend's function, the spec with its declared causal alignment, and what the row says of it.
    Raises BadReference / BackendUnavailable."""
    from . import backends

    fn = backends.load(spec.backend)
    info: dict[str, Any] = {}
    if spec.backend not in BUILTIN_BACKENDS:
        spec = spec.with_(align=getattr(fn, "causal_align", "top-left"))
        name = getattr(fn, "name", None)
        if name:
            info["label"] = str(name)  # what its rows are called (profctl compare pairs rows by label)
    info["causal_align"] = spec.causal_align
    backends.check(spec, fn)
    return spec, fn, info


def run_case(spec: AttentionSpec, *, warmup: int, iters: int, nvtx: bool, check: bool, flush_l2: bool,
             seed: int = 0, hooks: Hooks | None = None, budget: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run one case and return its result row (status ok / unsupported / oom / error, with the reason). `budget`:
    the point's memory estimate against what it may use (point_memory): a point over it is an oom row once its
    backend is known to run here (before anything is allocated), and any oom names them."""
    budget = dict(budget or {})
    refusal = budget.pop("refusal", None)
    row = _run_case(spec, warmup=warmup, iters=iters, nvtx=nvtx, check=check, flush_l2=flush_l2, seed=seed,
                    hooks=hooks, refusal=refusal)
    if row.get("status") == "oom" and refusal:
        return {**row, **budget}
    if row.get("status") == "oom" and budget.get("estimate_detail"):
        have = budget.get("available_bytes")
        row["reason"] = (f"{row.get('reason')} (its estimate: "
                         f"{memory.describe(budget['estimate_detail'], budget.get('estimate_bytes'))}"
                         + (f"; {memory.amount(have)} {budget.get('available_what')}" if have else "") + ")")
    return row


def point_memory(spec: AttentionSpec, *, check: bool, limit_gib: float | None) -> dict[str, Any]:
    """What a point needs (memory.attention_estimate) and what it may use: the GPU's free memory or the host's
    (memory.host_budget), and --memory-limit; `refusal` says why it cannot run, when it cannot."""
    need = memory.attention_estimate(spec, check=check)
    have = memory.host_budget(limit_gib) if spec.device != "cuda" else gpu_budget(limit_gib)
    out: dict[str, Any] = {"estimate_bytes": sum(need.values()), "estimate_detail": need}
    if have is not None:
        out.update(available_bytes=have.bytes, available_what=have.what)
    out["refusal"] = memory.refusal(need, have)
    return out


def gpu_budget(limit_gib: float | None) -> memory.Budget | None:
    """What a new allocation on the (current) GPU can get: its free memory, and --memory-limit."""
    import torch

    try:
        free, _ = torch.cuda.mem_get_info()
    except Exception:
        return None
    found = [memory.Budget(int(free), "free on the GPU")]
    if limit_gib is not None:
        found.append(memory.Budget(int(limit_gib * memory.GIB), "of --memory-limit"))
    return min(found, key=lambda b: b.bytes)


def _run_case(spec: AttentionSpec, *, warmup: int, iters: int, nvtx: bool, check: bool, flush_l2: bool,
              seed: int, hooks: Hooks | None, refusal: str | None = None) -> dict[str, Any]:
    from . import backends

    hooks = hooks or Hooks()
    c: Case | None = None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                spec, fn, info = load_backend(spec)
                if refusal:  # the backend runs here, the point does not fit: nothing allocated
                    return {"status": "oom", "reason": refusal, **info}
                c = Case(spec, fn, nv=Nvtx(nvtx, mirror=hooks.ranges()), hooks=hooks, seed=seed)
                o = c.first_call()
            except backends.BadReference as e:
                return {"status": "error", "reason": f"cannot load the backend: {e}"}
            except Exception as e:
                status, reason = backends.classify_failure(e, list(caught))
                return {"status": status, "reason": reason}
        row: dict[str, Any] = {"status": "ok", "reason": None, **info}
        if check:
            row.update(check_output(spec, o, *dequantized(c.q, c.k, c.v, c.descales)))
        del o
        if c.want_bwd and not c.differentiable():
            return {"status": "unsupported", **info,
                    "reason": f"{spec.label} is not differentiable: its output does not require grad, so it has "
                              "no backward pass (run --pass fwd)"}
        row.update(c.measure(warmup=warmup, iters=iters, flush_l2=flush_l2))
        report = getattr(fn, "row_fields", None)  # what a compiled backend measured apart (compile, block mask)
        if report is not None:
            row.update(report(spec))
        return row
    except Exception as e:
        status, reason = backends.classify_failure(e, [])
        if status == "unsupported":  # a refusal after the first call is still a failure of this run
            status = "error"
        if os.environ.get("PROFCTL_DEBUG"):
            traceback.print_exc()
        return {"status": status, "reason": reason}
    finally:
        if c is not None:
            c.release()


def check_output(spec: AttentionSpec, o: Any, q: Any, k: Any, v: Any) -> dict[str, Any]:
    """The output against the float64 reference (of the dequantized inputs, for fp8): relative error, tolerance
    and pass/fail."""
    shape = (spec.batch, spec.heads, spec.seqlen_q, spec.head_dim)
    if tuple(getattr(o, "shape", ())) != shape:
        return {"rel_error": None, "tolerance": TOLERANCE[spec.dtype], "check": "fail",
                "check_reason": f"output shape {tuple(getattr(o, 'shape', ()))} is not {shape}"}
    err = rel_error(o, reference(spec, q, k, v))
    ok = err <= TOLERANCE[spec.dtype] and math.isfinite(err)
    return {"rel_error": err, "tolerance": TOLERANCE[spec.dtype], "check": "pass" if ok else "fail"}


def _sticky_cuda_error(reason: str | None) -> bool:
    """Errors after which the CUDA context is unusable: the process must end and the parent starts a new one."""
    r = (reason or "").lower()
    return any(s in r for s in ("illegal memory access", "unspecified launch failure", "device-side assert",
                                "misaligned address", "illegal instruction", "cuda error: an illegal"))


# ---------------------------------------------------------------------------------------------------------- CLI
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m profctl.workloads.attention", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", "--backends", dest="backend", default="sdpa-flash",
                   help="comma list of backend names or path/file.py:fn / package.module:fn")
    p.add_argument("--batch", default="1")
    p.add_argument("--seqlen", default=None, help="sets both --seqlen-q and --seqlen-kv")
    p.add_argument("--seqlen-q", default=None)
    p.add_argument("--seqlen-kv", default=None, help="default: equal to seqlen-q")
    p.add_argument("--heads", default="16")
    p.add_argument("--kv-heads", default=None, help="default: equal to heads")
    p.add_argument("--head-dim", default="128")
    p.add_argument("--dtype", default="bf16", help="comma list of bf16, fp16, fp32, fp8 (e4m3, forward only)")
    p.add_argument("--causal", nargs="?", const="true", default="false",
                   help="flag, or a list such as 'false,true'")
    p.add_argument("--pass", dest="pass_", default="fwd", help="comma list of fwd, bwd, fwd+bwd")
    p.add_argument("--window", default=None, help="comma list of sliding-window sizes (keys) or none")
    p.add_argument("--docs", default=None, help="comma list: N equal documents, lengths joined by '+', or none")
    p.add_argument("--layout", default="bhsd", help="comma list of bhsd, bshd")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-nvtx", action="store_true", help="no NVTX ranges (to measure their cost)")
    p.add_argument("--no-check", action="store_true", help="skip the float64 reference check")
    p.add_argument("--flush-l2", action="store_true", help="zero a 256 MiB buffer before each iteration")
    p.add_argument("--memory-limit", type=float, default=None,
                   help="GiB: refuse points whose memory estimate is over it (default: the memory free)")
    p.add_argument("--jsonl", default=None, help="append start/result events here, one JSON object a line")
    p.add_argument("--serve", action="store_true",
                   help="stay up and run the batches of case indices given on stdin (workloads/serve.py)")
    p.add_argument("--requests", default=None,
                   help="with --serve: read the batches from this file (a FIFO its parent writes to) instead of stdin")
    p.add_argument("--skip", type=int, default=0, help="start at this case index (a parent resuming a sweep)")
    p.add_argument("--only", default=None,
                   help="run only these case indices, comma list (a parent spreading a sweep over workers)")
    p.add_argument("--exit-fast", action="store_true", help=EXIT_FAST_HELP)
    p.add_argument("--torch-trace", default=None,
                   help="record the measured iterations with torch.profiler into this trace (.json.gz)")
    p.add_argument("--torch-shapes", action="store_true", help="torch.profiler: record input shapes")
    p.add_argument("--torch-memory", action="store_true", help="torch.profiler: record memory allocations")
    p.add_argument("--torch-stacks", action="store_true", help="torch.profiler: record Python stacks")
    return p


def sweep_from_args(a: argparse.Namespace) -> AttentionSweep:
    """The sweep the command line describes (the same parser profctl uses on its side)."""
    return AttentionSweep.from_strings(
        backend=a.backend, batch=a.batch, seqlen=a.seqlen if a.seqlen_q is None else None, seqlen_q=a.seqlen_q,
        seqlen_kv=a.seqlen_kv, heads=a.heads, kv_heads=a.kv_heads, head_dim=a.head_dim, dtype=a.dtype,
        causal=a.causal, pass_=a.pass_, layout=a.layout, window=a.window, docs=a.docs, device=a.device,
        warmup=a.warmup, iters=a.iters, seed=a.seed, nvtx=not a.no_nvtx, check=not a.no_check, flush_l2=a.flush_l2,
        memory_limit_gib=a.memory_limit)


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    try:
        specs = sweep_from_args(a).specs()
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    keep_generated_code(a.jsonl, specs)
    hooks = make_hooks(a.torch_trace, device=a.device, shapes=a.torch_shapes, memory=a.torch_memory,
                       stacks=a.torch_stacks)
    try:
        if a.serve:
            from .serve import exit_now, get_ready, requests_of, serve

            ready = get_ready(a.device, T_MAIN)
            with requests_of(a.requests) as lines:
                rc = serve(lambda cases, emit: _run_all(a, specs, emit, hooks, only=set(cases)),
                             lambda: device_event(a.device), lines, ready=ready)
            hooks.close()
            exit_now(rc)  # the end of its input: no interpreter shutdown to wait for
        emit = jsonl_emitter(a.jsonl)
        emit(device_event(a.device))
        return finish(_run_all(a, specs, emit, hooks), hooks, fast=a.exit_fast)
    finally:
        hooks.close()


def keep_generated_code(jsonl: str | None, specs: list[AttentionSpec]) -> None:
    """A sweep with a compiled backend (flex) writes what torch.compile generates -- its Triton kernels' source,
    the source view's lines under ncu and nsys -- into the run directory (``inductor/``, beside the events file),
    so it outlives the compile cache; and each run compiles cold, so its compile time is the first user's. A
    TORCHINDUCTOR_CACHE_DIR of the user's own is kept."""
    if not jsonl or os.environ.get("TORCHINDUCTOR_CACHE_DIR") or \
            not any(sp.backend in ("flex", "flex-fa4") for sp in specs):
        return
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(os.path.dirname(os.path.abspath(jsonl)), "inductor")


def device_event(device: str) -> dict[str, Any]:
    """What the parent records of the device the cases ran on."""
    import torch

    if device == "cuda" and torch.cuda.is_available():
        return {"event": "device", "name": torch.cuda.get_device_name(0),
                "capability": list(torch.cuda.get_device_capability(0)), "torch": torch.__version__,
                "cuda": torch.version.cuda, "sm_count": torch.cuda.get_device_properties(0).multi_processor_count}
    return {"event": "device", "name": "cpu", "torch": torch.__version__, "threads": torch.get_num_threads()}


def _run_all(a: argparse.Namespace, specs: list[AttentionSpec], emit: Callable[[dict[str, Any]], None],
             hooks: Hooks, only: set[int] | None = None) -> int:
    """Exit status: 0 when at least one case ran, 1 when none did, 3 after a CUDA error that broke the context.
    `only`: these cases (a warm process's batch) instead of the command line's --skip/--only."""
    ran = 0
    skip = 0 if only is not None else a.skip
    if only is None and a.only:
        only = {int(x) for x in a.only.split(",") if x.strip()}
    for i, spec in enumerate(specs):
        if i < skip or (only is not None and i not in only):
            continue
        budget = point_memory(spec, check=not a.no_check, limit_gib=a.memory_limit)
        emit({"event": "start", "index": i, "spec": spec.to_dict(), "t": time.time(),
              "memory": {k: v for k, v in budget.items() if k != "refusal"}})
        faults.in_workload(spec)  # profctl's own tests (PROFCTL_FAULT)
        row = run_case(spec, warmup=a.warmup, iters=a.iters, nvtx=not a.no_nvtx, check=not a.no_check,
                       flush_l2=a.flush_l2, seed=a.seed, hooks=hooks, budget=budget)
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
            release_memory()  # an OOM or error must not leave its tensors to the next case
        ran += row["status"] == "ok"
    remaining = [i for i in range(skip, len(specs)) if only is None or i in only]
    return 0 if ran or not remaining else 1


if __name__ == "__main__":
    sys.exit(main())
