"""Attention backends: every backend is a function with ``torch.nn.functional.scaled_dot_product_attention``'s
calling convention, ``fn(q, k, v, is_causal=..., scale=..., enable_gqa=...)`` on (batch, heads, seqlen, head_dim)
tensors, found by name through one registry.

The built-in names map to functions in this module (profctl.spec.BUILTIN_BACKENDS); any other name is a reference
to a user's function, ``path/to/file.py:fn`` or ``package.module:fn``, loaded the same way. So profctl's Triton
kernel (``triton``), a user's kernel and SDPA itself (``torch.nn.functional:scaled_dot_product_attention``) all go
through :func:`load`. A backend that cannot run a case raises BackendUnavailable with the reason: the case becomes
an ``unsupported`` row, never silently replaced by another backend.

A function may carry attributes: ``causal_align`` ('top-left' like SDPA, the default, or 'bottom-right' like
FlashAttention >= 2.1), ``name`` (what its rows are called), ``supports(spec) -> str | None`` (a reason it
cannot run a case, checked before inputs are allocated), ``dtypes`` (the dtype names it takes; bf16, fp16 and
fp32 when it says nothing: fp8 only when declared) and ``prepare(q, k, v) -> (q, k, v)`` (called once per input
before the first call and outside the timed calls: the same values in the layout the calls want, such as FP8's
K-major V). With ``--dtype fp8`` it is called with e4m3 tensors and FlashAttention-3's per-tensor keywords
``q_descale``, ``k_descale``, ``v_descale`` (one-element float32 tensors on the inputs' device).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import re
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from profctl.spec import (
    ALIGNMENTS,
    BUILTIN_BACKENDS,
    FUNCTION_REF,
    AttentionSpec,
    backend_label,
    dtype_refusal,
    mask_refusal,
)

from .results import one_line, out_of_memory

AttnFn = Callable[..., torch.Tensor]

TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
if hasattr(torch, "float8_e4m3fn"):  # fp8 inputs are quantized per tensor (workloads/fp8.py), not cast
    TORCH_DTYPES["fp8"] = torch.float8_e4m3fn


class BackendUnavailable(Exception):
    """Not installed, not supported on this device, or cannot take this shape; str() is the reason."""


class BadReference(Exception):
    """A function reference that cannot be loaded: no such file or module, a syntax error in it, no such
    attribute, not callable, or a signature that cannot take (q, k, v, is_causal=, scale=)."""


# ------------------------------------------------------------------------------------------------ built-ins
def _sdpa(kind: str, cuda_only: bool) -> AttnFn:
    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Any = None, dropout_p: float = 0.0,
           is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False) -> torch.Tensor:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        kw: dict[str, Any] = {"is_causal": is_causal, "scale": scale}
        if enable_gqa:
            kw["enable_gqa"] = True
        with sdpa_kernel(getattr(SDPBackend, kind)):
            return F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, **kw)

    def supports(spec: AttentionSpec) -> str | None:
        if cuda_only and spec.device != "cuda":
            return f"runs on CUDA only, not on {spec.device}"
        if spec.heads != spec.kv_heads and "enable_gqa" not in (F.scaled_dot_product_attention.__doc__ or ""):
            return f"torch {torch.__version__} SDPA has no enable_gqa (GQA needs torch >= 2.5)"
        return None

    fn.supports = supports  # type: ignore[attr-defined]
    fn.causal_align = "top-left"  # type: ignore[attr-defined]
    return fn


sdpa_flash = _sdpa("FLASH_ATTENTION", cuda_only=False)
sdpa_cudnn = _sdpa("CUDNN_ATTENTION", cuda_only=True)
sdpa_efficient = _sdpa("EFFICIENT_ATTENTION", cuda_only=True)
sdpa_math = _sdpa("MATH", cuda_only=False)

_MASKS: dict[tuple[int, int, str], torch.Tensor] = {}


_MASKS_BEYOND: dict[tuple[Any, ...], torch.Tensor] = {}


def hidden_mask(seqlen_q: int, seqlen_kv: int, device: torch.device, is_causal: bool, window: int | None,
                doc_lengths: tuple[int, ...] | None) -> torch.Tensor:
    """The (seqlen_q, seqlen_kv) bool mask of hidden pairs (top-left): causal, a sliding window of `window` keys up
    to each query's own (and after it without causal), documents; made once per shape and kept."""
    key = (seqlen_q, seqlen_kv, str(device), is_causal, window, doc_lengths)
    m = _MASKS_BEYOND.get(key)
    if m is None:
        i = torch.arange(seqlen_q, device=device)[:, None]
        j = torch.arange(seqlen_kv, device=device)[None, :]
        m = torch.zeros(seqlen_q, seqlen_kv, dtype=torch.bool, device=device)
        if is_causal:
            m |= j > i
        if window:
            m |= j <= i - window
            if not is_causal:
                m |= j >= i + window
        if doc_lengths:
            doc = torch.repeat_interleave(torch.arange(len(doc_lengths), device=device),
                                          torch.tensor(doc_lengths, device=device))
            m |= doc[:seqlen_q, None] != doc[None, :seqlen_kv]
        m = _MASKS_BEYOND[key] = m
    return m


