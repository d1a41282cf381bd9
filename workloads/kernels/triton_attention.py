"""profctl's own FlashAttention-2 in Triton: forward and backward, called exactly like
``torch.nn.functional.scaled_dot_product_attention``.

Why it exists: profctl compares attention kernels, and a kernel whose source we own and can change is the
control in those comparisons (what does one more pipeline stage, a larger tile, or the causal split buy?).

Design (FlashAttention-2):

* Forward: one program per (query block, batch x head). Q stays in registers; keys and values stream through
  in blocks of ``BLOCK_N`` with an online softmax in the log2 domain (``exp2``, with log2(e) folded into the
  scale). The key loop is split in two: the blocks every row of the query block sees completely run without
  any mask; only the blocks on the causal diagonal and the ragged key tail pay for masking. The log-sum-exp
  (log2 domain) is saved for the backward. Causal launches take the largest query blocks first.
* Backward: ``delta = rowsum(dO * O)`` in a small preprocess kernel, then two kernels, not one with atomics:
  ``dK/dV`` with one program per key block (looping over the query blocks, and over the query heads that
  share the kv head, so GQA sums in registers), and ``dQ`` with one program per query block. That recomputes
  ``QK^T`` and ``dO V^T`` once more (7 GEMMs against 5) but writes every gradient exactly once: no fp32 dQ
  accumulator, no atomic traffic through L2, and the result is deterministic. When a GQA/MQA launch would
  have too few programs to fill the GPU, the query heads of a group are split over several programs that
  write fp32 partial dK/dV, summed afterwards (still deterministic).
* Causal masks use a general diagonal offset: query ``i`` sees key ``j`` iff ``j <= i + offset``. Top-left
  (SDPA) is offset 0, bottom-right (FlashAttention >= 2.1) is ``seqlen_kv - seqlen_q``. Rows that see no key
  give 0 (and zero gradients), never NaN.
* fp32 inputs use IEEE-precision dots (not tf32): slower, but within 1e-4 of a float64 reference.
* Loads: streamed tiles go through 4-D TMA descriptors (host-side ``TensorDescriptor`` over the (batch, head,
  seq, dim) tensor, so any 16-byte-aligned strides work and the copy engine zero-fills the tails) where that
  measured faster on an H100 (forward and dK/dV at head dim 128: +20 % and +8 %), else pointer loads. No input
  is ever copied with ``.contiguous()``: every kernel takes all four strides of every tensor.

* FP8 (e4m3, forward only): FlashAttention-3's convention. The inputs are e4m3 tensors with one descale factor
  each (``q_descale``, ``k_descale``, ``v_descale``: ``x ~= x8 * x_descale``, workloads/fp8.py quantizes per tensor
  with ``descale = amax / 448``). ``q_descale * k_descale`` is folded into the softmax scale, P is rounded to e4m3
  (to nearest) for the P @ V dot and the row sums keep the unrounded P, and ``v_descale`` multiplies the
  accumulator once at the end; the output is bf16. FP8 wgmma on Hopper wants P @ V's B operand K-major, so V is
  read as V^T, keys contiguous (measured on an H200 with a plain FA2 forward: 576 TFLOP/s with V^T against 281
  without). :func:`prepare` lays V out that way once per input, outside the timed calls (the workload calls it
  before the first call); a call given a V that is not K-major makes that copy itself, inside the call (and the
  time). No backward: ``supports`` refuses ``--pass bwd``/``fwd+bwd`` with fp8 (FA3 has no FP8 backward either).

Measured on an H100 (triton 3.6): benchmarks/RESULTS.md, "Triton FlashAttention-2 (profctl's own kernel)".

Triton is imported lazily in spirit: importing this module without Triton works, calling it raises
:class:`TritonAttentionUnavailable`. Kernels are compiled for the GPU, or run by Triton's CPU interpreter when
``TRITON_INTERPRET=1`` is set before this module is first imported. The kernels themselves are in
workloads/kernels/triton_kernels.py; this module chooses their launch configurations, launches them and wraps them for
autograd.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from profctl.spec import dtype_refusal

from . import gluon_attention, gluon_ws_persistent
from . import gluon_fp8_attention as gluon_fp8
from . import triton_fp8_kernels as fp8_kernels
from . import triton_kernels as kernels
from .launch import descriptor as _descriptor
from .launch import launch as _launch
from .triton_configs import (  # and below, the tables under their old private names (tests, benchmarks read them)
    CONFIG_ENV,
    E4M3,
    KernelConfig,
    check_config,
    parse_configs,
)
from .triton_configs import LONG as _LONG  # noqa: F401
from .triton_configs import SHORT as _SHORT
from .triton_configs import SHORT_FP8 as _SHORT_FP8
from .triton_configs import TABLE as _TABLE  # noqa: F401
from .triton_configs import TABLE_FP8 as _TABLE_FP8  # noqa: F401
from .triton_configs import WS_GL as _WS_GL  # noqa: F401
from .triton_configs import autotune_enabled as _autotune_enabled
from .triton_configs import candidates as _candidates
from .triton_configs import seq_bucket as _seq_bucket
from .triton_kernels import IMPORT_ERROR as _TRITON_IMPORT_ERROR
from .triton_kernels import INTERPRET, triton

LOG2E = 1.4426950408889634
#: the compiled kernel of the last FP8 forward launch, for benchmarks (registers, spills, shared memory)
LAST_COMPILED: dict[str, Any] = {}


class TritonAttentionUnavailable(RuntimeError):
    """Triton attention cannot run here (no Triton, or no GPU and no interpreter). The message says
    'not supported' so profctl's failure classifier reports the point as unsupported, not as an error."""


