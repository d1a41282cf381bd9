"""profctl's NVTX scheme, in one place: the names the workloads push, how any NVTX range text or path is read
back, and the filters nsys and ncu select on.

Push/pop ranges in domain ``profctl``, nested three deep on the thread that runs the workload::

    <backend>[<shape_key>]                 one per case, e.g. sdpa-flash[b1,sq4096,skv4096,h32,kv32,d128,bf16,full,bhsd]
      warmup | measure | setup             the warm-up iterations, the measured ones, the first (checking) call
        <backend>.fwd | <backend>.bwd      one per iteration and pass

Backward kernels run on autograd's worker thread, outside the pushing thread's stack; the workload pushes the
same three-level stack on that thread around the attention's backward (workloads/attention.py), so backward
kernels sit inside ``<backend>[...]/measure/<backend>.bwd`` there too. The measured region of each case is also
bracketed by cudaProfilerStart/Stop, for capture ranges. docs/nvtx.md has the details.

A *path* is one domain's push/pop stack, outermost first, written as ncu's filter syntax writes it:
``domain@outer/inner/leaf`` (no ``domain@`` for the default domain); several domains are joined with `` | ``.
The *canonical path* of a launch (:func:`canonical_path`, docs/summary-schema.md) is what every reader writes in
``nvtx_range``: every domain's push/pop stack and its open start/end ranges (``domain@~text``), in one order.
No dependencies: profctl builds filters without importing torch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from profctl.spec import canonical_backend

DOMAIN = "profctl"
WARMUP = "warmup"
MEASURE = "measure"
SETUP = "setup"
PHASES = (WARMUP, MEASURE, SETUP)
DEFAULT_DOMAIN = "<default domain>"
PATH_SEP = " | "


# ------------------------------------------------------------------------------------------------ writing
def case_range(backend: str, shape_key: str) -> str:
    """The range of one case: ``<backend>[<shape_key>]``."""
    return f"{backend}[{shape_key}]"


def pass_range(backend: str, pass_: str) -> str:
    """The leaf range of one iteration; ``pass_`` is 'fwd' or 'bwd'."""
    return f"{backend}.{pass_}"


def join_path(domain: str | None, ranges: Sequence[str]) -> str:
    """One domain's push/pop stack, outermost first: ``dom@a/b/c`` (the default domain without a prefix)."""
    body = "/".join(ranges)
    if not domain or domain == DEFAULT_DOMAIN:
        return body
    return f"{domain}@{body}"


START_END = "~"


def domain_key(domain: str | None) -> str:
    """'' for the default domain (None, '', ``<default domain>``), else the domain's name."""
    return "" if not domain or domain == DEFAULT_DOMAIN else str(domain)


def canonical_parts(push_pop: Mapping[str, Sequence[str]],
                    start_end: Mapping[str, Iterable[str]] | None = None) -> tuple[str, ...]:
    """The parts of a canonical path (see :func:`canonical_path`), in order."""
    doms: dict[str, tuple[list[str], set[str]]] = {}
    for d, stack in push_pop.items():
        doms.setdefault(domain_key(d), ([], set()))[0].extend(str(x) for x in stack)
    for d, names in (start_end or {}).items():
        doms.setdefault(domain_key(d), ([], set()))[1].update(str(x) for x in names)
    out: list[str] = []
    for d in sorted(doms, key=lambda x: (x != "", x)):
        stack, se = doms[d]
        if stack:
            out.append(join_path(d, stack))
        out += [join_path(d, [START_END + x]) for x in sorted(se)]
    return tuple(out)


