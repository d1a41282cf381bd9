"""The shape of one attention case, and its one text form: the shape key.

The key names a case in profctl's NVTX ranges (``sdpa-flash[b1,sq4096,skv4096,h32,kv32,d128,bf16,causal,bhsd]``),
in run directories and in the cross-tool join; the label is what tables print (``b1 s4096 h32 d128 bf16 causal``).
Both are made here and nowhere else, and :meth:`Shape.parse` reads a key back, so a shape survives a trip through
a report file with its types (ints, a bool) intact. No torch import: profctl builds filters from shapes without it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DTYPES: tuple[str, ...] = ("bf16", "fp16", "fp32", "fp8")  # fp8: e4m3 inputs, per-tensor scales (docs/bench.md)
LAYOUTS: tuple[str, ...] = ("bhsd", "bshd")

_PART = re.compile(r"(skv|sq|kv|b|h|d|w)(\d+)")
_FIELDS = {"b": "batch", "sq": "seqlen_q", "skv": "seqlen_kv", "h": "heads", "kv": "kv_heads", "d": "head_dim",
           "w": "window"}
_DOCS = re.compile(r"docs(\d+(?:\+\d+)*)")


def docs_text(docs: tuple[int, ...]) -> str:
    """The text form of a document mask: ``4`` (four equal documents) or ``1024+3072`` (their lengths)."""
    return "+".join(str(n) for n in docs)


def parse_docs(text: str) -> tuple[int, ...]:
    """The inverse of :func:`docs_text`; ValueError for anything else (``none`` is the caller's)."""
    parts = text.split("+")
    if not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"{text!r} is neither a number of documents nor their lengths joined by '+'")
    return tuple(int(p) for p in parts)


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _without_empty(docs: tuple[int, ...], seqlen: int) -> str:
    """What --docs says without its empty documents, when the rest fill the sequence ('' when they do not)."""
    rest = tuple(n for n in docs if n > 0)
    if sum(rest) != seqlen:
        return ""
    them = "them" if len(docs) - len(rest) > 1 else "it"
    return f" (without {them}: --docs {docs_text(rest) if len(rest) > 1 else 'none'})"


def doc_lengths(docs: tuple[int, ...], seqlen: int) -> list[int]:
    """The lengths of the documents packed into a sequence of `seqlen` tokens: ``(n,)`` is n documents as equal as
    can be (the first ``seqlen % n`` one token longer), two or more numbers are the lengths themselves; ``()`` is
    one document. ValueError when they cannot fill the sequence."""
    if not docs:
        return [seqlen]
    if len(docs) == 1:
        n = docs[0]
        if n <= 0 or n > seqlen:
            raise ValueError(f"{n} documents cannot be packed into {seqlen} tokens (each needs at least one)")
        base, extra = divmod(seqlen, n)
        return [base + (i < extra) for i in range(n)]
    empty = [i + 1 for i, n in enumerate(docs) if n <= 0]
    if empty:  # the fault is the empty document, whatever the sum
        names = [_ordinal(i) for i in empty]
        which = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
        raise ValueError(f"document lengths {docs_text(docs)}: the {which} document"
                         f"{'s are' if len(names) > 1 else ' is'} empty (0 tokens); each needs at least one token"
                         + _without_empty(docs, seqlen))
    if sum(docs) != seqlen:
        raise ValueError(f"document lengths {docs_text(docs)} add up to {sum(docs)}, not the sequence's {seqlen} "
                         "tokens")
    return list(docs)