# ---------------------------------------------------------------------------------------------------------
# launch configurations: KernelConfig, the tables and parse_configs live in triton_configs; the choice is here
# ---------------------------------------------------------------------------------------------------------
#: The forward's launch arguments that turn its Proton scopes on (load_q, load_k, load_v, qk, softmax, pv,
#: store): empty -- the kernel as benchmarked -- unless inside :func:`scoped`.
_SCOPED: dict[str, bool] = {}


@contextmanager
def scoped() -> Iterator[None]:
    """Launch the 16-bit forward with its steps in Proton scopes (``profctl proton --backend triton``): the
    ``SCOPES=True`` specialization of ``_fwd_kernel``, compiled under Proton's instrumentation. Outside this
    block the forward is launched exactly as before (no SCOPES argument at all). ImportError when Proton is
    not there."""
    kernels.enable_scopes()
    _SCOPED["SCOPES"] = True
    try:
        yield
    finally:
        _SCOPED.clear()


#: Tests and benchmarks can force a config per kernel ("fwd", "dkdv", "dq"); see :func:`use_configs`.
_FORCED: dict[str, KernelConfig] = {}
#: Configs chosen by timing, per (kernel, head_dim, dtype, causal, seqlen bucket, device index).
_TUNED: dict[tuple[Any, ...], KernelConfig] = {}


@contextmanager
def use_configs(**cfgs: KernelConfig) -> Iterator[None]:
    """Force launch configs, e.g. ``use_configs(fwd=KernelConfig(128, 64, 8, 3))``, for tests and tuning."""
    bad = set(cfgs) - {"fwd", "dkdv", "dq"}
    if bad:
        raise ValueError(f"unknown kernel(s) {sorted(bad)}; use fwd, dkdv, dq")
    old = dict(_FORCED)
    _FORCED.update(cfgs)
    try:
        yield
    finally:
        _FORCED.clear()
        _FORCED.update(old)


def _forced(kernel: str) -> KernelConfig | None:
    if kernel in _FORCED:
        return _FORCED[kernel]
    env = os.environ.get(CONFIG_ENV)
    return _parsed(env).get(kernel) if env else None


@functools.lru_cache(maxsize=8)
def _parsed(env: str) -> dict[str, KernelConfig]:
    """The forced configs of one ``PROFCTL_TRITON_CONFIG`` value, parsed once: every call reads it, and a parse took
    18 us on the CPU machine."""
    return parse_configs(env)


