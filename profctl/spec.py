"""What an attention workload is, typed: one case (:class:`AttentionSpec`) and a sweep of cases
(:class:`AttentionSweep`), with the one parser that turns the command line's comma lists into typed values.

The CLI, the Python API and the workload child process all go through :meth:`AttentionSweep.from_strings` /
:meth:`AttentionSweep.to_argv`, so a value is parsed once on each side of the process boundary and never travels
as an untyped string inside profctl. No torch import here: profctl validates options and builds command lines and
NVTX filters without loading torch.
"""

from __future__ import annotations

import inspect
import itertools
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from profctl.errors import SpecError
from profctl.head_dims import HEAD_DIMS, HeadDimRule, backend_list, head_dim_warnings  # noqa: F401 (re-exported)
from profctl.shapes import DTYPES, LAYOUTS, Shape, doc_lengths, docs_text, parse_docs

#: built-in backends: name -> the function that computes attention, ``module:attribute``. Every backend is a
#: function with scaled_dot_product_attention's calling convention; a user's own ``file.py:fn`` or
#: ``package.module:fn`` is accepted wherever a name is (profctl.workloads.backends loads them).
BUILTIN_BACKENDS: dict[str, str] = {
    "flash-attn": "profctl.workloads.backends:flash_attn",
    "fa4": "profctl.workloads.backends:fa4",
    "sdpa-flash": "profctl.workloads.backends:sdpa_flash",
    "sdpa-cudnn": "profctl.workloads.backends:sdpa_cudnn",
    "sdpa-efficient": "profctl.workloads.backends:sdpa_efficient",
    "sdpa-math": "profctl.workloads.backends:sdpa_math",
    "eager": "profctl.workloads.backends:eager",
    "triton": "profctl.workloads.kernels.triton_attention:attention",  # profctl's own FlashAttention-2 in Triton
    "flex": "profctl.workloads.flex:flex",  # FlexAttention, compiled once per shape (torch.compile)
    "flex-fa4": "profctl.workloads.flex:flex_fa4",  # FlexAttention's FlashAttention-4 backend (BACKEND=FLASH)
}
BACKENDS: tuple[str, ...] = tuple(BUILTIN_BACKENDS)
#: what a GPU sweep runs when --backend is not given: every built-in but the compiled ones (FlexAttention's compile
#: takes seconds a shape; name them with -b)
DEFAULT_GPU_BACKENDS: tuple[str, ...] = tuple(b for b in BACKENDS if not b.startswith("flex"))
PASSES: tuple[str, ...] = ("fwd", "bwd", "fwd+bwd")
DEVICES: tuple[str, ...] = ("cuda", "cpu")

#: Causal-mask alignment each backend computes when seqlen_q != seqlen_kv.
#: PyTorch SDPA's is_causal is top-left (query i sees keys j <= i); FlashAttention >= 2.1 and FA4 are
#: bottom-right (query i sees keys j <= i + seqlen_kv - seqlen_q). The eager baseline follows SDPA. A function
#: backend declares its own (``fn.causal_align``), top-left by default like SDPA.
CAUSAL_ALIGN: dict[str, str] = {
    "flash-attn": "bottom-right", "fa4": "bottom-right",
    "sdpa-flash": "top-left", "sdpa-cudnn": "top-left", "sdpa-efficient": "top-left", "sdpa-math": "top-left",
    "eager": "top-left", "triton": "top-left", "flex": "top-left", "flex-fa4": "top-left",
}
ALIGNMENTS: tuple[str, ...] = ("top-left", "bottom-right")

#: FP8 (``--dtype fp8``: e4m3 inputs quantized per tensor, FlashAttention-3's descale factors; docs/bench.md): the
#: built-in backends that take it, forward only. A function backend takes it when it declares ``fn.dtypes`` with
#: "fp8" (checked where it is loaded).
FP8_BACKENDS: tuple[str, ...] = ("triton",)
#: the dtypes of the model workload (its layers have no FP8 path)
MODEL_DTYPES: tuple[str, ...] = ("bf16", "fp16", "fp32")


