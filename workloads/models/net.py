"""The network: a GPT-2- or Llama-2-shaped decoder-only transformer (:class:`Transformer`) with a swappable
attention call, its KV cache, the eager attention baseline, and how a model and its tokens are made
(:func:`build_model`, :func:`make_tokens`)."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from .marks import Ranges, run_part
from .presets import ModelConfig

DTYPES: dict[str, torch.dtype] = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}

AttnFn = Callable[..., torch.Tensor]


# ================================================================================================ attention
_MASKS: dict[tuple[int, int, str], torch.Tensor] = {}
_MASKS_LOCK = threading.Lock()


def eager_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: Any = None,
                    dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                    enable_gqa: bool = False) -> torch.Tensor:
    """The "standard attention" baseline: scores = q k^T * scale materialised (batch*heads*sq*skv), top-left
    causal mask, softmax, probabilities @ v. GQA by repeat_interleave of k/v. Same signature and result as
    F.scaled_dot_product_attention (without attn_mask or dropout)."""
    if attn_mask is not None or dropout_p:
        raise NotImplementedError("eager_attention supports neither attn_mask nor dropout")
    hq, hkv = query.shape[-3], key.shape[-3]
    if hq != hkv:
        if not enable_gqa or hq % hkv:
            raise ValueError(f"{hq} query heads against {hkv} kv heads needs enable_gqa and a multiple")
        key = key.repeat_interleave(hq // hkv, dim=-3)
        value = value.repeat_interleave(hq // hkv, dim=-3)
    scale = query.shape[-1] ** -0.5 if scale is None else scale
    s = torch.matmul(query, key.transpose(-2, -1)).mul_(scale)  # in place: matmul's backward needs q, k only
    if is_causal:
        sq, skv = s.shape[-2], s.shape[-1]
        k_ = (sq, skv, str(s.device))
        with _MASKS_LOCK:
            m = _MASKS.get(k_)
            if m is None:
                if len(_MASKS) >= 2:  # a 32K x 32K mask is 1 GiB: keep only the last two shapes
                    _MASKS.pop(next(iter(_MASKS)))
                m = _MASKS[k_] = torch.ones(sq, skv, dtype=torch.bool, device=s.device).triu(1)
        s.masked_fill_(m, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.matmul(p, value)


def clear_masks() -> None:
    """Drop eager_attention's cached causal masks (a runner frees them with the point that made them)."""
    with _MASKS_LOCK:
        _MASKS.clear()


# ================================================================================================ model
@dataclass
class KVCache:
    """Per-layer K and V, each (layers, batch, kv_heads, max_len, head_dim): ``k[l, :, :, :n]`` is the
    (batch, kv_heads, n, head_dim) view SDPA takes, last dimension contiguous."""

    k: torch.Tensor
    v: torch.Tensor

    @classmethod
    def allocate(cls, cfg: ModelConfig, batch: int, max_len: int, device: str | torch.device,
                 dtype: torch.dtype) -> KVCache:
        shape = (cfg.layers, batch, cfg.kv_heads, max_len, cfg.head_dim)
        return cls(torch.zeros(shape, device=device, dtype=dtype), torch.zeros(shape, device=device, dtype=dtype))

    @property
    def max_len(self) -> int:
        return int(self.k.shape[3])

    def nbytes(self) -> int:
        return int(self.k.numel() * self.k.element_size() * 2)


