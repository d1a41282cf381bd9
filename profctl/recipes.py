"""ncu recipes: YAML files naming what to collect (metrics per compute capability, ncu sections or a set),
what each metric means, how to read it, the diagnosis thresholds and hints. Read with ``yaml.safe_load``'s
loader, validated into frozen dataclasses; every error names the file and line.

Built-in recipes live in ``recipes/*.yaml`` at the project root, installed as the package
``profctl.builtin_recipes``; users add their own by path
(``--recipe ./mine.yaml``) or by putting directories on ``PROFCTL_RECIPE_PATH`` (``:``-separated).
See docs/recipes.md for the format.
"""

from __future__ import annotations

import importlib.resources
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import yaml

from profctl.errors import RecipeError, UsageError

ENV_PATH = "PROFCTL_RECIPE_PATH"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
METRIC_RE = re.compile(r"^[a-z][a-z0-9]*__[a-z0-9_]+(\.[a-z0-9_]+)*$")
SECTION_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
SETS = ("basic", "detailed", "full", "nvlink", "pmsampling", "roofline")

#: diagnosis thresholds a recipe may override, with their defaults and meaning (see profctl.analysis.diagnose)
THRESHOLDS: dict[str, tuple[float, str]] = {
    "bound_pct": (
        60.0,
        "SM or memory throughput (% of peak) at or above which a kernel counts as bound by it; "
        "below it on both, latency-bound (ncu's own speed-of-light rule uses 60)",
    ),
    "tensor_low_pct": (
        40.0,
        "tensor-pipe utilisation (% of active cycles) below which an MMA kernel "
        "(flash, gemm) is flagged as leaving the tensor cores idle",
    ),
    "occupancy_ratio": (
        0.8,
        "achieved / theoretical occupancy below which the gap is flagged "
        "(tail effect, imbalance, or warps retiring early)",
    ),
    "dram_high_pct": (
        60.0,
        "DRAM throughput (% of peak) at or above which DRAM is flagged as the memory limiter",
    ),
}

_TOP_KEYS = {"name", "summary", "description", "metrics", "sections", "set", "import_source", "thresholds", "hints"}
_METRIC_KEYS = {"name", "label", "cc", "means", "read"}
_SECTION_KEYS = {"name", "cc"}
_HINT_KEYS = {"when", "say", "cc"}


# ------------------------------------------------------------ dataclasses
@dataclass(frozen=True)
class CcRange:
    """Compute capabilities a metric applies to, e.g. '>=9.0' or '>=8.0,<9.0'; empty means all."""

    text: str = ""
    lo: tuple[int, int] | None = None  # inclusive
    hi: tuple[int, int] | None = None  # exclusive

    def matches(self, cc: tuple[int, int]) -> bool:
        return (self.lo is None or cc >= self.lo) and (self.hi is None or cc < self.hi)


@dataclass(frozen=True)
class MetricSpec:
    name: str
    label: str
    means: str
    read: str
    cc: CcRange = field(default_factory=CcRange)
    line: int = 0


@dataclass(frozen=True)
class SectionSpec:
    name: str
    cc: CcRange = field(default_factory=CcRange)
    line: int = 0


@dataclass(frozen=True)
class Condition:
    """``lhs op rhs``; each side is a number, a metric, or ``number * metric``."""

    lhs: tuple[float, str | None]
    op: str
    rhs: tuple[float, str | None]

    def metrics(self) -> list[str]:
        return [m for _, m in (self.lhs, self.rhs) if m]

    def evaluate(self, values: dict[str, float]) -> bool | None:
        """True/False, or None when a metric it needs is missing."""

        def side(s: tuple[float, str | None]) -> float | None:
            k, m = s
            if m is None:
                return k
            v = values.get(m)
            return None if v is None else k * v

        a, b = side(self.lhs), side(self.rhs)
        if a is None or b is None:
            return None
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[self.op]


@dataclass(frozen=True)
class Hint:
    when: str
    say: str
    conditions: tuple[Condition, ...]
    cc: CcRange = field(default_factory=CcRange)
    line: int = 0

    def fires(self, values: dict[str, float], cc: tuple[int, int] | None = None) -> bool:
        if cc is not None and not self.cc.matches(cc):
            return False
        results = [c.evaluate(values) for c in self.conditions]
        return all(r is True for r in results)