def dtype_refusal(backend: str, dtype: str, pass_: str, declared: Sequence[str] | None = None) -> str | None:
    """Why `backend` cannot run `dtype` in `pass_` (one line, starting with the backend's name), or None. A built-in
    is judged by :data:`FP8_BACKENDS`; a function backend by the dtypes it declares (`declared`, ``fn.dtypes``;
    None: bf16, fp16 and fp32, and no judgement at all before it is loaded). FP8 runs the forward only."""
    if declared is None and is_function_ref(backend):
        return None
    takes = tuple(declared) if declared is not None else \
        ("bf16", "fp16", "fp32", *(("fp8",) if backend in FP8_BACKENDS else ()))
    name = backend_label(backend)
    if dtype not in takes:
        if dtype == "fp8":
            return (f"{name} cannot take --dtype fp8 (FP8 attention: the triton backend, or a function backend "
                    "declaring fn.dtypes with 'fp8')")
        return f"{name} cannot take --dtype {dtype} (it declares {', '.join(takes)})"
    if dtype == "fp8" and pass_ != "fwd":
        return (f"{name} cannot run a backward pass with --dtype fp8: there is no FP8 backward, fp8 runs --pass fwd "
                "only (as FlashAttention-3; gradients through an e4m3 P and dO would need their own scaling)")
    return None


#: built-in backends that run on CUDA only (workloads/backends.py's `supports` says the same per case); triton
#: too, unless Triton's interpreter is on (TRITON_INTERPRET=1)
CUDA_ONLY_BACKENDS: tuple[str, ...] = ("sdpa-cudnn", "sdpa-efficient", "flash-attn", "fa4", "flex-fa4")

#: the masks beyond causal (--window, --docs) each built-in runs natively, and how; the others refuse them (one
#: ``not run here`` line), never run a full mask in their place. A function backend declares ``fn.masks``.
MASKS: dict[str, dict[str, str]] = {
    "flex": {"window": "its block mask", "docs": "its block mask"},
    "flex-fa4": {"window": "its block mask", "docs": "its block mask"},
    "fa4": {"window": "window_size", "docs": "varlen (cu_seqlens)"},
    "flash-attn": {"window": "window_size", "docs": "varlen (cu_seqlens)"},
    "eager": {"window": "an explicit mask", "docs": "an explicit mask"},
    "triton": {"window": "skipping the key blocks outside the window (forward only)"},
}
#: why a built-in has no such mask (the rest of its refusal line)
_NO_MASK = {"sdpa-flash": "SDPA's flash kernel takes is_causal only", "sdpa-cudnn": "SDPA takes is_causal or a dense "
            "attn_mask, and a dense mask is not the kernel's own masking", "sdpa-efficient": "SDPA takes is_causal "
            "only (a dense attn_mask is not native masking)", "sdpa-math": "SDPA's math path takes is_causal only "
            "(eager is the explicit-mask baseline)", "triton": "profctl's Triton kernel skips window blocks only"}


def is_mask_refusal(reason: str | None) -> bool:
    """Whether a row's reason is :func:`mask_refusal`'s (the table says it in one line, not a row per point)."""
    r = reason or ""
    return (" natively: " in r and ("cannot take --window" in r or "cannot take --docs" in r)) or \
        "has no sliding window in its backward" in r


