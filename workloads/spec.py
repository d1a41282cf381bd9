"""What one attention workload is: backend, shape, dtype, mask and pass, validated; no torch import here so
profctl can build command lines and NVTX filters without loading torch."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

BACKENDS: tuple[str, ...] = (
    "flash-attn", "fa4", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math", "eager",
)
DTYPES: tuple[str, ...] = ("bf16", "fp16", "fp32")
PASSES: tuple[str, ...] = ("fwd", "bwd", "fwd+bwd")
LAYOUTS: tuple[str, ...] = ("bhsd", "bshd")
DEVICES: tuple[str, ...] = ("cuda", "cpu")

#: Causal-mask alignment each backend computes when seqlen_q != seqlen_kv.
#: PyTorch SDPA's is_causal is top-left (query i sees keys j <= i); FlashAttention >= 2.1 and FA4 are
#: bottom-right (query i sees keys j <= i + seqlen_kv - seqlen_q). The eager baseline follows SDPA.
CAUSAL_ALIGN: dict[str, str] = {
    "flash-attn": "bottom-right", "fa4": "bottom-right",
    "sdpa-flash": "top-left", "sdpa-cudnn": "top-left", "sdpa-efficient": "top-left", "sdpa-math": "top-left",
    "eager": "top-left",
}


class SpecError(ValueError):
    """A workload option with a bad value; the message names the option and the value."""


@dataclass(frozen=True)
class AttentionSpec:
    """One point of a sweep: a backend on one shape, dtype, mask and pass."""

    backend: str
    batch: int = 1
    seqlen_q: int = 1024
    seqlen_kv: int = 1024
    heads: int = 16
    kv_heads: int = 16
    head_dim: int = 128
    dtype: str = "bf16"
    causal: bool = False
    pass_: str = "fwd"
    layout: str = "bhsd"
    device: str = "cuda"

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise SpecError(f"unknown backend {self.backend!r}; choose from {', '.join(BACKENDS)}")
        for name in ("batch", "seqlen_q", "seqlen_kv", "heads", "kv_heads", "head_dim"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise SpecError(f"--{name.replace('_', '-')} must be a positive integer, got {v!r}")
        if self.heads % self.kv_heads:
            raise SpecError(f"--kv-heads {self.kv_heads} does not divide --heads {self.heads}")
        if self.dtype not in DTYPES:
            raise SpecError(f"unknown dtype {self.dtype!r}; choose from {', '.join(DTYPES)}")
        if self.pass_ not in PASSES:
            raise SpecError(f"unknown pass {self.pass_!r}; choose from {', '.join(PASSES)}")
        if self.layout not in LAYOUTS:
            raise SpecError(f"unknown layout {self.layout!r}; choose from {', '.join(LAYOUTS)}")
        if self.device not in DEVICES:
            raise SpecError(f"unknown device {self.device!r}; choose from {', '.join(DEVICES)}")

    @property
    def causal_align(self) -> str | None:
        return CAUSAL_ALIGN[self.backend] if self.causal else None

    @property
    def shape_key(self) -> str:
        """A compact, filter-safe tag of the shape: b4,sq2048,skv2048,h16,kv4,d128,bf16,causal,bhsd."""
        return ",".join([
            f"b{self.batch}", f"sq{self.seqlen_q}", f"skv{self.seqlen_kv}", f"h{self.heads}",
            f"kv{self.kv_heads}", f"d{self.head_dim}", self.dtype, "causal" if self.causal else "full",
            self.layout,
        ])

    @property
    def case_id(self) -> str:
        return f"{self.backend}[{self.shape_key}]"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pass"] = d.pop("pass_")
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AttentionSpec:
        d = dict(d)
        if "pass" in d:
            d["pass_"] = d.pop("pass")
        return cls(**d)

    def with_(self, **kw: Any) -> AttentionSpec:
        return replace(self, **kw)


def parse_list(text: str | Sequence[str] | None, conv: type = str, *, option: str = "value") -> list[Any]:
    """Split '512,1024' (or repeated options) into converted values; say which option is wrong if one is."""
    if text is None:
        return []
    items: Iterable[str] = [text] if isinstance(text, str) else text
    out: list[Any] = []
    for chunk in items:
        for raw in str(chunk).split(","):
            raw = raw.strip()
            if not raw:
                continue
            if conv is bool:
                low = raw.lower()
                if low in ("1", "true", "yes", "causal", "on"):
                    out.append(True)
                elif low in ("0", "false", "no", "full", "off", "noncausal", "non-causal"):
                    out.append(False)
                else:
                    raise SpecError(f"{option} {raw!r} is not a boolean (use true/false)")
                continue
            try:
                out.append(conv(raw))
            except ValueError:
                raise SpecError(f"{option} {raw!r} is not a valid {conv.__name__}") from None
    return out


def specs_from_options(*, backend: str, batch: str, seqlen_q: str, seqlen_kv: str | None, heads: str,
                       kv_heads: str | None, head_dim: str, dtype: str, causal: str, pass_: str, layout: str,
                       device: str) -> list[AttentionSpec]:
    """Specs from the workload options as typed (comma lists); ``seqlen_kv``/``kv_heads`` None mean "equal to
    seqlen_q"/"equal to heads". The one place the command-line options become specs, for profctl and the
    workload process alike."""
    return expand(
        backends=parse_list(backend, option="--backend"),
        batch=parse_list(batch, int, option="--batch"),
        seqlen_q=parse_list(seqlen_q, int, option="--seqlen-q"),
        seqlen_kv=parse_list(seqlen_kv, int, option="--seqlen-kv") if seqlen_kv else None,
        heads=parse_list(heads, int, option="--heads"),
        kv_heads=parse_list(kv_heads, int, option="--kv-heads") if kv_heads else None,
        head_dim=parse_list(head_dim, int, option="--head-dim"),
        dtype=parse_list(dtype, option="--dtype"),
        causal=parse_list(causal, bool, option="--causal"),
        passes=parse_list(pass_, option="--pass"),
        layout=parse_list(layout, option="--layout"),
        device=device,
    )


def expand(
    *,
    backends: Sequence[str],
    batch: Sequence[int],
    seqlen_q: Sequence[int],
    seqlen_kv: Sequence[int] | None,
    heads: Sequence[int],
    kv_heads: Sequence[int] | None,
    head_dim: Sequence[int],
    dtype: Sequence[str],
    causal: Sequence[bool],
    passes: Sequence[str],
    layout: Sequence[str] = ("bhsd",),
    device: str = "cuda",
) -> list[AttentionSpec]:
    """The cartesian product of the value lists, in an order that keeps one shape's backends together.

    ``seqlen_kv`` None means "equal to seqlen_q"; ``kv_heads`` None means "equal to heads".
    """
    specs: list[AttentionSpec] = []
    for b, sq, h, d, dt, c, p, lay in itertools.product(batch, seqlen_q, heads, head_dim, dtype, causal, passes,
                                                        layout):
        for skv in (seqlen_kv or [sq]):
            for hkv in (kv_heads or [h]):
                for be in backends:
                    specs.append(AttentionSpec(
                        backend=be, batch=b, seqlen_q=sq, seqlen_kv=skv, heads=h, kv_heads=hkv, head_dim=d,
                        dtype=dt, causal=c, pass_=p, layout=lay, device=device))
    return specs