@dataclass(frozen=True)
class Recipe:
    name: str
    summary: str
    description: str
    path: str
    metrics: tuple[MetricSpec, ...] = ()
    sections: tuple[SectionSpec, ...] = ()
    set_name: str | None = None
    thresholds: tuple[tuple[str, float], ...] = ()
    hints: tuple[Hint, ...] = ()
    #: put the kernels' source files into the report (ncu --import-source yes): what the source view shows
    import_source: bool = False

    def metrics_for(self, cc: tuple[int, int] | None) -> list[MetricSpec]:
        """The metrics to collect on a GPU of compute capability `cc` (all of them when cc is None)."""
        return [m for m in self.metrics if cc is None or m.cc.matches(cc)]

    def metric_names(self, cc: tuple[int, int] | None) -> list[str]:
        seen: list[str] = []
        for m in self.metrics_for(cc):
            if m.name not in seen:
                seen.append(m.name)
        return seen

    @property
    def samples_warps(self) -> bool:
        """Whether the recipe collects warp-state samples per instruction (the source and stalls views)."""
        return bool({"SourceCounters", "WarpStateStats"} & {s.name for s in self.sections}) or \
            self.set_name in ("detailed", "full")

    def sections_for(self, cc: tuple[int, int] | None) -> list[str]:
        return [s.name for s in self.sections if cc is None or s.cc.matches(cc)]

    def threshold(self, key: str) -> float:
        return dict(self.thresholds).get(key, THRESHOLDS[key][0])

    def all_thresholds(self) -> dict[str, float]:
        out = {k: v for k, (v, _) in THRESHOLDS.items()}
        out.update(dict(self.thresholds))
        return out

    def line_of(self, metric: str) -> int | None:
        """The recipe line that names `metric` (for errors about it)."""
        base = metric.split(".")[0]
        for m in self.metrics:
            if m.name == metric:
                return m.line
        for m in self.metrics:
            if m.name.split(".")[0] == base:
                return m.line
        return None

    def where(self, metric: str) -> str:
        ln = self.line_of(metric)
        return f"{self.path}:{ln}" if ln else self.path


# ------------------------------------------------------------ YAML with lines
class _Map(dict[Any, Any]):
    line: int = 0
    key_lines: dict[Any, int]


class _Seq(list[Any]):
    line: int = 0
    item_lines: list[int]


class _LineLoader(yaml.SafeLoader):
    """yaml.SafeLoader that remembers the line of every mapping, key and list item, and refuses duplicate
    keys."""


def _construct_map(loader: _LineLoader, node: yaml.MappingNode) -> _Map:
    m = _Map()
    m.line = node.start_mark.line + 1
    m.key_lines = {}
    for knode, vnode in node.value:
        key = loader.construct_object(knode, deep=True)
        if not isinstance(key, str | int | float | bool) and key is not None:
            raise yaml.constructor.ConstructorError(
                None, None, "a key must be a plain value", knode.start_mark
            )
        if key in m:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", knode.start_mark)
        m[key] = loader.construct_object(vnode, deep=True)
        m.key_lines[key] = knode.start_mark.line + 1
    return m


def _construct_seq(loader: _LineLoader, node: yaml.SequenceNode) -> _Seq:
    s = _Seq(loader.construct_object(n, deep=True) for n in node.value)
    s.line = node.start_mark.line + 1
    s.item_lines = [n.start_mark.line + 1 for n in node.value]
    return s


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_map)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_seq)