def mask_refusal(backend: str, window: int | None, docs: tuple[int, ...], pass_: str = "fwd",
                 declared: Sequence[str] | None = None) -> str | None:
    """Why `backend` cannot run this mask natively (one line starting with its name), or None. A built-in is judged
    by :data:`MASKS`; a function backend by what it declares (`declared`, ``fn.masks``; None before it is loaded:
    no judgement)."""
    wanted = [m for m, on in (("window", bool(window)), ("docs", bool(docs))) if on]
    if not wanted:
        return None
    if declared is None and is_function_ref(backend):
        return None
    takes = tuple(declared) if declared is not None else tuple(MASKS.get(backend, {}))
    name = backend_label(backend)
    flags = {"window": "--window", "docs": "--docs"}
    missing = [m for m in wanted if m not in takes]
    if missing:
        why = _NO_MASK.get(backend, f"it declares {', '.join(takes) or 'no mask'} (fn.masks)")
        return f"{name} cannot take {' or '.join(flags[m] for m in missing)} natively: {why}"
    if backend == "triton" and pass_ != "fwd":
        return f"{name} has no sliding window in its backward: {flags['window']} runs --pass fwd only"
    return None


def device_refusal(backend: str, device: str) -> str | None:
    """Why built-in `backend` cannot run on `device` (one line, starting with its name), or None; known without
    loading it. Function backends are judged when they are loaded."""
    if device == "cuda" or is_function_ref(backend):
        return None
    if backend in CUDA_ONLY_BACKENDS:
        return f"{backend} runs on CUDA only, not on {device}"
    interpret = os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "yes", "on", "y")
    if backend == "triton" and not interpret:
        return f"triton runs on CUDA (or on the CPU under TRITON_INTERPRET=1), not on {device}"
    return None


def dtype_problems(specs: Sequence[AttentionSpec], device: str | None = None) -> tuple[str | None, list[str]]:
    """Before a sweep runs: (the reason, when no case can run at all, else None; one warning line per reason some
    cases will be refused for their dtype, naming their backends). Only what is known without loading a backend:
    function backends are judged when they are loaded. With `device` (resolved), a case its backend cannot run
    there counts as refused too (`-b triton --dtype fp8 --device cpu`: nothing can run, said before running; a
    backend that cannot run here among others is said after the sweep, as "not run here")."""
    by_reason: dict[str, list[str]] = {}
    refused: dict[str, None] = {}  # every distinct reason, in order
    runnable = False
    for sp in specs:
        why = dtype_refusal(sp.backend, sp.dtype, sp.pass_)
        if why:
            by_reason.setdefault(why.removeprefix(sp.label + " "), []).append(sp.label)
        why = why or (device_refusal(sp.backend, device) if device else None) or \
            mask_refusal(sp.backend, sp.window, sp.docs, sp.pass_)
        runnable = runnable or not why
        if why:
            refused[why] = None
    if specs and not runnable:
        return "; ".join(list(refused)[:3]), []
    if not by_reason:
        return None, []
    return None, [f"{backend_list(list(dict.fromkeys(bs)))} {why}; those rows will say unsupported"
                  for why, bs in by_reason.items()]

#: other scripts' names for the built-in backends (the shared fixtures say naive, flash, cudnn, mem_eff, math)
_ALIASES = {
    "naive": "eager", "baseline": "eager", "standard": "eager",
    "flash": "sdpa-flash", "cudnn": "sdpa-cudnn",
    "mem-eff": "sdpa-efficient", "sdpa-mem-eff": "sdpa-efficient", "efficient": "sdpa-efficient",
    "mem-efficient": "sdpa-efficient", "math": "sdpa-math", "fa2": "flash-attn", "fa3": "flash-attn",
}
#: ``path/to/file.py:fn`` or ``package.module:fn`` (a dotted attribute path after the colon)
FUNCTION_REF = re.compile(r"^(?P<where>[^:\s][^:]*):(?P<attr>[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)$")

#: defaults when the user gives no shape: a real comparison on a GPU, one that finishes in seconds on a CPU
GPU_DEFAULTS: dict[str, tuple[Any, ...]] = {"batch": (1,), "seqlen_q": (1024, 2048, 4096), "heads": (32,),
                                            "head_dim": (128,), "dtype": ("bf16",)}
CPU_DEFAULTS: dict[str, tuple[Any, ...]] = {"batch": (1,), "seqlen_q": (256, 512, 1024), "heads": (8,),
                                            "head_dim": (64,), "dtype": ("fp32",)}