def _pick(kernel: str, head_dim: int, dtype: torch.dtype, causal: bool, seqlen: int, device: torch.device,
          launch: Callable[[KernelConfig], None]) -> KernelConfig:
    """The config for this case: forced, else cached, else the default (or the fastest, when tuning)."""
    forced = _forced(kernel)
    if forced is not None:
        return forced
    bucket = _seq_bucket(seqlen)
    key = (kernel, head_dim, dtype, causal, bucket, device.index)
    cfg = _TUNED.get(key)
    if cfg is not None:
        return cfg
    cands = _candidates(kernel, head_dim, dtype, causal, bucket)
    if len(cands) == 1 or INTERPRET or not _autotune_enabled():
        cfg = cands[0]
    else:
        from triton.testing import do_bench

        times = {}
        for c in cands:
            try:
                times[c] = do_bench(lambda c=c: launch(c), warmup=5, rep=20, return_mode="median")
            except Exception:  # a config over the shared-memory or register budget on this GPU
                continue
        cfg = min(times, key=lambda c: times[c]) if times else cands[0]
    _TUNED[key] = cfg
    return cfg


# ---------------------------------------------------------------------------------------------------------
# host side
# ---------------------------------------------------------------------------------------------------------
def _check_runnable(q: torch.Tensor) -> None:
    if triton is None:
        raise TritonAttentionUnavailable(
            f"triton attention is not supported here: Triton is not installed ({_TRITON_IMPORT_ERROR})")
    if q.device.type != "cuda" and not INTERPRET:
        raise TritonAttentionUnavailable(
            f"triton attention is not supported on device {q.device.type!r}: it needs a CUDA GPU, or "
            "TRITON_INTERPRET=1 set before profctl.workloads.kernels.triton_attention is first imported (CPU "
            "interpreter)")


try:  # host-side TMA descriptors (Triton >= 3.4); without them every tile goes through pointer loads
    from triton.tools.tensor_descriptor import TensorDescriptor
except Exception:
    TensorDescriptor = None


def _tma_ok(head_dim: int, *xs: torch.Tensor) -> bool:
    """Whether 4-D TMA descriptors can address these tensors: 16-bit or e4m3 data on a Hopper-or-newer GPU (or
    the interpreter), head_dim a power of two (no padded columns), the last dim contiguous, the other strides
    positive multiples of 16 bytes, 16-byte aligned bases. Anything else takes the pointer path."""
    if TensorDescriptor is None or head_dim != _block_d(head_dim):
        return False
    x0 = xs[0]
    if x0.dtype not in (torch.bfloat16, torch.float16) and (E4M3 is None or x0.dtype != E4M3):
        return False
    if x0.device.type == "cuda":
        if _device_info(x0.device)[0] < 9:
            return False
    elif not INTERPRET:
        return False
    for x in xs:  # plain loops: every call asks, and a generator a tensor costs more host time than the check
        st = x.stride()
        if st[-1] != 1 or x.data_ptr() % 16:
            return False
        size = x.element_size()
        for s_ in st[:-1]:
            if s_ <= 0 or (s_ * size) % 16:
                return False
    return True