# ------------------------------------------------------------ loading
def load(path: str | Path) -> Recipe:
    """Read and validate one recipe file; RecipeError 'FILE:LINE: what is wrong' on any problem."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecipeError(f"{p}: no such recipe file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise RecipeError(f"{p}: cannot read: {e}") from None
    try:
        # _LineLoader is a yaml.SafeLoader subclass: safe_load's guarantees (plain data only), plus line numbers
        doc = yaml.load(text, Loader=_LineLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else 0
        raise RecipeError(f"{p}:{line}: invalid YAML: {e.problem or e.context}") from None
    except yaml.YAMLError as e:
        raise RecipeError(f"{p}: invalid YAML: {e}") from None
    return _validate(doc, p)


def _validate(doc: Any, p: Path) -> Recipe:
    if not isinstance(doc, _Map):
        raise RecipeError(f"{p}:1: a recipe is a mapping with name, summary, metrics, ...")
    err = _Err(p)
    err.unknown_keys(doc, _TOP_KEYS, "recipe")
    name = err.string(doc, "name", required=True)
    if not NAME_RE.match(name):
        err.at(doc, "name", f"recipe name {name!r} must be lower-case letters, digits, '-' or '_'")
    summary = err.string(doc, "summary", required=True)
    description = err.string(doc, "description", required=False)
    metrics = _metrics(doc, err)
    sections = _sections(doc, err)
    set_name = doc.get("set")
    if set_name is not None and (not isinstance(set_name, str) or set_name not in SETS):
        err.at(doc, "set", f"set must be one of {', '.join(SETS)} (`ncu --list-sets`), not {set_name!r}")
    if not metrics and not sections and not set_name:
        raise RecipeError(f"{p}:{doc.line}: recipe {name!r} collects nothing: give metrics, sections or a set")
    import_source = doc.get("import_source", False)
    if not isinstance(import_source, bool):
        err.at(doc, "import_source", f"import_source must be true or false, not {import_source!r}")
    return Recipe(
        name=name,
        summary=summary,
        description=description,
        path=str(p),
        metrics=tuple(metrics),
        sections=tuple(sections),
        set_name=set_name,
        thresholds=tuple(_thresholds(doc, err)),
        hints=tuple(_hints(doc, err, {m.name for m in metrics}, open_ended=bool(sections or set_name))),
        import_source=import_source,
    )


def _metrics(doc: _Map, err: _Err) -> list[MetricSpec]:
    """The metrics list: each {name, label, means, read[, cc]}, a valid ncu name, none listed twice."""
    metrics: list[MetricSpec] = []
    raw = doc.get("metrics", [])
    if raw is None:
        raw = _Seq()
    if not isinstance(raw, list):
        err.at(doc, "metrics", "metrics must be a list of {name, label, means, read[, cc]}")
    for item, line in _items(raw):
        if not isinstance(item, _Map):
            raise RecipeError(f"{err.p}:{line}: a metric is a mapping with name, label, means, read (and cc)")
        err.unknown_keys(item, _METRIC_KEYS, "metric")
        mname = err.string(item, "name", required=True)
        if not METRIC_RE.match(mname):
            err.at(item, "name", f"{mname!r} is not an ncu metric name (unit__counter[.rollup[.submetric]], "
                                 "e.g. sm__throughput.avg.pct_of_peak_sustained_elapsed)")
        metrics.append(MetricSpec(name=mname, label=err.string(item, "label", required=True),
                                  means=err.string(item, "means", required=True),
                                  read=err.string(item, "read", required=True), cc=err.cc(item), line=item.line))
    seen: dict[tuple[str, str], int] = {}
    for m in metrics:
        k = (m.name, m.cc.text)
        if k in seen:
            raise RecipeError(f"{err.p}:{m.line}: metric {m.name} listed twice (first at line {seen[k]})")
        seen[k] = m.line
    return metrics


def _sections(doc: _Map, err: _Err) -> list[SectionSpec]:
    """The sections list: identifiers, or {name, cc}."""
    sections: list[SectionSpec] = []
    raw = doc.get("sections", []) or []
    if not isinstance(raw, list):
        err.at(doc, "sections", "sections must be a list of ncu section identifiers (e.g. SpeedOfLight)")
    for item, line in _items(raw):
        if isinstance(item, str):
            sname, cc, sline = item, CcRange(), line
        elif isinstance(item, _Map):
            err.unknown_keys(item, _SECTION_KEYS, "section")
            sname, cc, sline = err.string(item, "name", required=True), err.cc(item), item.line
        else:
            raise RecipeError(f"{err.p}:{line}: a section is an identifier or {{name, cc}}")
        if not SECTION_RE.match(sname):
            raise RecipeError(f"{err.p}:{sline}: {sname!r} is not an ncu section identifier (e.g. SpeedOfLight; "
                              "`ncu --list-sections` lists them)")
        sections.append(SectionSpec(name=sname, cc=cc, line=sline))
    return sections


def _thresholds(doc: _Map, err: _Err) -> list[tuple[str, float]]:
    """Overrides of the diagnosis thresholds: known names, non-negative numbers."""
    out: list[tuple[str, float]] = []
    raw = doc.get("thresholds") or _Map()
    if not isinstance(raw, dict):
        err.at(doc, "thresholds", f"thresholds must be a mapping of {', '.join(THRESHOLDS)}")
    for k, v in raw.items():
        line = raw.key_lines.get(k, doc.line) if isinstance(raw, _Map) else doc.line
        if k not in THRESHOLDS:
            raise RecipeError(f"{err.p}:{line}: unknown threshold {k!r}; known: {', '.join(THRESHOLDS)}")
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
            raise RecipeError(f"{err.p}:{line}: threshold {k} must be a non-negative number, not {v!r}")
        _threshold_unit(k, float(v), f"{err.p}:{line}")
        out.append((k, float(v)))
    return out


def _threshold_unit(key: str, v: float, where: str) -> None:
    """One reading per threshold, the one its name says: `*_pct` in percent (60 is 60 %), `*_ratio` a fraction
    (0.8). A value that only makes sense in the other unit (`bound_pct: 0.6`, `occupancy_ratio: 80`) is refused,
    not read as a threshold of 0.6 % or 8000 %."""
    if key.endswith("_pct") and not 1 <= v <= 100:
        raise RecipeError(f"{where}: threshold {key} is in percent, 1 to 100 (60 for 60 %), not {v:g}")
    if key.endswith("_ratio") and not 0 < v <= 1:
        raise RecipeError(f"{where}: threshold {key} is a fraction, above 0 and at most 1 (0.8 for 80 %), not {v:g}")


def _hints(doc: _Map, err: _Err, collected: set[str], *, open_ended: bool) -> list[Hint]:
    """The hints: {when, say[, cc]}; a condition may only use metrics the recipe collects (unless sections or a
    set make what is collected open-ended)."""
    hints: list[Hint] = []
    raw = doc.get("hints", []) or []
    if not isinstance(raw, list):
        err.at(doc, "hints", "hints must be a list of {when, say[, cc]}")
    for item, line in _items(raw):
        if not isinstance(item, _Map):
            raise RecipeError(f"{err.p}:{line}: a hint is a mapping with when and say (and cc)")
        err.unknown_keys(item, _HINT_KEYS, "hint")
        when = err.string(item, "when", required=True)
        wline = item.key_lines.get("when", item.line)
        try:
            conds = parse_when(when)
        except ValueError as e:
            raise RecipeError(f"{err.p}:{wline}: hint condition {when!r}: {e}") from None
        for c in conds:
            for mname in c.metrics():
                if mname not in collected and not open_ended:
                    raise RecipeError(f"{err.p}:{wline}: hint uses {mname}, which this recipe does not collect "
                                      "(add it to metrics)")
        hints.append(Hint(when=when, say=err.string(item, "say", required=True), conditions=tuple(conds),
                          cc=err.cc(item), line=item.line))
    return hints


def _items(seq: Any) -> Iterator[tuple[Any, int]]:
    lines = getattr(seq, "item_lines", None) or [getattr(seq, "line", 0)] * len(seq)
    yield from zip(seq, lines, strict=False)


class _Err:
    def __init__(self, p: Path) -> None:
        self.p = p

    def at(self, m: _Map, key: str, msg: str) -> NoReturn:
        line = m.key_lines.get(key, m.line)
        raise RecipeError(f"{self.p}:{line}: {msg}")

    def unknown_keys(self, m: _Map, allowed: set[str], what: str) -> None:
        for k in m:
            if k not in allowed:
                raise RecipeError(
                    f"{self.p}:{m.key_lines.get(k, m.line)}: unknown {what} key {k!r}; "
                    f"allowed: {', '.join(sorted(allowed))}"
                )

    def string(self, m: _Map, key: str, *, required: bool) -> str:
        if key not in m or m[key] is None:
            if required:
                raise RecipeError(f"{self.p}:{m.line}: missing {key!r}")
            return ""
        v = m[key]
        if not isinstance(v, str) or not v.strip():
            self.at(m, key, f"{key} must be a non-empty string, not {v!r}")
        return " ".join(str(v).split()) if key != "description" else str(v).strip()

    def cc(self, m: _Map) -> CcRange:
        if "cc" not in m or m["cc"] is None:
            return CcRange()
        try:
            return parse_cc(str(m["cc"]))
        except ValueError as e:
            self.at(m, "cc", f"cc {m['cc']!r}: {e}")


_CC_PART = re.compile(r"^\s*(>=|<=|>|<|==)?\s*(\d+)\.(\d+)\s*$")


def parse_cc(text: str) -> CcRange:
    """'>=9.0', '>=8.0,<9.0', '9.0' (exactly), '<=8.9' -> CcRange."""
    lo: tuple[int, int] | None = None
    hi: tuple[int, int] | None = None
    for part in text.split(","):
        m = _CC_PART.match(part)
        if not m:
            raise ValueError(
                "write compute capabilities as MAJOR.MINOR with >=, >, <=, < or == (e.g. '>=9.0')"
            )
        op, v = m.group(1) or "==", (int(m.group(2)), int(m.group(3)))
        nxt = (v[0], v[1] + 1)
        if op == ">=":
            lo = v
        elif op == ">":
            lo = nxt
        elif op == "<":
            hi = v
        elif op == "<=":
            hi = nxt
        else:
            lo, hi = v, nxt
    if lo is not None and hi is not None and lo >= hi:
        raise ValueError("the range is empty")
    return CcRange(text=text.strip(), lo=lo, hi=hi)


_COND = re.compile(r"^\s*(?P<lhs>.+?)\s*(?P<op><=|>=|==|!=|<|>)\s*(?P<rhs>.+?)\s*$")
_SIDE = re.compile(
    r"^(?:(?P<k>[0-9]*\.?[0-9]+)\s*\*\s*)?(?P<m>[a-z][a-z0-9]*__[a-z0-9_.]+)$|^(?P<n>-?[0-9]*\.?[0-9]+)$"
)


def parse_when(text: str) -> list[Condition]:
    """'A < 40', 'A < 40 and B >= 60', 'A < 0.8 * B' -> conditions (all must hold)."""
    out = []
    for part in re.split(r"\s+and\s+", text.strip()):
        m = _COND.match(part)
        if not m:
            raise ValueError("expected METRIC OP VALUE (OP one of < <= > >= == !=), joined with 'and'")
        out.append(Condition(_side(m.group("lhs")), m.group("op"), _side(m.group("rhs"))))
    if not any(c.metrics() for c in out):
        raise ValueError("a condition must name at least one metric")
    return out


def _side(s: str) -> tuple[float, str | None]:
    m = _SIDE.match(s.strip())
    if not m:
        raise ValueError(f"{s.strip()!r} is neither a number, a metric, nor NUMBER * METRIC")
    if m.group("n") is not None:
        return float(m.group("n")), None
    name = m.group("m")
    if not METRIC_RE.match(name):
        raise ValueError(f"{name!r} is not an ncu metric name")
    return float(m.group("k") or 1.0), name


# ------------------------------------------------------------ lookup
def builtin_dir() -> Path:
    """The built-in recipes, found through the installed package: the top-level recipes/ folder ships as the
    package profctl.builtin_recipes (pyproject's package-dir), in a wheel and in an editable install alike."""
    return Path(str(importlib.resources.files("profctl.builtin_recipes")))


def search_dirs() -> list[Path]:
    dirs = [builtin_dir()]
    for d in os.environ.get(ENV_PATH, "").split(os.pathsep):
        if d.strip():
            dirs.append(Path(d).expanduser())
    return dirs


def available() -> dict[str, Path]:
    """Recipe name -> file, built-ins first; a later directory on PROFCTL_RECIPE_PATH overrides an
    earlier one."""
    out: dict[str, Path] = {}
    for d in search_dirs():
        if d.is_dir():
            for f in sorted(d.glob("*.yaml")) + sorted(d.glob("*.yml")):
                out[f.stem] = f
    return out


def resolve(name_or_path: str) -> Path:
    """A recipe name (built-in or on PROFCTL_RECIPE_PATH) or a path to a .yaml file."""
    s = name_or_path.strip()
    p = Path(s).expanduser()
    looks_like_path = "/" in s or s.endswith((".yaml", ".yml")) or os.sep in s
    if looks_like_path:
        if not p.exists():
            raise UsageError(f"recipe file {s} does not exist")
        return p
    avail = available()
    if s in avail:
        return avail[s]
    if p.is_file():
        return p
    raise UsageError(
        f"unknown recipe {s!r}; choose from {', '.join(sorted(avail)) or '(none found)'} "
        "or give a path to a .yaml file"
    )


def get(name_or_path: str) -> Recipe:
    """Resolve and load one recipe."""
    return load(resolve(name_or_path))


def load_all() -> list[Recipe]:
    """Every available recipe, validated (a broken one raises)."""
    return [load(p) for _, p in sorted(available().items())]