class _Block(nn.Module):
    def __init__(self, cfg: ModelConfig, dtype: torch.dtype) -> None:
        super().__init__()
        d, hd = cfg.d_model, cfg.head_dim
        self.cfg = cfg
        self.norm1_w = nn.Parameter(torch.empty(d, dtype=dtype))
        self.norm2_w = nn.Parameter(torch.empty(d, dtype=dtype))
        if cfg.norm == "layernorm":
            self.norm1_b: nn.Parameter | None = nn.Parameter(torch.empty(d, dtype=dtype))
            self.norm2_b: nn.Parameter | None = nn.Parameter(torch.empty(d, dtype=dtype))
        else:
            self.norm1_b = self.norm2_b = None
        # one matmul for q, k and v; one for gate and up (SwiGLU)
        self.qkv = nn.Linear(d, (cfg.heads + 2 * cfg.kv_heads) * hd, bias=cfg.bias, dtype=dtype)
        self.out = nn.Linear(cfg.heads * hd, d, bias=cfg.bias, dtype=dtype)
        n_in = 2 * cfg.mlp_hidden if cfg.mlp == "swiglu" else cfg.mlp_hidden
        self.fc_in = nn.Linear(d, n_in, bias=cfg.bias, dtype=dtype)
        self.fc_out = nn.Linear(cfg.mlp_hidden, d, bias=cfg.bias, dtype=dtype)

    def norm(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        if self.cfg.norm == "layernorm":
            return F.layer_norm(x, (x.shape[-1],), w, b, self.cfg.norm_eps)
        return F.rms_norm(x, (x.shape[-1],), w, self.cfg.norm_eps)

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc_in(x)
        if self.cfg.mlp == "swiglu":
            gate, up = h.chunk(2, dim=-1)
            h = F.silu(gate) * up
        else:
            h = F.gelu(h, approximate="tanh")
        return self.fc_out(h)

    def _qkv(self, xn: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None,
             start_pos: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One matmul, split (not sliced: split's backward is one cat) into (b, h, s, hd) views; rotary on q
        and k together."""
        cfg = self.cfg
        b, s, _ = xn.shape
        h, kv, hd = cfg.heads, cfg.kv_heads, cfg.head_dim
        t = self.qkv(xn).view(b, s, h + 2 * kv, hd)
        if rope is not None:
            qk, v = t.split([h + kv, kv], dim=2)
            cos, sin = rope[0][start_pos:start_pos + s], rope[1][start_pos:start_pos + s]
            if cos.dtype != t.dtype:  # autocast: the tables follow the fp32 residual, the matmul is bf16
                cos, sin = cos.to(t.dtype), sin.to(t.dtype)
            qk = _rope(qk, cos, sin)
            q, k = qk.split([h, kv], dim=2)
        else:
            q, k, v = t.split([h, kv, kv], dim=2)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def _out(self, o: torch.Tensor) -> torch.Tensor:
        b, _, s, _ = o.shape
        return self.out(o.transpose(1, 2).reshape(b, s, -1))

    def run(self, x: torch.Tensor, li: int, *, attn_fn: AttnFn, ranges: Ranges | None,
            rope: tuple[torch.Tensor, torch.Tensor] | None, cache: KVCache | None, start_pos: int) -> torch.Tensor:
        """One pre-norm block: x + attn(norm(x)), then + mlp(norm(.)); K/V into ``cache`` layer ``li``."""
        cfg, r = self.cfg, ranges
        end = start_pos + x.shape[1]
        n1 = (self.norm1_w,) if self.norm1_b is None else (self.norm1_w, self.norm1_b)
        n2 = (self.norm2_w,) if self.norm2_b is None else (self.norm2_w, self.norm2_b)
        xn = run_part(r, "norm", self.norm, x, *n1)
        q, k, v = run_part(r, "attn.qkv", self._qkv, xn, rope=rope, start_pos=start_pos)
        causal = True
        if cache is not None:
            with torch.no_grad():
                cache.k[li, :, :, start_pos:end].copy_(k)
                cache.v[li, :, :, start_pos:end].copy_(v)
            if start_pos > 0:  # decode: the new query against every cached position, itself included
                k, v = cache.k[li, :, :, :end], cache.v[li, :, :, :end]
                causal = False
        o = run_part(r, "attn.core", attn_fn, q, k, v, is_causal=causal, scale=cfg.head_dim ** -0.5,
                  enable_gqa=cfg.heads != cfg.kv_heads)
        x = x + run_part(r, "attn.out", self._out, o)
        xn = run_part(r, "norm", self.norm, x, *n2)
        return x + run_part(r, "mlp", self.mlp, xn)


def _swap_halves(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return torch.cat((x[..., h:], x[..., :h]), dim=-1)


class _Rope(torch.autograd.Function):
    """Rotary embedding as one autograd node: out = x*cos + swap(x)*sin_signed, three kernels each way.

    rotate_half(x)*sin (Hugging Face's Llama convention) equals swap_halves(x)*sin_signed with sin_signed =
    (-sin, sin) over the two halves; swapping halves is its own transpose, so dx = g*cos + swap(g*sin_signed).
    Autograd over the textbook formula runs neg, cat, two muls and an add forward and more backward, on the
    strided q/k view: measured 1.1 ms per layer forward on the H100 for Llama-7B at 2 x 4096 tokens.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(cos, sin_signed)
        return torch.addcmul(x * cos, _swap_halves(x), sin_signed)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        cos, sin_signed = ctx.saved_tensors
        return torch.addcmul(_swap_halves(g * sin_signed), g, cos), None, None


#: "function": rotary as the _Rope autograd node (default); "autograd": the textbook formula through autograd
#: (kept to measure the difference: benchmarks/model_gpu.py).
ROPE_IMPL = "function"


def _rope(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
    """Rotary embedding, rotate-half convention (as Hugging Face's Llama): x*cos + rotate_half(x)*sin."""
    if ROPE_IMPL == "function":
        return cast(torch.Tensor, _Rope.apply(x, cos, sin_signed))
    return x * cos + _swap_halves(x) * sin_signed


class Transformer(nn.Module):
    """A decoder-only transformer in (batch, seq, d_model) with pre-norm blocks.

    q/k/v come out of one fused matmul as (batch, seq, heads, head_dim) and are handed to attn_fn as
    (batch, heads, seq, head_dim) transposed views (no copy: SDPA's flash and cuDNN kernels read that layout).
    """

    def __init__(self, cfg: ModelConfig, dtype: torch.dtype) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.tok_emb = nn.Parameter(torch.empty(cfg.vocab, d, dtype=dtype))
        self.pos_emb = (nn.Parameter(torch.empty(cfg.max_seqlen, d, dtype=dtype))
                        if cfg.positions == "learned" else None)
        self.blocks = nn.ModuleList(_Block(cfg, dtype) for _ in range(cfg.layers))
        self.normf_w = nn.Parameter(torch.empty(d, dtype=dtype))
        self.normf_b = nn.Parameter(torch.empty(d, dtype=dtype)) if cfg.norm == "layernorm" else None
        self.lm_head = None if cfg.tied_embeddings else nn.Parameter(torch.empty(cfg.vocab, d, dtype=dtype))
        self._rope_cache: dict[tuple[str, torch.dtype], tuple[torch.Tensor, torch.Tensor]] = {}

    # -------------------------------------------------------------------------------------------- init
    @torch.no_grad()
    def init_weights(self, seed: int) -> None:
        """Deterministic random weights drawn on the parameters' own device: N(0, 0.02), the residual
        projections N(0, 0.02/sqrt(2*layers)) (GPT-2's scheme), norm weights 1, biases 0."""
        dev = self.tok_emb.device
        g = torch.Generator(device=dev).manual_seed(seed)
        resid_std = 0.02 / math.sqrt(2 * self.cfg.layers)
        for name, p in self.named_parameters():
            if name.endswith("norm1_w") or name.endswith("norm2_w") or name == "normf_w":
                p.fill_(1.0)
            elif name.endswith("_b") or name.endswith(".bias"):
                p.zero_()
            elif name.endswith("out.weight") or name.endswith("fc_out.weight"):
                p.normal_(0.0, resid_std, generator=g)
            else:
                p.normal_(0.0, 0.02, generator=g)

    def _rope_tables(self, end: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and signed sin (see _Rope), (n, 1, head_dim) with n >= end, computed in fp32 once per device and
        dtype."""
        key = (str(device), dtype)
        hit = self._rope_cache.get(key)
        if hit is None or hit[0].shape[0] < end:
            n = max(end, self.cfg.max_seqlen)
            hd = self.cfg.head_dim
            inv = 1.0 / (self.cfg.rope_theta ** (torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd))
            ang = torch.outer(torch.arange(n, device=device, dtype=torch.float32), inv)
            cos = torch.cat((ang.cos(), ang.cos()), dim=-1)  # (n, hd)
            sin_signed = torch.cat((-ang.sin(), ang.sin()), dim=-1)
            hit = (cos.to(dtype)[:, None, :], sin_signed.to(dtype)[:, None, :])  # heads broadcast
            self._rope_cache[key] = hit
        return hit

    # -------------------------------------------------------------------------------------------- forward
    def forward(self, idx: torch.Tensor, *, attn_fn: AttnFn = F.scaled_dot_product_attention,
                ranges: Ranges | None = None, targets: torch.Tensor | None = None, cache: KVCache | None = None,
                start_pos: int = 0, last_only: bool = False) -> torch.Tensor:
        """Logits (batch, seq or 1, vocab), or the mean cross-entropy against ``targets`` when given.

        With ``cache``: K/V of these positions are written at [start_pos, start_pos+seq). start_pos 0 is a
        prefill (causal attention over the new tokens); start_pos > 0 takes one token (decode): its query
        attends, non-causally, to the cache's first start_pos+1 positions.
        """
        cfg = self.cfg
        s = idx.shape[1]
        r = ranges
        end = start_pos + s
        if cache is not None and end > cache.max_len:
            raise ValueError(f"positions up to {end} do not fit the KV cache of {cache.max_len}")
        if start_pos > 0 and (cache is None or s != 1):
            raise ValueError("start_pos > 0 needs a KV cache and a single new token (decode)")

        def embed(*ws: torch.Tensor) -> torch.Tensor:
            x = F.embedding(idx, ws[0])
            if len(ws) > 1:
                x = x + ws[1][start_pos:end]
            return x

        if self.pos_emb is not None and end > cfg.max_seqlen:
            raise ValueError(f"position {end - 1} beyond {cfg.name}'s {cfg.max_seqlen} learned positions "
                             "(preset(..., max_seqlen=N))")
        ws = (self.tok_emb,) if self.pos_emb is None else (self.tok_emb, self.pos_emb)
        x = run_part(r, "embed", embed, *ws)
        rope = self._rope_tables(end, x.device, x.dtype) if cfg.positions == "rotary" else None

        for li in range(cfg.layers):
            blk = cast(_Block, self.blocks[li])
            x = blk.run(x, li, attn_fn=attn_fn, ranges=r, rope=rope, cache=cache, start_pos=start_pos)

        if last_only:
            x = x[:, -1:]

        def normf(x: torch.Tensor, *wb: torch.Tensor) -> torch.Tensor:
            if cfg.norm == "layernorm":
                return F.layer_norm(x, (x.shape[-1],), wb[0], wb[1], cfg.norm_eps)
            return F.rms_norm(x, (x.shape[-1],), wb[0], cfg.norm_eps)

        x = run_part(r, "norm", normf, x, self.normf_w, *(() if self.normf_b is None else (self.normf_b,)))
        head_w = self.tok_emb if self.lm_head is None else self.lm_head
        logits = run_part(r, "head", F.linear, x, head_w)
        if targets is None:
            return logits

        def loss_fn(lg: torch.Tensor) -> torch.Tensor:
            # on the logits' own dtype: no fp32 copy of batch*seq*vocab (log_softmax accumulates in fp32)
            return F.cross_entropy(lg.reshape(-1, lg.shape[-1]), targets.reshape(-1))

        return run_part(r, "loss", loss_fn, logits)


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """A dtype name or torch dtype as a torch dtype; None: bf16 on CUDA, fp32 elsewhere."""
    if dtype is None:
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return DTYPES[dtype]


def build_model(cfg: ModelConfig, *, device: str | torch.device = "cpu", dtype: str | torch.dtype | None = None,
                seed: int = 0) -> Transformer:
    """The model with deterministic random weights, built on the meta device and materialised directly on
    ``device`` in ``dtype`` (no CPU copy of a big model, no default init pass, no download)."""
    dev = torch.device(device)
    dt = resolve_dtype(dtype, dev)
    with torch.device("meta"):
        model = Transformer(cfg, dt)
    model.to_empty(device=dev)
    model.init_weights(seed)
    return model


def make_tokens(cfg: ModelConfig, batch: int, seqlen: int, *, device: str | torch.device = "cpu",
                seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token ids and random next-token targets, (batch, seqlen) each, the same on every device."""
    g = torch.Generator(device="cpu").manual_seed(seed + 1_000_003)
    idx = torch.randint(0, cfg.vocab_real, (batch, seqlen), generator=g)
    tgt = torch.randint(0, cfg.vocab_real, (batch, seqlen), generator=g)
    return idx.to(device), tgt.to(device)
