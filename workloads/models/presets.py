"""The model presets: a decoder-only transformer's shape (:class:`ModelConfig`), GPT-2 and Llama-2 presets
by name, and :func:`preset` to cut one down. Pure Python (no torch), so the arithmetic (model_math) reads them
without loading torch; docs/models.md has the table."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer's shape. ``vocab`` is the number of embedding/LM-head rows (padded);
    token ids are drawn from ``[0, vocab_real)``."""

    name: str
    family: str  # "gpt" (LayerNorm, GELU MLP, learned positions, biases) or "llama" (RMSNorm, SwiGLU, rotary)
    layers: int
    d_model: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp_hidden: int
    vocab: int
    vocab_real: int
    max_seqlen: int
    norm: str  # "layernorm" | "rmsnorm"
    norm_eps: float
    mlp: str  # "gelu" (tanh approximation, GPT-2's gelu_new) | "swiglu"
    positions: str  # "learned" | "rotary"
    rope_theta: float = 10000.0
    tied_embeddings: bool = False
    bias: bool = False

    def __post_init__(self) -> None:
        for f in ("layers", "d_model", "heads", "kv_heads", "head_dim", "mlp_hidden", "vocab", "vocab_real",
                  "max_seqlen"):
            if int(getattr(self, f)) <= 0:
                raise ValueError(f"{self.name}: {f} must be positive, got {getattr(self, f)}")
        if self.heads % self.kv_heads:
            raise ValueError(f"{self.name}: heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.vocab_real > self.vocab:
            raise ValueError(f"{self.name}: vocab_real {self.vocab_real} > vocab {self.vocab}")
        if self.norm not in ("layernorm", "rmsnorm") or self.mlp not in ("gelu", "swiglu") \
                or self.positions not in ("learned", "rotary"):
            raise ValueError(f"{self.name}: unknown norm/mlp/positions {self.norm}/{self.mlp}/{self.positions}")
        if self.positions == "rotary" and self.head_dim % 2:
            raise ValueError(f"{self.name}: rotary embeddings need an even head_dim, got {self.head_dim}")

    def with_(self, **changes: Any) -> ModelConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _gpt(name: str, layers: int, d_model: int, heads: int, **kw: Any) -> ModelConfig:
    base: dict[str, Any] = dict(family="gpt", head_dim=64, mlp_hidden=4 * d_model, vocab=50304, vocab_real=50257,
                                max_seqlen=1024, norm="layernorm", norm_eps=1e-5, mlp="gelu", positions="learned",
                                tied_embeddings=True, bias=True)
    base.update(kw)
    return ModelConfig(name=name, layers=layers, d_model=d_model, heads=heads, kv_heads=base.pop("kv_heads", heads),
                       **base)


#: GPT-2 small/medium/large as in the GPT-2 release (biases everywhere, LayerNorm eps 1e-5, tanh GELU, learned
#: positions for 1024 tokens, tied input/output embeddings), with the vocabulary padded from 50257 to 50304
#: (a multiple of 64, as nanoGPT does); the padded rows are never drawn as tokens. gpt-tiny is the same
#: architecture small enough for CPU tests. llama-7b is Llama-2-7B (no biases, untied LM head); llama-tiny is
#: its architecture at gpt-tiny's size.
PRESETS: dict[str, ModelConfig] = {
    "gpt-tiny": _gpt("gpt-tiny", 2, 64, 4, head_dim=16, vocab=256, vocab_real=256, max_seqlen=128),
    "gpt-sm": _gpt("gpt-sm", 12, 768, 12),
    "gpt-md": _gpt("gpt-md", 24, 1024, 16),
    "gpt-lg": _gpt("gpt-lg", 36, 1280, 20),
    "llama-7b": ModelConfig(name="llama-7b", family="llama", layers=32, d_model=4096, heads=32, kv_heads=32,
                            head_dim=128, mlp_hidden=11008, vocab=32000, vocab_real=32000, max_seqlen=4096,
                            norm="rmsnorm", norm_eps=1e-5, mlp="swiglu", positions="rotary", rope_theta=10000.0,
                            tied_embeddings=False, bias=False),
}
PRESETS["llama-tiny"] = PRESETS["llama-7b"].with_(name="llama-tiny", layers=2, d_model=64, heads=4, kv_heads=4,
                                                  head_dim=16, mlp_hidden=172, vocab=256, vocab_real=256,
                                                  max_seqlen=128)


def preset(name: str, *, layers: int | None = None, kv_heads: int | None = None,
           max_seqlen: int | None = None) -> ModelConfig:
    """A preset by name, optionally cut to ``layers``, given ``kv_heads`` (GQA/MQA) or a longer ``max_seqlen``."""
    if name not in PRESETS:
        raise ValueError(f"unknown model preset {name!r}; known: {', '.join(PRESETS)}")
    cfg = PRESETS[name]
    changes: dict[str, Any] = {}
    if layers is not None:
        changes["layers"] = layers
    if kv_heads is not None:
        changes["kv_heads"] = kv_heads
    if max_seqlen is not None:
        changes["max_seqlen"] = max_seqlen
    if changes:
        suffix = ",".join(f"{k}={v}" for k, v in changes.items())
        cfg = cfg.with_(name=f"{name}[{suffix}]", **changes)
    return cfg
