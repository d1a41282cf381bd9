"""The runner's entry: :func:`run_model_case` runs one point (mode, batch, context length) and returns its row,
never raising for a failure of the point itself; :func:`summarize` prints rows for scripts."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from profctl import memory
from profctl.spec import MODES

from ..results import one_line, out_of_memory, timing_stats
from .arithmetic import OutOfMemoryBudget, estimate_bytes, mfu, model_flops, param_count
from .marks import Ranges, TeeRanges
from .net import AttnFn, KVCache, build_model, clear_masks, eager_attention, make_tokens, resolve_dtype
from .part_timer import PartTimer
from .presets import ModelConfig
from .steps import decode_step, make_optimizer, prefill, train_step


def _attention_kind(attn_fn: AttnFn) -> str:
    return "eager" if attn_fn is eager_attention else "flash"


def _hook(hooks: Any, name: str) -> None:
    fn = getattr(hooks, name, None)
    if fn is not None:
        fn()


def run_model_case(cfg: ModelConfig, *, mode: str, batch: int, seqlen: int, dtype: str | torch.dtype | None = None,
                   device: str | torch.device = "cuda", attn_fn: AttnFn = F.scaled_dot_product_attention,
                   warmup: int = 2, iters: int = 5, seed: int = 0, ranges: Ranges | None = None,
                   part_timing: bool = False, memory_limit_gib: float | None = None,
                   attention_memory: str | None = None, master_fp32: bool = False, compile_model: bool = False,
                   peak_tflops: float | None = None, hooks: Any = None) -> dict[str, Any]:
    """Run one point and return its row; never raises for a failure of the point itself.

    mode train: one AdamW step per iteration on (batch, seqlen) random tokens. prefill: forward over a
    (batch, seqlen) prompt into a KV cache of seqlen positions. decode: one token per sequence against a KV
    cache holding ``seqlen`` positions of random K/V (not a real prefill: that would cost O(seqlen^2) memory
    with eager attention; values do not change the work); every iteration writes position seqlen and attends
    to seqlen+1 keys, the position is reset (not advanced) so every iteration does the same work.

    ``warmup`` iterations run first (allocator, cuBLAS/cuDNN autotuning, torch.compile); then ``iters``
    iterations each timed between CUDA events (perf_counter on CPU), read after one synchronize.
    ``attention_memory`` ("flash" | "eager" | "math") tells the memory estimate how attn_fn behaves
    (default: "eager" for eager_attention, else "flash"). ``memory_limit_gib`` refuses a point whose
    estimate exceeds it (status oom, nothing allocated) and on CUDA caps the caching allocator at that size
    for this point; a real CUDA OOM becomes status oom too. ``part_timing`` adds per-part ms and attention's
    share of the step (PartTimer; off by default). Parts are timed in ``iters`` steps of their own between the
    warm-up and the measured steps (still inside the warm-up phase, so no profiler sees them): the timer's host
    cost per range (a third or more of a host-bound decode step on the H100) never reaches the measured step times,
    and ``part_timing_cost`` says what it was. ``hooks`` (optional methods
    ``warmup_begin()``, ``measure_begin()``, ``iteration_end()``, ``measure_end()``) let a profiler bracket the
    warm-up and the measured iterations (NVTX phases, cudaProfilerStart/Stop, torch.profiler).
    """
    dev = torch.device(device)
    row: dict[str, Any] = {"status": "ok", "reason": None, "model": cfg.name, "mode": mode, "batch": batch,
                           "seqlen": seqlen, "device": str(dev), "warmup": warmup, "iters": iters, "seed": seed,
                           "master_fp32": master_fp32, "compiled": compile_model, "config": cfg.to_dict()}
    checked = _check_point(cfg, row, mode, batch, seqlen, dtype, dev, master_fp32, iters, warmup)
    if isinstance(checked, dict):
        return checked
    dev, dt = checked
    row["dtype"] = str(dt).replace("torch.", "")
    fl = model_flops(cfg, mode, batch, seqlen)
    row.update(model_flops=fl["total"], matmul_flops=fl["matmul"], attn_flops=fl["attention"],
               tokens_per_step=fl["tokens"], params=param_count(cfg))
    kind = attention_memory or _attention_kind(attn_fn)
    est, est_parts = estimate_bytes(cfg, batch, seqlen, mode, dt, kind, master_fp32=master_fp32, detail=True)
    row["estimate_bytes"] = est
    row["estimate_detail"] = est_parts
    st = _Point(cfg=cfg, mode=mode, batch=batch, seqlen=seqlen, dev=dev, dt=dt, seed=seed, attn_fn=attn_fn)
    try:
        st.cap_memory(memory_limit_gib, est, est_parts, row)
        timer = PartTimer(dev) if part_timing else None
        st.rng = ranges
        if timer is not None:
            st.part_rng = timer if ranges is None else TeeRanges(ranges, timer)
        one = st.build(compile_model=compile_model, master_fp32=master_fp32)
        times, part_times = st.time(one, warmup=warmup, iters=iters, timer=timer, hooks=hooks, row=row)
        _fill_row(row, st, fl, times, timer, peak_tflops, part_times)
        return row
    except OutOfMemoryBudget as e:
        return {**row, "status": "oom", "reason": f"refused before allocating: {e}"}
    except torch.cuda.OutOfMemoryError as e:
        return {**row, "status": "oom", "reason": one_line(f"{type(e).__name__}: {e}")}
    except Exception as e:
        msg = one_line(f"{type(e).__name__}: {e}")
        status = "oom" if out_of_memory(e) else (
            "unsupported" if isinstance(e, NotImplementedError) or "No available kernel" in msg else "error")
        return {**row, "status": status, "reason": msg}
    finally:
        st.release()


def _check_point(cfg: ModelConfig, row: dict[str, Any], mode: str, batch: int, seqlen: int,
                 dtype: str | torch.dtype | None, dev: torch.device, master_fp32: bool, iters: int,
                 warmup: int) -> tuple[torch.device, torch.dtype] | dict[str, Any]:
    """(device, dtype) to run with, or the row of a point that cannot run (error / unsupported)."""
    try:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if iters <= 0 or warmup < 0 or batch <= 0 or seqlen <= 0:
            raise ValueError("iters, batch and seqlen must be positive and warmup >= 0")
        if dev.type == "cuda" and not torch.cuda.is_available():
            return {**row, "status": "unsupported", "reason": "no CUDA device is available"}
        if dev.type == "cuda" and dev.index is None:  # the allocator cap needs an indexed device
            dev = torch.device("cuda", torch.cuda.current_device())
        dt = resolve_dtype(dtype, dev)
        if master_fp32 and (mode != "train" or dt == torch.float32):
            raise ValueError("master_fp32 applies to train mode with a bf16/fp16 compute dtype")
        if cfg.positions == "learned" and seqlen + (mode == "decode") > cfg.max_seqlen:
            return {**row, "status": "unsupported",
                    "reason": f"{cfg.name} has {cfg.max_seqlen} learned positions; seqlen {seqlen} needs "
                              f"max_seqlen >= {seqlen + (mode == 'decode')}"}
    except ValueError as e:
        return {**row, "status": "error", "reason": one_line(str(e))}
    return dev, dt


@dataclass
class _Point:
    """What one point holds while it runs (the model, its optimizer, the KV cache), and its steps."""

    cfg: ModelConfig
    mode: str
    batch: int
    seqlen: int
    dev: torch.device
    dt: torch.dtype
    seed: int
    attn_fn: AttnFn
    model: Any = None
    opt: Any = None
    cache: Any = None
    tensors: list[Any] = dataclasses.field(default_factory=list)
    losses: list[torch.Tensor] = dataclasses.field(default_factory=list)
    rng: Ranges | None = None  # what the step's ranges go to now (read at every call)
    part_rng: Ranges | None = None  # the same with the PartTimer, for the part-timed steps
    capped: bool = False
    first_loss_at: int = 0
    host_peak: bool = False  # the process's peak resident memory was reset before the measured steps

    @property
    def cuda(self) -> bool:
        return self.dev.type == "cuda"

    def cap_memory(self, limit_gib: float | None, est: int, est_parts: dict[str, int], row: dict[str, Any]) -> None:
        """Refuse a point whose estimate exceeds the cap (nothing allocated yet); on CUDA cap the allocator."""
        if limit_gib is not None:
            cap = int(limit_gib * 2**30)
            row["memory_limit_bytes"] = cap
            if est > cap:
                raise OutOfMemoryBudget(est, cap, est_parts)
            if self.cuda:
                total = torch.cuda.get_device_properties(self.dev).total_memory
                torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total), self.dev)
                self.capped = True
        if self.cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.dev)

    def build(self, *, compile_model: bool, master_fp32: bool) -> Callable[[], Any]:
        """The model, its inputs and state for the mode; the function that runs one step (with ``self.rng`` as
        it is when the step runs, so the part-timed steps and the measured ones share one model)."""
        cfg, dev, dt, seed, attn_fn = self.cfg, self.dev, self.dt, self.seed, self.attn_fn
        self.model = model = build_model(cfg, device=dev, dtype=torch.float32 if master_fp32 else dt, seed=seed)
        fwd: Callable[..., torch.Tensor] | None = None
        if compile_model:
            if self.rng is not None or self.part_rng is not None:
                raise ValueError("compile_model runs without ranges/part timing (they would split the graph)")
            fwd = torch.compile(model, dynamic=False)
        if self.mode == "train":
            model.train()
            self.opt = opt = make_optimizer(model)
            idx, tgt = make_tokens(cfg, self.batch, self.seqlen, device=dev, seed=seed)
            self.tensors += [idx, tgt]
            autocast_dtype = dt if master_fp32 else None
            return lambda: self.losses.append(train_step(model, opt, idx, tgt, attn_fn=attn_fn, ranges=self.rng,
                                                         autocast_dtype=autocast_dtype, forward=fwd))
        model.eval()
        if self.mode == "prefill":
            idx, _ = make_tokens(cfg, self.batch, self.seqlen, device=dev, seed=seed)
            self.cache = cache = KVCache.allocate(cfg, self.batch, self.seqlen, dev, dt)
            self.tensors.append(idx)
            return lambda: prefill(model, idx, cache, attn_fn=attn_fn, ranges=self.rng, forward=fwd)
        idx, _ = make_tokens(cfg, self.batch, 1, device=dev, seed=seed)
        self.cache = cache = KVCache.allocate(cfg, self.batch, self.seqlen + 1, dev, dt)
        g = torch.Generator(device=dev).manual_seed(seed + 7)
        cache.k.normal_(generator=g)
        cache.v.normal_(generator=g)
        self.tensors.append(idx)
        pos = self.seqlen
        return lambda: decode_step(model, idx, cache, pos, attn_fn=attn_fn, ranges=self.rng, forward=fwd)

    def time(self, one: Callable[[], Any], *, warmup: int, iters: int, timer: PartTimer | None, hooks: Any,
             row: dict[str, Any]) -> tuple[list[float], list[float] | None]:
        """Warm-up steps; with a timer, `iters` part-timed steps (still in the warm-up phase); then `iters`
        measured steps without it. The ms of each measured step and of each part-timed one, each between CUDA
        events (perf_counter on CPU)."""
        cuda, dev = self.cuda, self.dev
        _hook(hooks, "warmup_begin")
        for _ in range(warmup):
            one()
        part_times = None
        if timer is not None:
            base, self.rng = self.rng, self.part_rng
            try:
                timer.reset()
                part_times = self._steps(one, iters)
            finally:
                self.rng = base
        if cuda:
            torch.cuda.synchronize(dev)
            row["static_bytes"] = int(torch.cuda.memory_allocated(dev))
            torch.cuda.reset_peak_memory_stats(dev)
        else:
            self.host_peak = memory.reset_peak()  # the peak resident memory of the measured steps
        self.first_loss_at = len(self.losses)
        _hook(hooks, "measure_begin")
        t0 = time.perf_counter()
        times = self._steps(one, iters, after=lambda: _hook(hooks, "iteration_end"))
        row["wall_s"] = time.perf_counter() - t0
        _hook(hooks, "measure_end")
        return times, part_times

    def _steps(self, one: Callable[[], Any], iters: int, after: Callable[[], None] | None = None) -> list[float]:
        """`iters` steps, each between CUDA events (perf_counter on CPU), read after one synchronize: their ms."""
        cuda, dev = self.cuda, self.dev
        marks: list[Any] = []

        def stamp() -> None:
            if cuda:
                e = torch.cuda.Event(enable_timing=True)
                e.record()
                marks.append(e)
            else:
                marks.append(time.perf_counter())

        stamp()
        for _ in range(iters):
            one()
            stamp()
            if after is not None:
                after()
        if cuda:
            torch.cuda.synchronize(dev)
            return [marks[i].elapsed_time(marks[i + 1]) for i in range(iters)]
        return [(marks[i + 1] - marks[i]) * 1e3 for i in range(iters)]

    def release(self) -> None:
        self.model = self.opt = self.cache = None
        self.tensors.clear()
        clear_masks()
        if self.cuda:
            with contextlib.suppress(Exception):
                torch.cuda.synchronize(self.dev)
            gc.collect()
            torch.cuda.empty_cache()
            if self.capped:
                torch.cuda.set_per_process_memory_fraction(1.0, self.dev)


def _fill_row(row: dict[str, Any], st: _Point, fl: dict[str, int], times: list[float], timer: PartTimer | None,
              peak_tflops: float | None, part_times: list[float] | None = None) -> None:
    """Times, throughput, MFU, losses, memory and the per-part split into the row. The split comes from the
    part-timed steps, and shares are of their own mean step time (parts are means too)."""
    mode, batch, seqlen, dev = st.mode, st.batch, st.seqlen, st.dev
    row["times_ms"] = times
    row.update(timing_stats(times))
    sec = row["median_ms"] / 1e3
    row["tokens_per_s"] = fl["tokens"] / sec
    row["samples_per_s"] = batch / sec if mode != "decode" else None
    row["tflops"] = fl["total"] / sec / 1e12
    if peak_tflops:
        row["peak_tflops"] = peak_tflops
        row["mfu"] = mfu(fl["total"], sec, peak_tflops)
    if st.losses:
        row["loss_first"] = float(st.losses[0].float().item())
        row["loss_first_measured"] = float(st.losses[st.first_loss_at].float().item())
        row["loss_last"] = float(st.losses[-1].float().item())
    if st.cuda:
        peak = int(torch.cuda.max_memory_allocated(dev))
        row["peak_mem_allocated_bytes"] = peak
        row["peak_mem_reserved_bytes"] = int(torch.cuda.max_memory_reserved(dev))
        tok_held = batch * (seqlen + 1 if mode == "decode" else seqlen)
        row["mem_per_token_bytes"] = (peak - row["static_bytes"]) / tok_held
    else:
        row["peak_mem_allocated_bytes"] = row["peak_mem_reserved_bytes"] = row["mem_per_token_bytes"] = None
        row["peak_host_mem_bytes"] = memory.peak() if st.host_peak else None
    if timer is None or not part_times:
        return
    parts = timer.results(len(part_times))
    row["parts_ms"] = parts
    row["part_events_per_step"] = timer.events / len(part_times)
    step = statistics.fmean(part_times)
    row["part_step_ms"] = step
    measured = statistics.fmean(times)
    row["part_timing_cost"] = step / measured - 1 if measured > 0 else None
    core = parts.get("attn.core", 0.0)
    block = core + parts.get("attn.qkv", 0.0) + parts.get("attn.out", 0.0)
    row["attn_share"] = core / step if step > 0 else None
    row["attn_block_share"] = block / step if step > 0 else None
    if mode == "train":  # the seeds' forward / backward / total per step (mean over the iterations)
        row["backward_ms"] = parts.get("backward", 0.0)
        row["optimizer_ms"] = parts.get("optimizer", 0.0)
        row["forward_ms"] = step - row["backward_ms"] - row["optimizer_ms"]


def summarize(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One text line per row (for scripts)."""
    out = []
    for r in rows:
        head = f"{r['model']} {r['mode']} b{r['batch']} s{r['seqlen']}"
        if r["status"] != "ok":
            out.append(f"{head}: {r['status']}: {r['reason']}")
            continue
        mf = f" MFU {100 * r['mfu']:.1f}%" if r.get("mfu") is not None else ""
        out.append(f"{head}: {r['median_ms']:.3f} ms, {r['tokens_per_s']:.0f} tok/s{mf}")
    return out