@dataclass(frozen=True, order=True)
class Shape:
    """Batch, sequence lengths, heads, head dim, dtype, mask and layout of one attention case."""

    batch: int
    seqlen_q: int
    seqlen_kv: int
    heads: int
    kv_heads: int
    head_dim: int
    dtype: str = "bf16"
    causal: bool = False
    layout: str = "bhsd"
    window: int | None = None  # sliding window: a query sees the `window` keys up to its own (and as many after
    #                            it without causal); None: no window
    docs: tuple[int, ...] = ()  # documents packed into the sequence (doc_lengths); (): one

    # ---- the key: compact, filter-safe (no '/', ']' or spaces)
    def key(self) -> str:
        """``b4,sq2048,skv2048,h16,kv4,d128,bf16,causal,bhsd``; a window and documents after the mask
        (``...,causal,w1024,docs4,bhsd``)."""
        return ",".join([
            f"b{self.batch}", f"sq{self.seqlen_q}", f"skv{self.seqlen_kv}", f"h{self.heads}",
            f"kv{self.kv_heads}", f"d{self.head_dim}", self.dtype, "causal" if self.causal else "full",
            *self._mask_parts(), self.layout,
        ])

    def _mask_parts(self) -> list[str]:
        return ([f"w{self.window}"] if self.window else []) + ([f"docs{docs_text(self.docs)}"] if self.docs else [])

    @classmethod
    def parse(cls, key: str) -> Shape:
        """The inverse of :meth:`key`. Missing seqlen_kv / kv_heads / dtype / mask / layout take their defaults
        (= seqlen_q, = heads, bf16, full, bhsd); ValueError names the part it cannot read."""
        out: dict[str, Any] = {"dtype": "bf16", "causal": False, "layout": "bhsd"}
        for part in key.split(","):
            part = part.strip()
            m = _PART.fullmatch(part)
            if m:
                out[_FIELDS[m[1]]] = int(m[2])
            elif part in DTYPES:
                out["dtype"] = part
            elif part in ("causal", "full"):
                out["causal"] = part == "causal"
            elif part in LAYOUTS:
                out["layout"] = part
            elif _DOCS.fullmatch(part):
                out["docs"] = parse_docs(part[4:])
            elif part:
                raise ValueError(f"shape key part {part!r} is not one of b<N>, sq<N>, skv<N>, h<N>, kv<N>, d<N>, "
                                 "a dtype, causal/full, w<N>, docs<N> or a layout")
        out.setdefault("seqlen_kv", out.get("seqlen_q"))
        out.setdefault("kv_heads", out.get("heads"))
        missing = [f for f in ("batch", "seqlen_q", "heads", "head_dim") if out.get(f) is None]
        if missing:
            raise ValueError(f"shape key {key!r} lacks {', '.join(missing)}")
        return cls(**out)

    @classmethod
    def try_parse(cls, key: str | None) -> Shape | None:
        """:meth:`parse`, or None for a missing or foreign key."""
        if not key:
            return None
        try:
            return cls.parse(key)
        except ValueError:
            return None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Shape:
        """The shape of a bench row or a spec dict (``batch``, ``seqlen_q``, ... keys)."""
        return cls(batch=int(row["batch"]), seqlen_q=int(row["seqlen_q"]), seqlen_kv=int(row["seqlen_kv"]),
                   heads=int(row["heads"]), kv_heads=int(row["kv_heads"]), head_dim=int(row["head_dim"]),
                   dtype=str(row["dtype"]), causal=bool(row.get("causal")), layout=str(row.get("layout") or "bhsd"),
                   window=int(row["window"]) if row.get("window") else None,
                   docs=tuple(int(n) for n in row.get("docs") or ()))

    # ---- the label: what a person reads in a table
    def label(self) -> str:
        """``b1 s4096 h32 d128 bf16 causal``; ``s1024/4096`` and ``h32/8`` when q and kv differ; the layout when
        it is not bhsd."""
        skv = f"/{self.seqlen_kv}" if self.seqlen_kv != self.seqlen_q else ""
        kv = f"/{self.kv_heads}" if self.kv_heads != self.heads else ""
        lay = "" if self.layout == "bhsd" else f" {self.layout}"
        mask = "".join(f" {p}" for p in self._mask_parts())
        return (f"b{self.batch} s{self.seqlen_q}{skv} h{self.heads}{kv} d{self.head_dim} {self.dtype}"
                f"{' causal' if self.causal else ''}{mask}{lay}")

    def order(self) -> tuple[Any, ...]:
        """Sort key for tables: dtype, head dim, heads, batch, mask, then sequence lengths."""
        return (self.dtype, self.head_dim, self.heads, self.kv_heads, self.batch, self.causal, self.window or 0,
                self.docs, self.seqlen_q, self.seqlen_kv, self.layout)


def key_of_row(row: Mapping[str, Any]) -> str:
    """The shape key of a bench row (or a spec dict)."""
    return Shape.from_row(row).key()


def label_of_key(key: str | None) -> str:
    """The label of a shape key; the key itself when it is not one of profctl's, '?' when missing."""
    if not key:
        return "?"
    s = Shape.try_parse(key)
    return s.label() if s else key


def sort_key(key: str | None) -> tuple[Any, ...]:
    """Shapes in numeric order, profctl's keys first, foreign keys next, none last."""
    if not key:
        return (2,)
    s = Shape.try_parse(key)
    return (0, *s.order()) if s else (1, key)