def _cdiv(a: int, b: int) -> int:
    """a / b rounded up, on the host: ``triton.cdiv`` is a constexpr function in Triton >= 3.6 (3 us a call here)."""
    return -(-a // b)


def _desc(x: torch.Tensor, rows: int, head_dim: int) -> Any:
    return _descriptor(TensorDescriptor, x, list(x.shape), list(x.stride()), [1, 1, rows, head_dim])


def _block_d(head_dim: int) -> int:
    return max(16, 1 << (head_dim - 1).bit_length())


def _dot_prec(dtype: torch.dtype) -> str:
    return "ieee" if dtype == torch.float32 else "tf32"  # "tf32" is the default and means nothing for 16-bit


def _strides(x: torch.Tensor) -> tuple[int, ...]:
    return tuple(x.stride())


@functools.lru_cache(maxsize=16)
def _device_info(device: torch.device) -> tuple[int, int]:
    """(compute capability major, multiprocessors), read once per device: the launch path is host-bound at
    small sizes."""
    props = torch.cuda.get_device_properties(device)
    return int(props.major), int(props.multi_processor_count)


def _num_sms(device: torch.device) -> int:
    return _device_info(device)[1] if device.type == "cuda" else 4


def _forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, diag_off: int,
             sm_scale: float, window: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    batch, heads, seqlen_q, head_dim = q.shape
    kv_heads, seqlen_kv = k.shape[1], k.shape[2]
    block_d = _block_d(head_dim)
    seqlen = max(seqlen_q, seqlen_kv)
    out: list[torch.Tensor] = []  # (O, log-sum-exp), allocated by the launch that runs (a Gluon one makes its own):
    # every microsecond of host time a call is one a back-to-back loop of short calls waits for (triton_configs.WS_GL)

    def launch(cfg: KernelConfig) -> None:
        check_config(cfg, fp8=False)
        if cfg.gluon:
            block_m = 128 if cfg.ws else cfg.block_m  # the warp-specialized kernel: two warpgroups of 64 rows
            if not _SCOPED and gluon_attention.unsupported(q, k, v, causal, diag_off, sm_scale, window, block_m,
                                                           cfg.block_n) is None:
                out[:] = (gluon_ws_persistent.forward_wsp(q, k, v, causal, diag_off, sm_scale * LOG2E, cfg.block_n,
                                                          cfg.num_stages) if cfg.ws and cfg.persist else
                          gluon_attention.forward_ws(q, k, v, causal, diag_off, sm_scale * LOG2E, cfg.block_n,
                                                     cfg.num_stages) if cfg.ws else
                          gluon_attention.forward(q, k, v, causal, diag_off, sm_scale * LOG2E, cfg.block_m,
                                                  cfg.block_n, cfg.num_warps, cfg.num_stages))
                return
            cfg = _triton_fallback(head_dim, q.dtype, causal, seqlen)
        o = torch.empty_like(q)  # keeps q's memory layout (bhsd or a bshd view), like SDPA
        lse = torch.empty((batch, heads, seqlen_q), device=q.device, dtype=torch.float32)
        out[:] = (o, lse)
        tiles = (_cdiv(seqlen_q, cfg.block_m), batch * heads)
        persist = cfg.persist and not _SCOPED
        grid = (min(tiles[0] * tiles[1], cfg.persist * _num_sms(q.device)), 1) if persist else tiles
        tma = cfg.tma and _tma_ok(head_dim, q, k, v)
        descs = ((_desc(q, cfg.block_m, head_dim), _desc(k, cfg.block_n, head_dim), _desc(v, cfg.block_n, head_dim))
                 if tma else (None, None, None))
        _launch(
            kernels._fwd_kernel, grid,
            q, k, v, o, lse, *descs, *_strides(q), *_strides(k), *_strides(v), *_strides(o),
            heads, heads // kv_heads, seqlen_q, seqlen_kv, diag_off, sm_scale * LOG2E, batch * heads,
            HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
            CAUSAL=causal, REVERSE=causal, SCALE_POS=sm_scale > 0, DOT_PREC=_dot_prec(q.dtype), TMA=tma,
            PIPE=cfg.pipe, **cfg.options(), **_SCOPED,
            **({"PERSIST": True} if persist else {}), **({"WS": True} if cfg.ws and not cfg.pipe else {}),
            **({"LAZY": True} if cfg.lazy and sm_scale > 0 and not cfg.pipe and not window else {}),
            **({"WINDOW": window} if window else {}),
            **({"EMU": cfg.emu} if cfg.emu else {}))

    launch(_pick("fwd", head_dim, q.dtype, causal, seqlen, q.device, launch))
    return out[0], out[1]


def _triton_fallback(head_dim: int, dtype: torch.dtype, causal: bool, seqlen: int) -> KernelConfig:
    """The Triton config a Gluon config falls back to where the Gluon forward cannot run (another GPU, a shape or
    option it does not take, Proton scopes): the case's first Triton candidate."""
    cands = _candidates("fwd", head_dim, dtype, causal, _seq_bucket(seqlen))
    return next((c for c in cands if not c.gluon), _SHORT["fwd"])


def _kmajor(v: torch.Tensor) -> torch.Tensor:
    """V with the same values in a K-major layout: a (..., seqlen, dim) view of (..., dim, seqlen_pad) storage, keys
    contiguous and the rows padded to 16 keys, so V^T is a TMA-addressable tensor (16-byte strides)."""
    *lead, seqlen, dim = v.shape
    buf = torch.empty((*lead, dim, -(-seqlen // 16) * 16), dtype=v.dtype, device=v.device)
    vt = buf[..., :seqlen]
    vt.copy_(v.transpose(-1, -2))
    return vt.transpose(-1, -2)


def prepare(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The inputs as the calls want them, made once per input outside the timed calls (the workload calls it
    before the first call): FP8 V K-major (:func:`_kmajor`; the same values, another memory layout), anything
    else unchanged."""
    if E4M3 is not None and v.dtype == E4M3 and v.dim() >= 2 and v.stride(-2) != 1:
        return q, k, _kmajor(v)
    return q, k, v


def _descale(x: Any, name: str, device: torch.device) -> torch.Tensor:
    """One per-tensor descale factor as a one-element fp32 tensor on `device` (the kernel reads it: no sync)."""
    if x is None:
        return torch.ones(1, device=device, dtype=torch.float32)
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return torch.full((1,), float(x), device=device, dtype=torch.float32)
    if not isinstance(x, torch.Tensor) or x.numel() != 1:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise NotImplementedError(f"triton attention takes one {name} per tensor (a float or a one-element "
                                  f"tensor), not {shape}")
    if x.device != device:
        raise ValueError(f"{name} is on {x.device}, the inputs on {device}")
    return x.reshape(1).to(torch.float32)


def _forward_fp8(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, descales: tuple[torch.Tensor, ...],
                 causal: bool, diag_off: int, sm_scale: float) -> torch.Tensor:
    """The e4m3 forward (no log-sum-exp: no backward); bf16 output in q's memory layout."""
    batch, heads, seqlen_q, head_dim = q.shape
    kv_heads, seqlen_kv = k.shape[1], k.shape[2]
    if v.stride(-2) != 1:
        v = _kmajor(v)  # inside the call, so inside its time: the workload avoids it through prepare()
    vt = v.transpose(-1, -2)  # (batch, kv_heads, dim, seqlen), keys contiguous
    o = torch.empty_like(q, dtype=torch.bfloat16)
    block_d = max(32, _block_d(head_dim))  # FP8 dots are at least 32 deep
    tma_ok = block_d == head_dim and _tma_ok(head_dim, q, k, vt)

    out = [o]
    seqlen = max(seqlen_q, seqlen_kv)

    def launch(cfg: KernelConfig) -> None:
        check_config(cfg, fp8=True)
        if cfg.gluon:  # a Gluon FP8 forward (gluon_fp8_attention: warp-specialized with -ws, else one warpgroup a
            # 64-row block), else the first Triton config
            bm = 128 if cfg.ws else 64
            if (cfg.ws or cfg.block_m == 64) and gluon_fp8.unsupported(q, k, v, causal, diag_off, sm_scale,
                                                                      cfg.block_n, bm) is None:
                if cfg.ws:
                    out[0] = gluon_fp8.forward_ws(q, k, v, descales, causal, diag_off, sm_scale * LOG2E, cfg.block_n,
                                                  cfg.num_stages)
                else:
                    out[0] = gluon_fp8.forward(q, k, v, descales, causal, diag_off, sm_scale * LOG2E, cfg.block_n,
                                               cfg.num_stages, ahead=cfg.pipe)
                return
            cands = _candidates("fwd", head_dim, q.dtype, causal, _seq_bucket(seqlen))
            cfg = next((c for c in cands if not c.gluon), _SHORT_FP8)
        out[0] = o
        grid = (_cdiv(seqlen_q, cfg.block_m), batch * heads)
        tma = cfg.tma and tma_ok
        descs = ((_desc(q, cfg.block_m, head_dim), _desc(k, cfg.block_n, head_dim),
                  _descriptor(TensorDescriptor, vt, list(vt.shape), list(vt.stride()), [1, 1, head_dim, cfg.block_n]))
                 if tma else (None, None, None))
        LAST_COMPILED["fwd_fp8"] = _launch(
            fp8_kernels._fwd_fp8_kernel, grid,
            q, k, v, o, *descales, *descs, *_strides(q), *_strides(k), *_strides(v), *_strides(o),
            heads, heads // kv_heads, seqlen_q, seqlen_kv, diag_off, sm_scale * LOG2E,
            HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
            CAUSAL=causal, REVERSE=causal, SCALE_POS=sm_scale > 0, TMA=tma, PIPE=cfg.pipe,
            **({"EMU": cfg.emu} if cfg.emu else {}), **cfg.options())

    launch(_pick("fwd", head_dim, q.dtype, causal, seqlen, q.device, launch))
    return out[0]


def _backward(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
              lse: torch.Tensor, causal: bool, diag_off: int,
              sm_scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    batch, heads, seqlen_q, head_dim = q.shape
    kv_heads, seqlen_kv = k.shape[1], k.shape[2]
    group = heads // kv_heads
    block_d = _block_d(head_dim)
    prec = _dot_prec(q.dtype)

    delta = torch.empty_like(lse)
    delta_block = 64 if head_dim <= 128 else 32
    _launch(
        kernels._bwd_delta_kernel, (_cdiv(seqlen_q, delta_block), batch * heads),
        o, do, delta, *_strides(o), *_strides(do), heads, seqlen_q,
        HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_M=delta_block, num_warps=4)

    dq = torch.empty_like(q)
    dk = torch.empty_like(k)
    dv = torch.empty_like(v)
    sms = _num_sms(q.device)
    tma_ok = _tma_ok(head_dim, q, k, v, do)
    partial: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def launch_dkdv(cfg: KernelConfig) -> None:
        n_blocks = _cdiv(seqlen_kv, cfg.block_n)
        # GQA/MQA: split a group's query heads over programs until the launch fills the GPU twice over
        n_split = 1
        for s in range(1, group + 1):
            if group % s == 0:
                n_split = s
                if n_blocks * batch * kv_heads * s >= 2 * sms:
                    break
        if n_split == 1:
            dk_t, dv_t, sk, sv = dk, dv, (0, *_strides(dk)), (0, *_strides(dv))
        else:
            if n_split not in partial:
                shape = (n_split, batch, kv_heads, seqlen_kv, head_dim)
                partial[n_split] = (torch.empty(shape, device=q.device, dtype=torch.float32),
                                    torch.empty(shape, device=q.device, dtype=torch.float32))
            dk_t, dv_t = partial[n_split]
            sk, sv = _strides(dk_t), _strides(dv_t)
        tma = cfg.tma and tma_ok
        descs = (_desc(q, cfg.block_m, head_dim), _desc(do, cfg.block_m, head_dim)) if tma else (None, None)
        _launch(
            kernels._bwd_dkdv_kernel, (n_blocks, batch * kv_heads * n_split),
            q, k, v, do, lse, delta, dk_t, dv_t, *descs,
            *_strides(q), *_strides(k), *_strides(v), *_strides(do), *sk, *sv,
            heads, kv_heads, group, n_split, seqlen_q, seqlen_kv, diag_off, sm_scale * LOG2E, sm_scale,
            HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
            CAUSAL=causal, DOT_PREC=prec, TMA=tma, **cfg.options())
        if n_split > 1:
            dk.copy_(dk_t.sum(0))
            dv.copy_(dv_t.sum(0))

    def launch_dq(cfg: KernelConfig) -> None:
        tma = cfg.tma and tma_ok
        descs = (_desc(k, cfg.block_n, head_dim), _desc(v, cfg.block_n, head_dim)) if tma else (None, None)
        _launch(
            kernels._bwd_dq_kernel, (_cdiv(seqlen_q, cfg.block_m), batch * heads),
            q, k, v, do, lse, delta, dq, *descs,
            *_strides(q), *_strides(k), *_strides(v), *_strides(do), *_strides(dq),
            heads, group, seqlen_q, seqlen_kv, diag_off, sm_scale * LOG2E, sm_scale,
            HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
            CAUSAL=causal, REVERSE=causal, DOT_PREC=prec, TMA=tma, **cfg.options())

    seqlen = max(seqlen_q, seqlen_kv)
    launch_dkdv(_pick("dkdv", head_dim, q.dtype, causal, seqlen, q.device, launch_dkdv))
    launch_dq(_pick("dq", head_dim, q.dtype, causal, seqlen, q.device, launch_dq))
    return dq, dk, dv


class _FlashAttention(torch.autograd.Function):
    """Saves q, k, v, o and the log2-domain log-sum-exp; the backward recomputes P block by block."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, diag_off: int,
                sm_scale: float) -> torch.Tensor:
        o, lse = _forward(q, k, v, causal, diag_off, sm_scale)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.diag_off, ctx.sm_scale = causal, diag_off, sm_scale
        return o

    @staticmethod
    def backward(ctx: Any, do: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = _backward(do, q, k, v, o, lse, ctx.causal, ctx.diag_off, ctx.sm_scale)
        return dq, dk, dv, None, None, None


def _check_args(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, enable_gqa: bool) -> None:
    """SDPA's rules for (batch, heads, seqlen, head_dim) inputs, and this kernel's limits."""
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k and v must have one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.dtype not in (torch.bfloat16, torch.float16, torch.float32) and (E4M3 is None or q.dtype != E4M3):
        raise NotImplementedError(f"triton attention supports bf16, fp16, fp32 and float8_e4m3fn, not {q.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k and v must be on one device, got {q.device}, {k.device}, {v.device}")
    batch, heads, _, head_dim = q.shape
    if k.shape[0] != batch or v.shape[0] != batch:
        raise ValueError(f"batch sizes differ: q {batch}, k {k.shape[0]}, v {v.shape[0]}")
    if k.shape[1] != v.shape[1] or k.shape[2] != v.shape[2]:
        raise ValueError(f"k and v must have the same heads and seqlen, got {tuple(k.shape)} and {tuple(v.shape)}")
    if k.shape[3] != head_dim:
        raise ValueError(f"q and k head dims differ: {head_dim} and {k.shape[3]}")
    if v.shape[3] != head_dim:
        raise NotImplementedError(f"triton attention needs v's head dim ({v.shape[3]}) equal to q's ({head_dim})")
    if head_dim > 256:
        raise NotImplementedError(f"triton attention supports head dims up to 256, not {head_dim}")
    kv_heads = k.shape[1]
    if kv_heads != heads:
        if not enable_gqa:
            raise ValueError(f"q has {heads} heads and k/v {kv_heads}: pass enable_gqa=True for GQA/MQA "
                             "(as torch.nn.functional.scaled_dot_product_attention requires)")
        if heads % kv_heads:
            raise ValueError(f"number of heads in k/v ({kv_heads}) must divide the number in q ({heads})")


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None,
               dropout_p: float, is_causal: bool, scale: float | None, enable_gqa: bool,
               align: str, descales: tuple[Any, Any, Any] = (None, None, None), window: int | None = None
               ) -> torch.Tensor:
    if attn_mask is not None:
        raise NotImplementedError("triton attention does not support attn_mask (only None; use is_causal)")
    if dropout_p != 0.0:
        raise NotImplementedError(f"triton attention does not support dropout (dropout_p={dropout_p}, must be 0)")
    if not (q.dim() == k.dim() == v.dim() and q.dim() in (3, 4)):
        raise NotImplementedError(
            "triton attention supports (batch, heads, seqlen, head_dim) or (batch, seqlen, head_dim) inputs, "
            f"got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    if q.dim() == 3:
        return _attention(q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1), None, 0.0, is_causal, scale,
                          enable_gqa, align, descales, window).squeeze(1)
    _check_args(q, k, v, enable_gqa)
    fp8 = E4M3 is not None and q.dtype == E4M3
    if not fp8 and any(d is not None for d in descales):
        raise ValueError(f"q_descale, k_descale and v_descale are for float8_e4m3fn inputs, not {q.dtype}")
    scales = tuple(_descale(d, n, q.device) for d, n in zip(descales, ("q_descale", "k_descale", "v_descale"),
                                                             strict=True)) if fp8 else ()
    _check_runnable(q)
    batch, heads, seqlen_q, head_dim = q.shape
    sm_scale = float(scale) if scale is not None else 1.0 / math.sqrt(head_dim)
    seqlen_kv = k.shape[2]
    out_like = torch.empty_like(q, dtype=torch.bfloat16) if fp8 else q
    if seqlen_q == 0 or batch == 0 or heads == 0:
        return torch.empty_like(out_like)
    if seqlen_kv == 0:  # no key at all: every row sees nothing and gives 0, like FlashAttention
        return torch.zeros_like(out_like) if fp8 else torch.zeros_like(q) + 0.0 * (q.sum() + k.sum() + v.sum())
    diag_off = 0 if align == "top-left" else seqlen_kv - seqlen_q
    if window:
        if fp8:
            raise NotImplementedError("triton attention has no sliding window with float8_e4m3fn inputs")
        if torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v)):
            raise NotImplementedError("triton attention has no sliding window in its backward (forward only: call "
                                      "it under torch.no_grad())")
        return _forward(q, k, v, bool(is_causal), diag_off, sm_scale, int(window))[0]
    if fp8:
        return _forward_fp8(q, k, v, scales, bool(is_causal), diag_off, sm_scale)
    if not (torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)):
        return _forward(q, k, v, bool(is_causal), diag_off, sm_scale)[0]  # autograd's Function costs host time
    out: torch.Tensor = _FlashAttention.apply(q, k, v, bool(is_causal), diag_off, sm_scale)
    return out


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None = None,
              dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
              enable_gqa: bool = False, q_descale: Any = None, k_descale: Any = None,
              v_descale: Any = None, window: int | None = None) -> torch.Tensor:
    """Drop-in for ``F.scaled_dot_product_attention`` (top-left causal alignment, like SDPA).

    q (batch, heads, seqlen_q, head_dim); k, v (batch, kv_heads, seqlen_kv, head_dim), any strides; bf16, fp16
    or fp32; head_dim <= 256. attn_mask must be None and dropout_p 0 (NotImplementedError otherwise);
    kv_heads != heads needs enable_gqa=True (ValueError otherwise, like SDPA). float8_e4m3fn inputs take
    FlashAttention-3's per-tensor descale factors (positive floats or one-element tensors; 1 when left out), run
    the forward only and return bf16; :func:`prepare` makes V K-major ahead of the calls. `window` (forward only):
    a sliding window of that many keys up to each query's own (and after it when not causal); the key blocks
    outside it are skipped.
    """
    return _attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa, "top-left",
                      (q_descale, k_descale, v_descale), window)


def attention_bottom_right(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None = None,
                           dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                           enable_gqa: bool = False, q_descale: Any = None, k_descale: Any = None,
                           v_descale: Any = None, window: int | None = None) -> torch.Tensor:
    """As :func:`attention`, with FlashAttention's bottom-right causal alignment: query i sees keys
    j <= i + seqlen_kv - seqlen_q."""
    return _attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa, "bottom-right",
                      (q_descale, k_descale, v_descale), window)


attention.causal_align = "top-left"  # type: ignore[attr-defined]
attention.name = "triton"  # type: ignore[attr-defined]
attention_bottom_right.causal_align = "bottom-right"  # type: ignore[attr-defined]
attention_bottom_right.name = "triton"  # type: ignore[attr-defined]


def supports(spec: Any) -> str | None:
    """Why a case cannot run here (profctl checks it before allocating inputs), or None."""
    if triton is None:
        return f"needs Triton, which is not installed ({_TRITON_IMPORT_ERROR})"
    if spec.dtype == "fp8":
        why = dtype_refusal("triton", spec.dtype, spec.pass_)
        if why:
            return why.removeprefix("triton ")  # the row's reason says "triton <why>"
        if E4M3 is None:
            return f"needs torch.float8_e4m3fn for --dtype fp8 (torch >= 2.1; this is {torch.__version__})"
        if spec.device == "cuda" and torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            if (major, minor) < (8, 9):
                return f"runs FP8 on compute capability >= 8.9 (Ada, Hopper and newer), not sm_{major}{minor}"
    if spec.device != "cuda" and not INTERPRET:
        return "runs on CUDA (or on the CPU under TRITON_INTERPRET=1), not on cpu"
    if spec.head_dim > 256:
        return f"supports head dims up to 256, not {spec.head_dim}"
    return None


#: the dtypes the calls take (profctl refuses the others before allocating inputs; fp8 gets e4m3 tensors and descales)
DTYPES = ("bf16", "fp16", "fp32", "fp8")
for _fn in (attention, attention_bottom_right):
    _fn.supports = supports  # type: ignore[attr-defined]
    _fn.prepare = prepare  # type: ignore[attr-defined]
    _fn.dtypes = DTYPES  # type: ignore[attr-defined]
    _fn.masks = ("window",)  # type: ignore[attr-defined]  # forward only (profctl.spec.mask_refusal)
