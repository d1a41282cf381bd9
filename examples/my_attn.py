"""An attention function of your own, as profctl takes it: `profctl bench -b examples/my_attn.py:attention`.

Called like torch.nn.functional.scaled_dot_product_attention: q (batch, heads, seqlen_q, head_dim), k and v
(batch, kv_heads, seqlen_kv, head_dim), is_causal, scale, and enable_gqa=True when kv_heads < heads. This one is
a plain matmul-softmax-matmul written out, with FlashAttention's bottom-right causal alignment declared so that
profctl counts its FLOPs and checks its output against the matching reference.
"""

from __future__ import annotations

import torch


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False, scale: float | None = None,
              enable_gqa: bool = False) -> torch.Tensor:
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    if enable_gqa and k.shape[1] != q.shape[1]:
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    s = (q @ k.transpose(-2, -1)) * scale
    if is_causal:
        sq, skv = q.shape[-2], k.shape[-2]
        keep = torch.ones(sq, skv, dtype=torch.bool, device=q.device).tril(skv - sq)
        s = s.masked_fill(~keep, float("-inf"))
    return torch.nan_to_num(torch.softmax(s, dim=-1)) @ v


attention.causal_align = "bottom-right"  # type: ignore[attr-defined]
attention.name = "my-attn"  # type: ignore[attr-defined]
