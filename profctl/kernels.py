"""Kernel names: one identity for the same kernel in every tool, a short display name and a class.

The tools spell one kernel differently, and the differences are not only cosmetic:

=================  ===================================================================================
nsys, ncu report   EDG-style demangling: ``(int)128``, ``(bool)1``, ``<unnamed>``, ``[lambda(int) (instance 1)]``,
                   ``void`` before function-type template arguments, their parameters with ``T1`` placeholders
torch.profiler     GNU-style (``__cxa_demangle``): ``128``, ``true``, ``(anonymous namespace)``,
                   ``{lambda(int)#1}``, parameters spelt out in full (the whole lambda type again)
ncu CSV            ncu's own simplified demangling: namespaces dropped here and there (``at::native::`` ->
                   ``at::``, ``pytorch_flash::`` sometimes gone), or a mangled name (``--print-kernel-base
                   mangled``), or only the function's base name
=================  ===================================================================================

:func:`kernel_id` maps all of them to one key (docs/summary-schema.md, "Kernel identity"); :func:`loose_key` and
:func:`base_name` are the join's fallbacks when a tool printed less. A mangled name (``_Z...``) is demangled with
the C++ runtime's ``__cxa_demangle`` when one can be loaded (ctypes, no tool is run).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
from functools import lru_cache

# ------------------------------------------------------------------------------------------- demangling
_MANGLED = re.compile(r"_Z[A-Za-z0-9_.$]+")
_DEMANGLE_MAX = 16384  # longer names are left as they are (a corrupt report may hold anything)
_cxa: object | None = None


def _load_cxa() -> object:
    global _cxa
    if _cxa is None:
        fn: object = False
        for lib in ("libstdc++.so.6", ctypes.util.find_library("stdc++"), "libc++.so.1", "libc++abi.so.1"):
            if not lib:
                continue
            try:
                f = ctypes.CDLL(lib).__cxa_demangle
            except (OSError, AttributeError):
                continue
            f.restype = ctypes.c_void_p
            f.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
            fn = f
            break
        _cxa = fn
    return _cxa


@lru_cache(maxsize=4096)
def demangle(name: str) -> str | None:
    """The GNU demangling of an Itanium-mangled name (``_ZN7cutlass6KernelI...``), as torch.profiler writes it;
    None when `name` is not a mangled name or no C++ runtime can demangle it."""
    if not isinstance(name, str) or len(name) > _DEMANGLE_MAX or not _MANGLED.fullmatch(name):
        return None
    fn = _load_cxa()
    if not fn:
        return None
    status = ctypes.c_int(0)
    ptr = fn(name.encode("ascii"), None, None, ctypes.byref(status))  # type: ignore[operator]
    if not ptr or status.value != 0:
        return None
    try:
        return ctypes.string_at(ptr).decode("utf-8", errors="replace")
    finally:
        ctypes.CDLL(None).free(ctypes.c_void_p(ptr))


def readable(name: str | None, mangled: str | None = None) -> str:
    """The name to show and key on: `name` demangled when it is mangled; when `name` is only a bare generic
    function name (``Kernel``, ``Kernel2``, ``device_kernel``) and the tool also gave a `mangled` name, that
    demangled (or the mangled name itself), so that CUTLASS kernels stay apart."""
    s = name if isinstance(name, str) else ""
    s = s.strip()
    d = demangle(s)
    if d:
        return d
    if mangled and isinstance(mangled, str) and mangled.strip() != s and (not s or is_generic(s)):
        m = mangled.strip()
        return demangle(m) or m
    return s


# ------------------------------------------------------------------------------------------- identity
_LAMBDA_EDG = re.compile(r"\[lambda\((?:[^()\[\]]|\([^()]*\))*\) \(instance (\d+)\)\]")
_LAMBDA_GNU = re.compile(r"\{lambda\((?:[^(){}]|\([^()]*\))*\)#(\d+)\}")
_ANON = re.compile(r"(?:\(anonymous namespace\)|<unnamed>|`anonymous namespace'|_GLOBAL__N_\w*)\s*::\s*")
_OPCALL = re.compile(r"\boperator\s*\(\s*\)")
_CAST = re.compile(r"\(\s*[A-Za-z_][\w:]*(?:\s+[A-Za-z_]\w*)*\s*\)\s*(-?\d+)")
_BOOL_RX = re.compile(r"\b(true|false)\b")
_BOOL = {"true": "1", "false": "0"}
_INT_SUFFIX = re.compile(r"\b(\d+)(?:ull|ul|ll|u|l)\b", re.I)
_KEYWORDS = re.compile(r"\b(?:const|volatile|void|struct|class|enum|union|typename|__restrict__|__restrict)\b")
_QUALIFIER = re.compile(r"(?<![\w>)\]}#])[A-Za-z_]\w*\s*::\s*")
_WS = re.compile(r"\s+")
_GENERIC = re.compile(r"^(?:Kernel\d*|kernel\d*|device_kernel|global_kernel)$")


def is_generic(base: str) -> bool:
    """A function name that says nothing on its own (CUTLASS's ``Kernel``, ``Kernel2``, ``device_kernel``)."""
    return bool(_GENERIC.match(base or ""))


def _drop_params(s: str) -> str:
    """Parameter lists -> ``()``; the outermost (the kernel's own) removed. A ``(`` opens a parameter list when it
    follows a name, ``>``, ``)``, ``]`` or ``}``; casts were removed before, so what is left are functions."""
    out: list[str] = []
    i, n, angle = 0, len(s), 0
    while i < n:
        c = s[i]
        if c == "<":
            angle += 1
        elif c == ">":
            angle = max(0, angle - 1)
        if c == "(":
            j = len(out) - 1
            while j >= 0 and out[j] == " ":
                j -= 1
            prev = out[j] if j >= 0 else ""
            if prev and (prev.isalnum() or prev in "_>)]}"):
                depth, k = 1, i + 1
                while k < n and depth:
                    depth += {"(": 1, ")": -1}.get(s[k], 0)
                    k += 1
                rest = s[k:].strip()
                if angle == 0 and not rest.startswith("::"):
                    return "".join(out)  # the kernel's own parameters: the end of the identity
                out.append("()")
                i = k
                continue
        out.append(c)
        i += 1
    return "".join(out)


@lru_cache(maxsize=65536)
def kernel_id(name: str) -> str:
    """The canonical kernel identity: equal for the same kernel in nsys, ncu (report and CSV) and torch.profiler.

    From the (demangled) name: lambdas as ``{lambda#N}`` (their parameters dropped), anonymous namespaces and
    every namespace or class qualifier before a name dropped (``at::native::x`` -> ``x``; function scopes such
    as ``direct_copy_kernel_cuda()::`` are kept), ``operator()`` -> ``operator_call``, casts and integer
    suffixes dropped from numbers (``(int)128``, ``2ul`` -> ``128``, ``2``), ``true/false`` -> ``1/0``,
    ``const``/``void``/``volatile`` dropped, every parameter list emptied to ``()`` and the kernel's own removed,
    whitespace removed. Template arguments are kept: they are what tells instantiations apart.
    """
    s = readable(name)
    if not s:
        return ""
    s = _LAMBDA_EDG.sub(lambda m: "{lambda#" + m[1] + "}", s)
    s = _LAMBDA_GNU.sub(lambda m: "{lambda#" + m[1] + "}", s)
    s = _ANON.sub("", s)
    s = _OPCALL.sub("operator_call", s)
    s = _CAST.sub(lambda m: m[1], s)
    s = _BOOL_RX.sub(lambda m: _BOOL[m[1]], s)
    s = _INT_SUFFIX.sub(lambda m: m[1], s)
    s = _KEYWORDS.sub(" ", s)
    s = _drop_params(s.strip())
    prev = None
    while prev != s:
        prev, s = s, _QUALIFIER.sub("", s)
    return _WS.sub("", s) or _WS.sub("", name if isinstance(name, str) else "")


def match_key(name: str) -> str:
    """The cross-tool join key: :func:`kernel_id` (kept under its old name)."""
    return kernel_id(name)


def loose_key(name: str) -> str:
    """:func:`kernel_id` with template arguments below the first level emptied (``f<a,g<>,{lambda#1}>``): what
    still meets when one demangler spells out a nested type that another abbreviates."""
    out: list[str] = []
    depth = 0
    for ch in kernel_id(name):
        if ch == "<":
            depth += 1
            if depth <= 2:
                out.append(ch)
            continue
        if ch == ">":
            depth = max(0, depth - 1)
            if depth <= 1:
                out.append(ch)
            continue
        if depth <= 1:
            out.append(ch)
    return "".join(out)


# ------------------------------------------------------------------------------------------- display
def strip_signature(name: str | None) -> str:
    """Drop a leading return type ``void`` and the trailing parameter list ``(...)`` (None or a non-string is
    ``''``: a report may have a launch without a readable name)."""
    if not isinstance(name, str):
        return ""
    s = name.strip()
    if s.startswith("void "):
        s = s[5:]
    depth = 0
    for i, ch in enumerate(s):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0 and i > 0 and not s.startswith("(anonymous", i):
            return s[:i]
    return s


@lru_cache(maxsize=65536)
def base_name(name: str) -> str:
    """The function's base name, as ncu prints by default: no namespace, no template arguments."""
    s = _ANON.sub("", strip_signature(name))
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
    b = "".join(out).rsplit("::", 1)[-1].strip()
    return b or (name.strip() if isinstance(name, str) else "")


def base_key(name: str) -> str:
    """The join's last fallback key: the base function name, with the template arguments for generic names
    (every CUTLASS ``Kernel`` would otherwise be one kernel)."""
    b = base_name(readable(name))
    return b + _template_args(name) if is_generic(b) else b


def _template_args(name: str) -> str:
    """The first template argument list of the kernel, namespaces dropped (``<cutlass_80_simt_sgemm_...>``)."""
    k = kernel_id(name)
    i = k.find("<")
    return k[i:] if i >= 0 else ""


@lru_cache(maxsize=65536)
def short_name(name: str, width: int = 60) -> str:
    """A readable name: the base name; for generic names (CUTLASS ``Kernel``, ``Kernel2``, ``device_kernel``)
    with the template arguments that tell the kernels apart (``Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_...>``)."""
    b = base_name(readable(name))
    if is_generic(b):
        b += _template_args(name)
    return b if len(b) <= width else b[: width - 1] + "…"


def display_name(name: str, width: int = 60) -> str:
    """The short name, for tables."""
    return short_name(name, width)


# ------------------------------------------------------------------------------------------- classes
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
    if not isinstance(name, str):
        return "other"
    for cls, rx in _RULES:
        if rx.search(name):
            return cls
    return "other"