def eager(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Any = None, dropout_p: float = 0.0,
          is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False,
          window: int | None = None, doc_lengths: tuple[int, ...] | None = None) -> torch.Tensor:
    """The baseline: explicit matmul, softmax, matmul (the full score matrix in memory); GQA by repeating kv
    heads; causal top-left like SDPA; a window and documents as an explicit mask (every score computed, the hidden
    ones set to -inf: profctl credits it with the visible pairs only)."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    rep = q.shape[1] // k.shape[1]
    if rep > 1:
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
    s = torch.matmul(q, k.transpose(-2, -1)) * scale
    if window or doc_lengths:
        s = s.masked_fill(hidden_mask(q.shape[-2], k.shape[-2], q.device, is_causal, window, doc_lengths),
                          float("-inf"))
    elif is_causal:
        key = (q.shape[-2], k.shape[-2], str(q.device))
        m = _MASKS.get(key)
        if m is None:
            m = _MASKS[key] = torch.ones(key[0], key[1], dtype=torch.bool, device=q.device).triu(1)
        s = s.masked_fill(m, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


eager.causal_align = "top-left"  # type: ignore[attr-defined]
eager.masks = ("window", "docs")  # type: ignore[attr-defined]


def _need_cuda_half(spec: AttentionSpec) -> str | None:
    if spec.device != "cuda":
        return f"runs on CUDA only, not on {spec.device}"
    if spec.dtype not in ("bf16", "fp16"):
        return f"supports bf16 and fp16 only, not {spec.dtype}"
    return None


def window_size(window: int | None, is_causal: bool) -> tuple[int, int] | None:
    """FlashAttention's ``window_size=(left, right)`` for profctl's window of `window` keys: the query's own key and
    the window - 1 before it (and after it without causal); None without a window."""
    if not window:
        return None
    return (window - 1, 0 if is_causal else window - 1)


def _bshd_call(func: Callable[..., Any], q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               is_causal: bool, scale: float | None, window: int | None = None,
               doc_lengths: tuple[int, ...] | None = None, varlen: Callable[..., Any] | None = None) -> torch.Tensor:
    """FlashAttention's interfaces take (batch, seqlen, heads, dim); SDPA's convention is (batch, heads, ...).
    A window goes as ``window_size``; documents as the varlen interface's ``cu_seqlens`` (each document its own
    sequence of the packed batch: the kernel's native document mask)."""
    kw: dict[str, Any] = {"causal": is_causal, "softmax_scale": scale}
    ws = window_size(window, is_causal)
    if ws is not None:
        kw["window_size"] = ws
    if doc_lengths:
        if varlen is None:
            raise BackendUnavailable("this FlashAttention has no varlen interface for --docs")
        return _varlen_call(varlen, q, k, v, doc_lengths, kw)
    o = func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), **kw)
    if isinstance(o, tuple):
        o = o[0]
    return o.transpose(1, 2)


def _varlen_call(varlen: Callable[..., Any], q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                 doc_lengths: tuple[int, ...], kw: dict[str, Any]) -> torch.Tensor:
    """The batch's sequences packed into (total, heads, dim), each document a sequence of its own."""
    batch, heads, seqlen, dim = q.shape
    per_seq = torch.cumsum(torch.tensor([0, *doc_lengths], device=q.device), 0).to(torch.int32)  # 0, l0, l0+l1..
    cu = torch.cat([per_seq[:-1] + b * seqlen for b in range(batch)]
                   + [torch.tensor([batch * seqlen], dtype=torch.int32, device=q.device)])
    pack = lambda x: x.transpose(1, 2).reshape(batch * seqlen, x.shape[1], dim)  # noqa: E731
    o = varlen(pack(q), pack(k), pack(v), cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(doc_lengths),
               max_seqlen_k=max(doc_lengths), **kw)
    if isinstance(o, tuple):
        o = o[0]
    return o.reshape(batch, seqlen, heads, dim).transpose(1, 2)