def canonical_path(push_pop: Mapping[str, Sequence[str]],
                   start_end: Mapping[str, Iterable[str]] | None = None) -> str | None:
    """The one NVTX path every reader writes for a launch (None when no range was open).

    `push_pop` maps a domain ('' or ``<default domain>`` for the default one) to its push/pop stack on the
    launching thread, outermost first; `start_end` a domain to the start/end ranges open at the launch (any
    thread). Domains in order: the default domain first, then the others by name; per domain its push/pop stack
    ``domain@outer/inner`` and then each open start/end range ``domain@~text``, by text (no report keeps their
    start order). The default domain has no ``domain@`` prefix; parts are joined with `` | ``.
    Example: ``outer | ~step 0 | attnbench@attention[fa4]/scale | attnbench@~epoch 1``.
    """
    return PATH_SEP.join(canonical_parts(push_pop, start_end)) or None


def split_canonical(path: str | None) -> list[tuple[str, str, list[str]]]:
    """The inverse of :func:`canonical_path`: (domain or '', 'push_pop' or 'start_end', ranges) per part."""
    out: list[tuple[str, str, list[str]]] = []
    for part in (path or "").split(PATH_SEP) if path else []:
        dom, ranges = split_path(part)
        if len(ranges) == 1 and ranges[0].startswith(START_END):
            out.append((dom or "", "start_end", [ranges[0][len(START_END):]]))
        else:
            out.append((dom or "", "push_pop", ranges))
    return out


def split_path(path: str | None) -> tuple[str | None, list[str]]:
    """The inverse of :func:`join_path` for the first domain of a path: (domain or None, ranges)."""
    if not path:
        return None, []
    first = path.split(PATH_SEP)[0]
    dom, sep, body = first.partition("@")
    if not sep or "/" in dom:
        return None, first.split("/")
    return dom, body.split("/")


# ------------------------------------------------------------------------------------------------ reading
@dataclass(frozen=True)
class RangeKey:
    """What a range text or path says: backend, pass, shape key, phase and iteration (each None when not said)."""

    backend: str
    pass_: str | None = None
    shape_key: str | None = None
    phase: str | None = None
    iteration: int | None = None


_PASS_RX = re.compile(r"^(?P<b>[^\[\]/]+?)\.(?P<p>fwd|bwd)(?:\.it(?P<it>\d+))?$")
_CASE_RX = re.compile(r"^(?P<b>[^\[\]/]+)\[(?P<s>[^\]]*)\]$")
_DOMAIN_RX = re.compile(r"^[\w.\-]+[@:](?=[^/\[\]]*(?:/|\[|$))")


def is_case_range(text: str) -> bool:
    """True for a ``<backend>[<shape>]`` range text."""
    return bool(_CASE_RX.match(text))


def parse_range(text: str | None) -> RangeKey | None:
    """Read an NVTX / record_function range name or path.

    Accepts ``profctl@sdpa-flash[b1,...]/measure/sdpa-flash.fwd`` (ncu), ``sdpa-flash[...]/measure/sdpa-flash.fwd``
    (torch), ``profctl:eager.fwd`` or ``profctl:eager[...]`` (nsys, one level), ``naive.fwd.it1`` (other scripts'
    per-iteration ranges); several domains joined with `` | ``. Backend names are made canonical (naive -> eager).
    None when the text names no backend.
    """
    if not text:
        return None
    for part in text.split(PATH_SEP):
        key = _parse_one(part.strip())
        if key is not None:
            return key
    return None


def _parse_one(text: str) -> RangeKey | None:
    s = _DOMAIN_RX.sub("", text, count=1)
    backend = pass_ = shape = phase = None
    it: int | None = None
    for c in (c.removeprefix(START_END) for c in s.split("/") if c):
        m = _CASE_RX.match(c)
        if m:
            backend, shape = canonical_backend(m["b"]), m["s"]
            continue
        if c in PHASES:
            phase = c
            continue
        m = _PASS_RX.match(c)
        if m:
            backend, pass_ = canonical_backend(m["b"]), m["p"]
            it = int(m["it"]) if m["it"] is not None else None
    if backend is None:
        return None
    return RangeKey(backend, pass_, shape, phase, it)


def is_pass_range(text: str) -> bool:
    """True for a ``<backend>.fwd|bwd[.itN]`` leaf."""
    return bool(_PASS_RX.match(text))