CPU_BACKENDS: tuple[str, ...] = ("sdpa-flash", "sdpa-math", "eager")


def canonical_backend(name: str) -> str:
    """profctl's name for a built-in backend as other scripts spell it (naive, sdpa_flash, mem_eff, ...); any
    other name (a function's label, another program's range name) is returned unchanged."""
    s = name.strip()
    key = s.lower().replace("_", "-")
    if key in _ALIASES:
        return _ALIASES[key]
    return key if key in BUILTIN_BACKENDS else s


def function_ref(fn: Any) -> str:
    """The reference (``module:qualname`` or ``/path/file.py:qualname``) a child process can load `fn` by; a
    lambda, a nested function or a function of an interactive session has none (SpecError says so)."""
    qual = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    mod = getattr(fn, "__module__", None)
    if not qual or "<" in qual or not mod:
        raise SpecError(f"{fn!r} cannot be loaded by the workload process: define the function at module level "
                        "in a file (then pass it, or 'path/to/file.py:name')")
    if "." in mod and mod != "__main__":
        return f"{mod}:{qual}"  # a module of a package: importable by name in the child too
    try:
        src = inspect.getsourcefile(fn)
    except TypeError:
        src = None
    if src and Path(src).is_file():
        return f"{Path(src).resolve()}:{qual}"  # a script or a loose module: found by its file, wherever it is
    if mod != "__main__":
        return f"{mod}:{qual}"
    raise SpecError(f"{qual} was defined interactively: put it in a file and pass 'file.py:{qual}'")


def backend_label(name: str) -> str:
    """The name a backend's rows, NVTX ranges and tables carry: a built-in's name; for a function reference,
    ``<file stem or module>.<function>`` with only filter-safe characters (no '/', ':', '[' that would break
    NVTX paths and ncu filters). ``examples/my_attn.py:attention`` -> ``my_attn.attention``."""
    if name in BUILTIN_BACKENDS:
        return name
    m = FUNCTION_REF.match(name.strip())
    if not m:
        return name
    where, attr = m["where"], m["attr"]
    stem = Path(where).stem if where.endswith(".py") or "/" in where else where.rsplit(".", 1)[-1]
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", f"{stem}.{attr}")


def is_function_ref(name: str) -> bool:
    """True for ``file.py:fn`` / ``module:fn`` (a user's attention function), False for a built-in name."""
    return bool(FUNCTION_REF.match(name.strip()))


def check_backend(name: str) -> str:
    """`name` when it is a built-in backend or a function reference; SpecError naming the choices otherwise."""
    if name in BUILTIN_BACKENDS or is_function_ref(name):
        return name
    raise SpecError(f"unknown backend {name!r}; choose from {', '.join(BACKENDS)}, or give your own function as "
                    "path/to/file.py:fn or package.module:fn")