def flash_attn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Any = None, dropout_p: float = 0.0,
               is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False,
               window: int | None = None, doc_lengths: tuple[int, ...] | None = None) -> torch.Tensor:
    """FlashAttention-3 (flash_attn_interface) if installed, else FlashAttention-2 (flash_attn)."""
    mod = _flash_attn_module()
    return _bshd_call(mod.flash_attn_func, q, k, v, is_causal, scale, window, doc_lengths,
                      getattr(mod, "flash_attn_varlen_func", None))


def _flash_attn_module() -> Any:
    errs = []
    for modname in ("flash_attn_interface", "flash_attn"):
        try:
            mod = importlib.import_module(modname)
            mod.flash_attn_func  # noqa: B018 - a module without it is not FlashAttention
            return mod
        except Exception as e:  # ImportError, or a broken build raising at import
            errs.append(f"{modname}: {type(e).__name__}: {e}")
    raise BackendUnavailable("flash-attn is not installed (pip install 'profctl[flash]'); " + "; ".join(errs))


def _flash_attn_func() -> Callable[..., Any]:
    return _flash_attn_module().flash_attn_func


def _flash_attn_supports(spec: AttentionSpec) -> str | None:
    _flash_attn_func()
    return _need_cuda_half(spec)


flash_attn.supports = _flash_attn_supports  # type: ignore[attr-defined]
flash_attn.causal_align = "bottom-right"  # type: ignore[attr-defined]
flash_attn.masks = ("window", "docs")  # type: ignore[attr-defined]


def fa4(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Any = None, dropout_p: float = 0.0,
        is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False,
        window: int | None = None, doc_lengths: tuple[int, ...] | None = None) -> torch.Tensor:
    """FlashAttention-4 (flash_attn.cute, CuTe DSL)."""
    import flash_attn.cute as cute

    return _bshd_call(cute.flash_attn_func, q, k, v, is_causal, scale, window, doc_lengths,
                      getattr(cute, "flash_attn_varlen_func", None))


def _fa4_supports(spec: AttentionSpec) -> str | None:
    try:
        from flash_attn.cute import flash_attn_func  # noqa: F401
    except Exception as e:
        return f"FlashAttention-4 (flash_attn.cute) is not installed: {type(e).__name__}: {e}"
    why = _need_cuda_half(spec)
    if why:
        return why
    major, _ = torch.cuda.get_device_capability()
    if major < 9:
        return f"needs compute capability >= 9.0 (Hopper/Blackwell), this GPU is sm_{major}x"
    return None


fa4.supports = _fa4_supports  # type: ignore[attr-defined]
fa4.causal_align = "bottom-right"  # type: ignore[attr-defined]
fa4.masks = ("window", "docs")  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------------------ loading
_LOADED: dict[str, AttnFn] = {}


