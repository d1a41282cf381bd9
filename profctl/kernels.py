"""Kernel names: a short display name, a class (flash_fwd, gemm, softmax, ...) and a key that matches the same
kernel across tools (nsys writes ``(int)128`` template arguments, torch.profiler ``128``, ncu a base name)."""

from __future__ import annotations

import re
from functools import lru_cache

_WS = re.compile(r"\s+")
_BOOL = {"true": "1", "false": "0"}
_BOOL_RX = re.compile(r"\b(true|false)\b")
_ANON = re.compile(r"\(anonymous namespace\)|<unnamed>")
_LAMBDA_EDG = re.compile(r"\[lambda\((.*?)\) \(instance (\d+)\)\]")
_CASTS = re.compile(r"\((?:unsigned |signed )?(?:long long|long|int|short|char|bool|unsigned)\)\s*(-?\d+)")
_INT_SUFFIX = re.compile(r"\b(\d+)(?:ull|ul|ll|u|l)\b", re.I)
_CONST = re.compile(r"\b(?:const|void)\b")


def strip_signature(name: str) -> str:
    """Drop a leading return type ``void`` and the trailing parameter list ``(...)``."""
    s = name.strip()
    if s.startswith("void "):
        s = s[5:]
    # remove trailing "(params)" that is outside template brackets
    depth = 0
    for i, ch in enumerate(s):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0 and i > 0:
            return s[:i]
    return s


@lru_cache(maxsize=65536)
def base_name(name: str) -> str:
    """The function's base name, as ncu prints by default: no namespace, no template arguments."""
    s = strip_signature(name)
    # cut template arguments
    depth, out = 0, []
    for ch in s:
        if ch == "<":
            depth += 1
            continue
        if ch == ">":
            depth = max(0, depth - 1)
            continue
        if depth == 0:
            out.append(ch)
    s = "".join(out)
    return s.rsplit("::", 1)[-1].strip() or name.strip()


@lru_cache(maxsize=65536)
def match_key(name: str) -> str:
    """A key equal for the same kernel in nsys, torch.profiler and ncu's demangled names. The demanglers differ:
    nsys writes ``(int)128``, ``(bool)1``, ``(anonymous namespace)`` and EDG lambdas ``[lambda(...) (instance 1)]``;
    torch.profiler ``128``, ``true``, ``<unnamed>`` and ``{lambda(...)#1}``; integer suffixes and ``const`` vary."""
    s = _ANON.sub("anon", name)
    s = _LAMBDA_EDG.sub(lambda m: "{lambda(" + m[1] + ")#" + m[2] + "}", s)
    s = strip_signature(s)
    s = _CASTS.sub(lambda m: m[1], s)
    s = _BOOL_RX.sub(lambda m: _BOOL[m.group(1)], s)
    s = _INT_SUFFIX.sub(lambda m: m[1], s)
    s = _CONST.sub("", s)
    return _WS.sub("", s)


def loose_key(name: str) -> str:
    """The match key up to its first ``(``: what is left when one demangler spells out a lambda's signature."""
    k = match_key(name)
    i = k.find("(")
    return k[:i] if i > 0 else k


def display_name(name: str, width: int = 60) -> str:
    """The base function name, for tables (``(anonymous namespace)`` does not confuse it)."""
    b = base_name(_ANON.sub("anon", name))
    return b if len(b) <= width else b[: width - 1] + "…"


@lru_cache(maxsize=65536)
def short_name(name: str, width: int = 60) -> str:
    """A readable name: the base name, with the first template arguments when they say something."""
    b = base_name(name)
    return b if len(b) <= width else b[: width - 1] + "…"


_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("memcpy", re.compile(r"memcpy|\[CUDA memcpy", re.I)),
    ("memset", re.compile(r"memset|\[CUDA memset", re.I)),
    ("flash_bwd", re.compile(
        r"(flash|fmha|fort_native_sdpa|attention).*(bwd|bprop|backward|dgrad|dq_dk_dv|dot_do_o|convert_dq)"
        r"|fmha_cutlassB|FlashAttentionBackward", re.I)),
    ("flash_fwd", re.compile(
        r"(flash|fmha|fort_native_sdpa|attention).*(fwd|fprop|forward)|fmha_cutlassF|FlashAttentionForward", re.I)),
    ("softmax", re.compile(r"softmax", re.I)),
    ("gemm", re.compile(r"gemm|xmma|nvjet|cutlass.*(sm\d+|tensorop)|_mma_|wgmma|bmm|matmul|cublas", re.I)),
    ("reduce", re.compile(r"reduce|reduction", re.I)),
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled|fill|copy|where|masked|triu|tril|mul_|add_|"
                               r"CatArrayBatched|index|scatter|gather|cast|convert", re.I)),
)


@lru_cache(maxsize=65536)
def classify(name: str) -> str:
    """The kernel class of a kernel name (see profctl.schema.KERNEL_CLASSES)."""
    for cls, rx in _RULES:
        if rx.search(name):
            return cls
    return "other"