def causal_align(backend: str) -> str:
    """The causal alignment a backend's name implies (a function's own declaration is read where it is loaded)."""
    return CAUSAL_ALIGN.get(backend, "top-left")


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
    align: str | None = None  # causal alignment when the backend declares its own (a function backend)
    window: int | None = None  # --window: a sliding window of this many keys (profctl.flops); None: none
    docs: tuple[int, ...] = ()  # --docs: documents packed into the sequence (profctl.shapes.doc_lengths)

    def __post_init__(self) -> None:
        check_backend(self.backend)
        check_mask(self.window, self.docs, self.seqlen_q, self.seqlen_kv)
        for name in ("batch", "seqlen_q", "seqlen_kv", "heads", "kv_heads", "head_dim"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise SpecError(f"--{name.replace('_', '-')} must be a positive integer, got {v!r}")
        if self.heads % self.kv_heads:
            raise SpecError(f"--kv-heads {self.kv_heads} does not divide --heads {self.heads}")
        for value, allowed, opt in ((self.dtype, DTYPES, "dtype"), (self.pass_, PASSES, "pass"),
                                    (self.layout, LAYOUTS, "layout"), (self.device, DEVICES, "device")):
            if value not in allowed:
                raise SpecError(f"unknown {opt} {value!r}; choose from {', '.join(allowed)}")
        if self.align is not None and self.align not in ALIGNMENTS:
            raise SpecError(f"unknown causal alignment {self.align!r}; choose from {', '.join(ALIGNMENTS)}")

    @property
    def causal_align(self) -> str | None:
        """The alignment the mask uses (None when not causal)."""
        return (self.align or causal_align(self.backend)) if self.causal else None

    @property
    def mask_align(self) -> str | None:
        """The alignment of the whole mask: causal's, and a window's diagonal (None without either)."""
        return (self.align or causal_align(self.backend)) if (self.causal or self.window) else None

    @property
    def masked(self) -> bool:
        """A mask beyond causal: a window or documents."""
        return bool(self.window or self.docs)

    @property
    def label(self) -> str:
        """The backend's name in rows, NVTX ranges and tables (profctl.spec.backend_label)."""
        return backend_label(self.backend)

    @property
    def shape(self) -> Shape:
        return Shape(self.batch, self.seqlen_q, self.seqlen_kv, self.heads, self.kv_heads, self.head_dim,
                     self.dtype, self.causal, self.layout, self.window, self.docs)

    @property
    def shape_key(self) -> str:
        return self.shape.key()

    @property
    def case_id(self) -> str:
        return f"{self.label}[{self.shape_key}]"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pass"] = d.pop("pass_")
        for k in ("align", "window"):
            if d.get(k) is None:
                d.pop(k, None)
        if not d.get("docs"):
            d.pop("docs", None)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AttentionSpec:
        d = dict(d)
        if "pass" in d:
            d["pass_"] = d.pop("pass")
        if d.get("docs") is not None:
            d["docs"] = tuple(int(n) for n in d["docs"])
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    def with_(self, **kw: Any) -> AttentionSpec:
        return replace(self, **kw)


def check_mask(window: int | None, docs: tuple[int, ...], seqlen_q: int, seqlen_kv: int) -> None:
    """SpecError for a window or documents no sequence of these lengths can have."""
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window <= 0):
        raise SpecError(f"--window must be a positive number of keys (or none), got {window!r}")
    if not docs:
        return
    if seqlen_q != seqlen_kv:
        raise SpecError(f"--docs {docs_text(docs)}: documents are packed into one sequence, so --seqlen-q "
                        f"{seqlen_q} and --seqlen-kv {seqlen_kv} must be equal")
    try:
        doc_lengths(docs, seqlen_q)
    except ValueError as e:
        raise SpecError(f"--docs {docs_text(docs)}: {e} (--seqlen {seqlen_q})") from None


_NONE = ("none", "off", "no")


def parse_windows(text: Any) -> list[int | None]:
    """``--window 1024,none``: window sizes (None: no window)."""
    out: list[int | None] = []
    for raw in parse_list(text, option="--window"):
        if str(raw).lower() in _NONE:
            out.append(None)
            continue
        try:
            w = int(raw)
        except ValueError:
            raise SpecError(f"--window {raw!r} is not a number of keys (or none)") from None
        if w <= 0:
            raise SpecError(f"--window must be a positive number of keys (or none), got {w}")
        out.append(w)
    return out


def parse_doc_masks(text: Any) -> list[tuple[int, ...]]:
    """``--docs 4,1024+3072,none``: N equal documents, their lengths joined by '+', or none (one document)."""
    out: list[tuple[int, ...]] = []
    for raw in parse_list(text, option="--docs"):
        if str(raw).lower() in _NONE:
            out.append(())
            continue
        try:
            docs = parse_docs(str(raw))
        except ValueError as e:
            raise SpecError(f"--docs {e}") from None
        if len(docs) == 1 and docs[0] <= 0:
            raise SpecError(f"--docs must be a positive number of documents (or none), got {docs[0]}")
        out.append(() if docs == (1,) else docs)
    return out