def load(name: str) -> AttnFn:
    """The function of a backend name or reference; BadReference (with the reason) when it cannot be loaded."""
    if name in _LOADED:
        return _LOADED[name]
    ref = BUILTIN_BACKENDS.get(name, name)
    m = FUNCTION_REF.match(ref)
    if not m:
        raise BadReference(f"{name!r} is not a backend name nor a function reference (path/to/file.py:fn or "
                           "package.module:fn)")
    where, attr = m["where"], m["attr"]
    mod = _load_file(where) if where.endswith(".py") or "/" in where or where.startswith(".") else \
        _load_module(where)
    obj: Any = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise BadReference(f"{name}: {where} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise BadReference(f"{name}: {attr} is a {type(obj).__name__}, not a function")
    _check_signature(name, obj)
    align = getattr(obj, "causal_align", "top-left")
    if align not in ALIGNMENTS:
        raise BadReference(f"{name}: causal_align {align!r} must be one of {', '.join(ALIGNMENTS)}")
    _LOADED[name] = obj
    return obj


def _load_file(where: str) -> Any:
    path = Path(where).expanduser()
    if not path.is_file():
        raise BadReference(f"{where}: no such file")
    modname = "profctl_user_" + re.sub(r"\W", "_", str(path.resolve()))
    if modname in sys.modules:
        return sys.modules[modname]
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise BadReference(f"{where}: cannot be imported as a Python file")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    try:
        spec.loader.exec_module(mod)
    except SyntaxError as e:
        del sys.modules[modname]
        raise BadReference(f"{where}:{e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:
        del sys.modules[modname]
        raise BadReference(f"{where}: importing it raised {type(e).__name__}: {e}") from None
    return mod


def _load_module(where: str) -> Any:
    try:
        return importlib.import_module(where)
    except ModuleNotFoundError as e:
        raise BadReference(f"{where}: no module named {e.name!r}") from None
    except SyntaxError as e:
        raise BadReference(f"{where}: {e.filename}:{e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:
        raise BadReference(f"{where}: importing it raised {type(e).__name__}: {e}") from None


def _check_signature(name: str, fn: Any) -> None:
    """The function must take q, k, v positionally and is_causal / scale by keyword (or **kwargs)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin or C function without a signature: the first call will tell
    params = list(sig.parameters.values())
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) < 3:
        raise BadReference(f"{name}: its signature {sig} does not take (q, k, v, is_causal=..., scale=...)")
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    names = {p.name for p in params}
    missing = [k for k in ("is_causal", "scale") if k not in names]
    if missing:
        raise BadReference(f"{name}: its signature {sig} has no {' or '.join(missing)} keyword (it is called like "
                           "scaled_dot_product_attention: fn(q, k, v, is_causal=..., scale=...))")


def check(spec: AttentionSpec, fn: Any) -> None:
    """BackendUnavailable when the backend cannot take the dtype (``fn.dtypes``; undeclared: bf16, fp16, fp32),
    says it cannot run `spec`, or there is no GPU for a CUDA case."""
    declared = getattr(fn, "dtypes", None)
    why = dtype_refusal(spec.backend, spec.dtype, spec.pass_,
                        tuple(declared) if declared is not None else ("bf16", "fp16", "fp32"))
    if why:
        raise BackendUnavailable(why)
    masks = getattr(fn, "masks", None)
    declared = tuple(masks) if masks is not None else (() if spec.backend not in BUILTIN_BACKENDS else None)
    why = mask_refusal(spec.backend, spec.window, spec.docs, spec.pass_, declared)
    if why:
        raise BackendUnavailable(why)
    if spec.device == "cuda" and not torch.cuda.is_available():
        raise BackendUnavailable("no CUDA device is available (use --device cpu)")
    supports = getattr(fn, "supports", None)
    if supports is not None:
        why = supports(spec)
        if why:
            raise BackendUnavailable(f"{spec.backend} {why}")


# ------------------------------------------------------------------------------------------------ failures
_UNSUPPORTED = re.compile(
    r"No available kernel|No viable backend|not supported|unsupported|does not support|only supports|must be|expected|"
    r"should be|Only support|is not implemented|NotImplemented", re.I)


def classify_failure(exc: BaseException, caught_warnings: list[warnings.WarningMessage]) -> tuple[str, str]:
    """(status, reason) for an exception raised by a backend's first call.

    'unsupported' when the backend refused the shape/dtype/device (PyTorch explains why in warnings, which we
    attach), 'oom' for out-of-memory, 'error' for anything else.
    """
    msg = f"{type(exc).__name__}: {exc}".strip()
    if isinstance(exc, torch.cuda.OutOfMemoryError) or out_of_memory(exc):
        return "oom", one_line(msg)
    if isinstance(exc, BackendUnavailable):
        return "unsupported", one_line(str(exc))
    if isinstance(exc, (NotImplementedError, AssertionError, ValueError, TypeError)) or _UNSUPPORTED.search(msg):
        why = [str(w.message) for w in caught_warnings if "kernel" in str(w.message).lower()
               or "support" in str(w.message).lower()]
        reason = one_line(msg) + (" | " + " | ".join(one_line(w) for w in why[:4]) if why else "")
        return "unsupported", reason
    return "error", one_line(msg)


def check_references(refs: list[str]) -> list[dict[str, Any]]:
    """For each reference: whether it loads, and what it declares (its label, name and causal alignment)."""
    out: list[dict[str, Any]] = []
    for ref in refs:
        try:
            fn = load(ref)
        except BadReference as e:
            out.append({"ref": ref, "ok": False, "error": str(e)})
            continue
        out.append({"ref": ref, "ok": True, "label": backend_label(ref), "name": getattr(fn, "name", None),
                    "causal_align": getattr(fn, "causal_align", "top-left")})
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m profctl.workloads.backends --check REF...``: one JSON line per reference (profctl checks users'
    functions in a child process, so that importing them cannot harm profctl itself)."""
    p = argparse.ArgumentParser(prog="python -m profctl.workloads.backends")
    p.add_argument("--check", nargs="+", required=True, metavar="REF")
    a = p.parse_args(argv)
    for r in check_references(a.check):
        print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