# ------------------------------------------------------------------------------------------------ nesting
class Interval(Protocol):
    """A range instance on one thread, as the readers give them."""

    tid: int
    start: int
    end: int
    text: str


IntervalT = TypeVar("IntervalT", bound=Interval)


def nest(instances: Iterable[IntervalT]) -> Iterator[tuple[IntervalT, list[IntervalT]]]:
    """Each instance with the instances enclosing it on its own thread, outermost first (push/pop ranges nest
    properly on a thread, so a stack walk in start order recovers the tree)."""
    by_tid: dict[int, list[IntervalT]] = {}
    for i in instances:
        by_tid.setdefault(i.tid, []).append(i)
    for rs in by_tid.values():
        rs.sort(key=lambda i: (i.start, -i.end))
        stack: list[IntervalT] = []
        for i in rs:
            while stack and stack[-1].end < i.end:
                stack.pop()
            yield i, list(stack)
            stack.append(i)


def measured_leaf_path(leaf: Interval, parents: Sequence[Interval], first_case: str | None = None) -> str | None:
    """``<case>/measure/<backend>.<pass>`` for a pass range inside a measure range, None for any other range.

    With nsys capture by cudaProfilerStart, the first case's range was pushed before capture began: its leaves
    have no case range, and `first_case` (``<backend>[<shape>]``) names it when its backend matches."""
    key = parse_range(leaf.text)
    texts = [p.text for p in parents]
    if key is None or key.pass_ is None or MEASURE not in texts:
        return None
    case = next((t for t in reversed(texts) if is_case_range(t)), None)
    if case is None and first_case:
        fk = parse_range(first_case)
        if fk is not None and fk.backend == key.backend:
            case = first_case
    return f"{case}/{MEASURE}/{leaf.text}" if case else f"{MEASURE}/{leaf.text}"


# ------------------------------------------------------------------------------------------------ filters
def ncu_filter(backend: str, pass_: str, shape_key: str | None = None, phase: str = MEASURE) -> str:
    """An ncu ``--nvtx-include`` expression for the kernels of one backend's pass in the measured region.

    Push/pop expressions need the trailing '/'; without it ncu silently matches nothing.
    """
    case = re.escape(case_range(backend, shape_key)) if shape_key else re.escape(backend) + r"\[[^/]*\]"
    return f"regex:{DOMAIN}@{case}/{phase}/{re.escape(pass_range(backend, pass_))}/"


def passes_of(pass_: str) -> list[str]:
    """The leaf passes a workload pass runs: fwd+bwd is both."""
    return ["fwd", "bwd"] if pass_ == "fwd+bwd" else [pass_]


def ncu_include(cases: Iterable[tuple[str, str, str]]) -> str:
    """ONE ``--nvtx-include`` regex selecting the measured range of every (backend, shape key, pass):
    ``profctl@(<case>|...)/measure/(<backend>.<pass>|...)/``.

    One expression, because ncu 2025.3 honours only the first of several --nvtx-include options (seen on the
    H100: with three, only the first backend's kernels were profiled). Each level alternates over exact, escaped
    names (no '/' inside a group), and a pass range only ever nests in its own backend's case range, so the
    product selects exactly the requested (case, pass) pairs.
    """
    cases_rx: list[str] = []
    leaves: list[str] = []
    for backend, shape_key, pass_ in cases:
        c = re.escape(case_range(backend, shape_key))
        if c not in cases_rx:
            cases_rx.append(c)
        for p in passes_of(pass_):
            leaf = re.escape(pass_range(backend, p))
            if leaf not in leaves:
                leaves.append(leaf)

    def group(xs: list[str]) -> str:
        return xs[0] if len(xs) == 1 else "(" + "|".join(xs) + ")"

    return f"regex:{DOMAIN}@{group(cases_rx)}/{MEASURE}/{group(leaves)}/"


def nsys_capture_name() -> str:
    """nsys capture ranges use cudaProfilerStart/Stop; this names the NVTX alternative (--nvtx-capture)."""
    return f"{MEASURE}@{DOMAIN}"