# ------------------------------------------------------------------------------------------------ parsing
_TRUE = ("1", "true", "yes", "causal", "on")
_FALSE = ("0", "false", "no", "full", "off", "noncausal", "non-causal")


def comma_items(text: str, option: str = "value") -> list[str]:
    """The items of one comma list, stripped. An empty item (`128,,256`, a comma at either end) is a SpecError
    naming the option: a typo that would otherwise run a different sweep than the one typed, silently."""
    items = [x.strip() for x in str(text).split(",")]
    if any(not x for x in items):
        raise SpecError(f"{option} {text!r}: an empty item in the comma list (two commas in a row, or one at an "
                        "end); give the values separated by single commas")
    return items


def parse_list(text: str | Sequence[Any] | None, conv: type = str, *, option: str = "value") -> list[Any]:
    """Split '512,1024' (or repeated options, or a list of values) into converted values; say which option is
    wrong if one is."""
    if text is None:
        return []
    items: Iterable[Any] = [text] if isinstance(text, (str, int, bool)) else text
    out: list[Any] = []
    for chunk in items:
        if conv is bool and isinstance(chunk, bool):
            out.append(chunk)
            continue
        if conv is int and isinstance(chunk, int) and not isinstance(chunk, bool):
            out.append(chunk)
            continue
        for raw in comma_items(str(chunk), option):
            if conv is bool:
                low = raw.lower()
                if low in _TRUE:
                    out.append(True)
                elif low in _FALSE:
                    out.append(False)
                else:
                    raise SpecError(f"{option} {raw!r} is not a boolean (use true/false)")
                continue
            try:
                out.append(conv(raw))
            except ValueError:
                raise SpecError(f"{option} {raw!r} is not a valid {conv.__name__}") from None
    return out


def parse_backends(text: str | Sequence[Any] | None, option: str = "--backend") -> list[str]:
    """Backend names and function references (a callable is turned into its reference). A reference holds no
    ',', so a plain comma split is right."""
    if callable(text):
        text = [text]
    if isinstance(text, (list, tuple)):
        text = [function_ref(b) if callable(b) else b for b in text]
    out = [str(b) for b in parse_list(text, option=option)]
    for b in out:
        check_backend(b)
    return out


