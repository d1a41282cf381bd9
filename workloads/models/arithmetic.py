"""The model's arithmetic: parameter counts, FLOPs per step, MFU and the memory a point needs before it runs.
Pure Python, no torch (a test holds it to that): the formulas can be read, tested and used where torch is not
loaded. docs/models.md has every formula."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profctl.spec import MODES

from .presets import ModelConfig

if TYPE_CHECKING:
    import torch

#: bytes per element of the dtypes a model runs in (by the names the options use)
DTYPE_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp32": 4}


def _linear_weights_per_layer(cfg: ModelConfig) -> int:
    """Elements of every Linear weight of one block (the matmul operands; biases are adds, not counted)."""
    qkv = cfg.d_model * (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim
    out = cfg.heads * cfg.head_dim * cfg.d_model
    mlp = (3 if cfg.mlp == "swiglu" else 2) * cfg.d_model * cfg.mlp_hidden
    return qkv + out + mlp


def param_count(cfg: ModelConfig) -> int:
    """Number of parameters, embeddings and LM head included (a tied head adds none).

    Per block: fused QKV d*(h+2kv)*hd, output hd*h*d, MLP 2*d*ffn (GELU) or 3*d*ffn (SwiGLU), plus biases
    (GPT: (h+2kv)*hd + d + ffn + d) and two norms (LayerNorm 2d, RMSNorm d). Outside: token embedding V*d,
    learned positions max_seqlen*d (GPT), final norm, untied head V*d.
    """
    d, ffn = cfg.d_model, cfg.mlp_hidden
    per_norm = 2 * d if cfg.norm == "layernorm" else d
    per_layer = _linear_weights_per_layer(cfg) + 2 * per_norm
    if cfg.bias:
        per_layer += (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim + d + (ffn if cfg.mlp == "gelu" else 2 * ffn) + d
    total = cfg.layers * per_layer + cfg.vocab * d + per_norm
    if cfg.positions == "learned":
        total += cfg.max_seqlen * d
    if not cfg.tied_embeddings:
        total += cfg.vocab * d
    return total


def _visible_pairs(seqlen_q: int, seqlen_kv: int, causal: bool) -> int:
    """(query, key) pairs a top-left causal mask leaves visible (SDPA's is_causal): row i sees min(i+1, skv)."""
    if not causal:
        return seqlen_q * seqlen_kv
    full = min(seqlen_q, seqlen_kv)
    return full * (full + 1) // 2 + max(0, seqlen_q - seqlen_kv) * seqlen_kv


def model_flops(cfg: ModelConfig, mode: str, batch: int, seqlen: int) -> dict[str, int]:
    """FLOPs of one step of ``mode``; ``seqlen`` is the prompt (train/prefill) or the cache context (decode).

    matmul    = 2 * rows * W, W = every Linear weight element the rows pass through (the LM head included,
                with its padded vocabulary; embeddings are gathers and count nothing; norms, activations,
                rotary and residual adds are not counted). train: rows = batch*seqlen through blocks and
                head, times 3 (forward + 2x backward). prefill: batch*seqlen rows through the blocks,
                batch rows (last position) through the head. decode: batch rows through blocks and head.
    attention = layers * 4 * batch * heads * pairs * head_dim, pairs counted with SDPA's top-left causal mask:
                train/prefill causal over seqlen x seqlen (s(s+1)/2), train times 3.5 (backward = 2.5x
                forward); decode one query over seqlen+1 keys, non-causal.
    Returns matmul, attention, total (= model FLOPs, the MFU numerator) and tokens (processed per step:
    batch*seqlen for train/prefill, batch new tokens for decode).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if batch <= 0 or seqlen <= 0:
        raise ValueError("batch and seqlen must be positive")
    w_layers = cfg.layers * _linear_weights_per_layer(cfg)
    w_head = cfg.vocab * cfg.d_model
    per_pair = 4 * batch * cfg.heads * cfg.head_dim * cfg.layers
    if mode == "train":
        tokens = batch * seqlen
        matmul = 3 * 2 * tokens * (w_layers + w_head)
        attention = per_pair * _visible_pairs(seqlen, seqlen, True) * 7 // 2
    elif mode == "prefill":
        tokens = batch * seqlen
        matmul = 2 * tokens * w_layers + 2 * batch * w_head
        attention = per_pair * _visible_pairs(seqlen, seqlen, True)
    else:
        tokens = batch
        matmul = 2 * batch * (w_layers + w_head)
        attention = per_pair * _visible_pairs(1, seqlen + 1, False)
    return {"matmul": matmul, "attention": attention, "total": matmul + attention, "tokens": tokens}


def mfu(flops: float, seconds: float, peak_tflops: float) -> float:
    """Model FLOPs utilisation: flops / seconds / (peak_tflops * 1e12), a fraction (0.5 = 50 %)."""
    if seconds <= 0 or peak_tflops <= 0:
        return float("nan")
    return flops / seconds / (peak_tflops * 1e12)


# ================================================================================================ memory estimate
class OutOfMemoryBudget(Exception):
    """The pre-allocation estimate of a point exceeds the memory cap: refused before anything is allocated."""

    def __init__(self, need_bytes: int, cap_bytes: int, detail: dict[str, int]) -> None:
        self.need_bytes, self.cap_bytes, self.detail = need_bytes, cap_bytes, detail
        from profctl.memory import amount, describe  # the unit that never reads 0.00 (MiB under 0.01 GiB)

        super().__init__(f"estimated {describe(detail, need_bytes)} > cap {amount(cap_bytes)}")


def _dtype_bytes(dtype: str | torch.dtype) -> int:
    """Bytes per element, by name or of a torch dtype (its itemsize: no tensor, no torch import)."""
    return DTYPE_BYTES[dtype] if isinstance(dtype, str) else int(dtype.itemsize)


def estimate_bytes(cfg: ModelConfig, batch: int, seqlen: int, mode: str, dtype: str | torch.dtype = "bf16",
                   attention: str = "flash", *, master_fp32: bool = False, detail: bool = False) -> Any:
    """Bytes a point needs before it runs, to refuse what cannot fit (no allocation happens here).

    weights   P * bytes (P = param_count); with master_fp32 the parameters are fp32 (4 bytes).
    train     + AdamW exp_avg and exp_avg_sq 2 * P * param bytes
              + max(grads P * param bytes, activations), activations being
                  saved tensors per block and token: GPT 8d + (h+2kv)*hd + h*hd + 2*ffn elements, Llama
                  5d + (h+2kv)*hd + h*hd + 4*ffn (norm inputs and outputs, q/k/v, attention output, the MLP's
                  saved intermediates), times layers * batch * seqlen
                + the head: logits and log-softmax (2 * batch*seqlen*V) and their gradient (+1)
                + eager: the probabilities b*h*s^2 saved per layer plus 2 score-sized buffers alive in one
                  layer's forward/backward; "math" likewise with 4-byte scores (SDPA's math backend upcasts)
              + master_fp32: autocast's bf16 copies of the weights, P * 2.
    prefill   + KV cache 2 * layers * batch * kv_heads * seqlen * hd, + max(one block's transient
              activations, eager: 2 score matrices of one layer).
    decode    + KV cache for seqlen+1 positions, + max(activations of one token (negligible), eager: 2 score
              rows).
    Activation bytes use the compute dtype (bf16 under autocast with master_fp32). The estimate is meant
    to be a little low rather than high (allocator fragmentation, cuBLAS/cuDNN workspaces and transients of
    one layer's backward are not counted), so it refuses only points that cannot fit; the real CUDA OOM is
    still caught. Against torch.cuda.max_memory_allocated on the H100 (llama-7b cut to 4 layers, 4096
    tokens; benchmarks/RESULTS.md): train 0 % to 8 % low, fp32 masters 9 % low, prefill and decode 1 % to 7 %
    low.
    Returns total bytes, or (total, {part: bytes}) with detail=True (the parts can add up to more than the
    total: parts that never coexist are not counted together).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if attention not in ("flash", "eager", "math"):
        raise ValueError(f"attention must be 'flash', 'eager' or 'math', got {attention!r}")
    act_b = _dtype_bytes(dtype)
    if master_fp32 and act_b == 4:
        act_b = 2
    par_b = 4 if master_fp32 else _dtype_bytes(dtype)
    P = param_count(cfg)
    d, h, kv, hd, ffn, L, V = (cfg.d_model, cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.mlp_hidden, cfg.layers,
                              cfg.vocab)
    score_b = 4 if attention == "math" else act_b
    parts: dict[str, int] = {"weights": P * par_b}
    if mode == "train":
        tokens = batch * seqlen
        parts["grads"] = P * par_b
        parts["adamw"] = 2 * P * par_b
        if cfg.family == "gpt":
            per_tok = 8 * d + (h + 2 * kv) * hd + h * hd + 2 * ffn
        else:
            per_tok = 5 * d + (h + 2 * kv) * hd + h * hd + 4 * ffn
        parts["activations"] = L * tokens * per_tok * act_b
        parts["head"] = 3 * tokens * V * act_b
        if attention != "flash":
            score = batch * h * seqlen * seqlen * score_b
            parts["scores"] = L * score + 2 * score
    elif mode == "prefill":
        tokens = batch * seqlen
        parts["kv_cache"] = 2 * L * batch * kv * seqlen * hd * act_b
        per_tok = 4 * d + (h + 2 * kv) * hd + h * hd + (4 * ffn if cfg.mlp == "swiglu" else 2 * ffn)
        parts["activations"] = tokens * per_tok * act_b
        if attention != "flash":
            parts["scores"] = 2 * batch * h * seqlen * seqlen * score_b
    else:
        parts["kv_cache"] = 2 * L * batch * kv * (seqlen + 1) * hd * act_b
        parts["activations"] = batch * (6 * d + 4 * ffn + 2 * V) * act_b
        if attention != "flash":
            parts["scores"] = 2 * batch * h * (seqlen + 1) * score_b
    total = sum(parts.values())
    if mode == "train":
        # gradients are allocated during backward as the saved activations are freed: the peak is at the start
        # of backward (activations) or at its end (gradients), not both
        transient = parts["activations"] + parts["head"] + parts.get("scores", 0)
        total = total - parts["grads"] - transient + max(parts["grads"], transient)
        if master_fp32:
            parts["autocast_copies"] = P * act_b  # the bf16 copies of the weights autocast keeps for a forward
            total += parts["autocast_copies"]
    elif "scores" in parts:  # without autograd, one layer's scores and the MLP's intermediates never coexist
        total = total - parts["activations"] - parts["scores"] + max(parts["activations"], parts["scores"])
    return (total, parts) if detail else total