@dataclass(frozen=True)
class AttentionSweep:
    """The attention workload options, typed: each a tuple of the values the sweep runs over (empty: the
    default for the device). ``seqlen_kv`` empty means "equal to each seqlen_q"; ``kv_heads`` empty, "equal to
    heads"."""

    backends: tuple[str, ...] = ()
    batch: tuple[int, ...] = ()
    seqlen_q: tuple[int, ...] = ()
    seqlen_kv: tuple[int, ...] = ()
    heads: tuple[int, ...] = ()
    kv_heads: tuple[int, ...] = ()
    head_dim: tuple[int, ...] = ()
    dtype: tuple[str, ...] = ()
    causal: tuple[bool, ...] = ()
    passes: tuple[str, ...] = ()
    layout: tuple[str, ...] = ()
    window: tuple[int | None, ...] = ()  # --window; empty: no window
    docs: tuple[tuple[int, ...], ...] = ()  # --docs; empty: one document
    device: str = "auto"
    warmup: int = 3
    iters: int = 10
    seed: int = 0
    nvtx: bool = True
    check: bool = True
    flush_l2: bool = False
    memory_limit_gib: float | None = None  # refuse points whose memory estimate is over it (oom rows)

    def __post_init__(self) -> None:
        check_run_options(self.device, self.warmup, self.iters)
        if self.memory_limit_gib is not None and not self.memory_limit_gib > 0:
            raise SpecError(f"--memory-limit must be positive (GiB), got {self.memory_limit_gib}")

    # ---- from the outside world
    @classmethod
    def from_strings(cls, *, backend: Any = None, batch: Any = None, seqlen: Any = None, seqlen_q: Any = None,
                     seqlen_kv: Any = None, heads: Any = None, kv_heads: Any = None, head_dim: Any = None,
                     dtype: Any = None, causal: Any = None, pass_: Any = None, layout: Any = None,
                     window: Any = None, docs: Any = None, **scalars: Any) -> AttentionSweep:
        """The sweep from options as typed (comma lists) or as Python values (lists or scalars); SpecError
        names the option at fault. ``--seqlen`` sets both lengths and cannot be combined with ``--seqlen-q``."""
        if seqlen is not None and seqlen_q is not None:
            raise SpecError("--seqlen and --seqlen-q both given: --seqlen sets seqlen-q and seqlen-kv; give one "
                            "of them (and --seqlen-kv for a different key length)")
        sq = seqlen_q if seqlen_q is not None else seqlen
        return cls(
            backends=tuple(parse_backends(backend)),
            batch=tuple(parse_list(batch, int, option="--batch")),
            seqlen_q=tuple(parse_list(sq, int, option="--seqlen-q" if seqlen_q is not None else "--seqlen")),
            seqlen_kv=tuple(parse_list(seqlen_kv, int, option="--seqlen-kv")),
            heads=tuple(parse_list(heads, int, option="--heads")),
            kv_heads=tuple(parse_list(kv_heads, int, option="--kv-heads")),
            head_dim=tuple(parse_list(head_dim, int, option="--head-dim")),
            dtype=tuple(check_choices(parse_list(dtype, option="--dtype"), DTYPES, "--dtype")),
            causal=tuple(parse_list(causal, bool, option="--causal")),
            passes=tuple(check_choices(parse_list(pass_, option="--pass"), PASSES, "--pass")),
            layout=tuple(check_choices(parse_list(layout, option="--layout"), LAYOUTS, "--layout")),
            window=tuple(parse_windows(window)),
            docs=tuple(parse_doc_masks(docs)),
            **scalars,
        )

    def with_defaults(self, device: str) -> AttentionSweep:
        """Every empty list filled with the default for `device` ('cuda' or 'cpu'), and the device set."""
        d = GPU_DEFAULTS if device == "cuda" else CPU_DEFAULTS
        return replace(
            self, device=device,
            backends=self.backends or (DEFAULT_GPU_BACKENDS if device == "cuda" else CPU_BACKENDS),
            batch=self.batch or d["batch"], seqlen_q=self.seqlen_q or d["seqlen_q"], heads=self.heads or d["heads"],
            head_dim=self.head_dim or d["head_dim"], dtype=self.dtype or d["dtype"],
            causal=self.causal or (False,), passes=self.passes or ("fwd",), layout=self.layout or ("bhsd",))

    # ---- the cases
    def specs(self) -> list[AttentionSpec]:
        """The cartesian product, in an order that keeps one shape's backends together (defaults filled for the
        device, CPU when still 'auto')."""
        s = self.with_defaults(self.device if self.device != "auto" else "cpu")
        specs: list[AttentionSpec] = []
        for b, sq, h, d, dt, c, w, docs, p, lay in itertools.product(
                s.batch, s.seqlen_q, s.heads, s.head_dim, s.dtype, s.causal, s.window or (None,), s.docs or ((),),
                s.passes, s.layout):
            for skv in (s.seqlen_kv or (sq,)):
                for hkv in (s.kv_heads or (h,)):
                    for be in s.backends:
                        specs.append(AttentionSpec(
                            backend=be, batch=b, seqlen_q=sq, seqlen_kv=skv, heads=h, kv_heads=hkv, head_dim=d,
                            dtype=dt, causal=c, pass_=p, layout=lay, device=s.device, window=w, docs=docs))
        if not specs:
            raise SpecError("the workload options select no case (an empty list?)")
        return specs

    def with_backends(self, backends: Sequence[str]) -> AttentionSweep:
        return replace(self, backends=tuple(backends))

    # ---- to the child process and the manifest
    def to_argv(self) -> list[str]:
        """The workload options of ``python -m profctl.workloads.attention`` for this sweep (defaults filled)."""
        s = self.with_defaults(self.device if self.device != "auto" else "cpu")
        argv = ["--backend", csv(s.backends), "--batch", csv(s.batch), "--seqlen-q", csv(s.seqlen_q),
                "--heads", csv(s.heads), "--head-dim", csv(s.head_dim), "--dtype", csv(s.dtype),
                "--causal", csv(s.causal), "--pass", csv(s.passes), "--layout", csv(s.layout),
                "--device", s.device, "--warmup", str(s.warmup), "--iters", str(s.iters), "--seed", str(s.seed)]
        if s.seqlen_kv:
            argv += ["--seqlen-kv", csv(s.seqlen_kv)]
        if s.kv_heads:
            argv += ["--kv-heads", csv(s.kv_heads)]
        if s.window:
            argv += ["--window", window_csv(s.window)]
        if s.docs:
            argv += ["--docs", docs_csv(s.docs)]
        argv += [flag for flag, on in (("--no-nvtx", not s.nvtx), ("--no-check", not s.check),
                                       ("--flush-l2", s.flush_l2)) if on]
        if s.memory_limit_gib is not None:
            argv += ["--memory-limit", str(s.memory_limit_gib)]
        return argv

    def manifest_dict(self) -> dict[str, Any]:
        """The options as recorded in a run's manifest: lists as comma strings, as typed on the command line."""
        def opt(xs: tuple[Any, ...]) -> str | None:
            return csv(xs) if xs else None

        return {"backend": opt(self.backends), "batch": opt(self.batch), "seqlen": None,
                "seqlen_q": opt(self.seqlen_q), "seqlen_kv": opt(self.seqlen_kv), "heads": opt(self.heads),
                "kv_heads": opt(self.kv_heads), "head_dim": opt(self.head_dim), "dtype": opt(self.dtype),
                "causal": opt(self.causal), "layout": opt(self.layout), "device": self.device,
                "warmup": self.warmup, "iters": self.iters, "seed": self.seed, "nvtx": self.nvtx,
                "check": self.check, "flush_l2": self.flush_l2, "pass": opt(self.passes),
                **({"memory_limit_gib": self.memory_limit_gib} if self.memory_limit_gib is not None else {}),
                **({"window": window_csv(self.window)} if self.window else {}),
                **({"docs": docs_csv(self.docs)} if self.docs else {})}


def window_csv(windows: Iterable[int | None]) -> str:
    """--window's comma list as typed (``none,1024``)."""
    return ",".join("none" if w is None else str(w) for w in windows)


def docs_csv(docs: Iterable[tuple[int, ...]]) -> str:
    """--docs' comma list as typed (``none,4,1024+3072``)."""
    return ",".join(docs_text(d) if d else "none" for d in docs)


def csv(xs: Iterable[Any]) -> str:
    """Values as the command line writes them: a comma list, booleans as true/false."""
    return ",".join(("true" if x else "false") if isinstance(x, bool) else str(x) for x in xs)


def check_run_options(device: str, warmup: int, iters: int) -> None:
    """SpecError for a device, warm-up or iteration count no sweep can run with."""
    if device not in ("auto", *DEVICES):
        raise SpecError(f"unknown device {device!r}; choose auto, cuda or cpu")
    if warmup < 0:
        raise SpecError(f"--warmup must be >= 0, got {warmup}")
    if iters <= 0:
        raise SpecError(f"--iters must be positive, got {iters}")


def check_choices(values: list[str], allowed: tuple[str, ...], option: str) -> list[str]:
    """`values` when each is one of `allowed`; SpecError naming the option and the choices otherwise."""
    for v in values:
        if v not in allowed:
            raise SpecError(f"unknown {option.lstrip('-')} {v!r}; choose from {', '.join(allowed)}")
    return values


#: the model workload's modes (its options: profctl.model_spec)
MODES: tuple[str, ...] = ("train", "prefill", "decode")
