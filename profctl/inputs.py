"""What the user points profctl at, resolved: a report file, a bench JSON, a run directory, a directory of runs,
or a run of the run store by id or 'latest' -- and how each is read. `profctl report`, `profctl compare`,
`profctl show` and the Python API (`profctl.read`) all go through here, so they accept the same things.

Readers (profctl.readers) read files; a file that needs its tool first is converted here: an ``.nsys-rep`` is
exported to SQLite by nsys (a fresh ``.sqlite`` beside it is used instead), and an ``.ncu-rep`` without the
ncu_report module is exported to CSV by ``ncu --import``. Conversions go to a temporary directory: the user's
folder is never written. Every command that reads loads this module, so a format's reader and tool are imported
where that format is met, as profctl.readers.read imports its readers by name: a command pays only for the
formats it reads.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profctl import readers, run_store
from profctl.errors import BadReport, NotComparable, ProfctlError, ReaderMissing, ToolNotFound, UsageError
from profctl.readers import KIND_WORDS, bench_json
from profctl.readers._compressed import plain_copy, plain_name
from profctl.schema import Source, Summary, concat
from profctl.schema.bench import BenchRow, bench_rows

#: the files of a run directory, per tool, in the order they are read
RUN_FILES: tuple[tuple[str, str], ...] = (("bench", "bench.json"), ("nsys", "profile.sqlite"),
                                          ("ncu", "profile.ncu-rep"), ("torch", "trace.json.gz"))
SUMMARY_NAME = "summary.json"
_TOOL_OF_KIND = {"nsys-sqlite": "nsys", "nsys-rep": "nsys", "ncu-rep": "ncu", "ncu-csv": "ncu",
                 "torch-trace": "torch", "summary-json": "summary", "bench-json": "bench",
                 "proton-trace": "proton", "proton-tree": "proton"}
_PATH_SUFFIXES = (".sqlite", ".nsys-rep", ".qdrep", ".ncu-rep", ".csv", ".json", ".gz", ".chrome_trace", ".hatchet")
#: Proton's outputs in a run directory of profctl proton (one per case), read in name order
PROTON_FILES = (("proton-trace", "*.chrome_trace"), ("proton-tree", "*.hatchet"))


@dataclass(frozen=True)
class Input:
    """One file to read, with what it is and the run directory it belongs to (None for a loose file)."""

    path: Path
    kind: str
    run_dir: Path | None = None

    @property
    def tool(self) -> str:
        return _TOOL_OF_KIND.get(self.kind, self.kind)

    @property
    def what(self) -> str:
        """What the file is, in words (for messages)."""
        return KIND_WORDS.get(self.kind, self.kind)

    @property
    def in_run(self) -> bool:
        return self.run_dir is not None


# ------------------------------------------------------------------------------------------------ resolving
def resolve(ref: str | Path, *, root: Path | str | None = None) -> list[Input]:
    """The inputs `ref` names: a file as it is; a run directory by the files profctl writes there; a
    directory of run directories by its children; else a run of the store (id, unique part of it, 'latest').
    BadReport (a missing file, a directory with nothing readable) or UsageError (no such run) otherwise."""
    p = Path(ref)
    if p.is_file():
        return [file_input(p)]
    if p.is_dir():
        found = run_inputs(p)
        if not found:
            for child in sorted(c for c in p.iterdir() if c.is_dir()):
                found += run_inputs(child)
        if not found:
            raise BadReport(f"{p}: a directory with no {', '.join(n for _, n in RUN_FILES)} (nor run directories "
                            "holding them)")
        return found
    if _looks_like_path(str(ref)):
        raise BadReport(f"{p}: no such file")
    info = run_store.load_run(ref, root)
    found = run_inputs(info.path)
    if not found:
        raise BadReport(f"run {info.run_id} ({info.kind}, {info.status}) holds no report to read")
    return found


def resolve_all(refs: Iterable[str | Path], *, root: Path | str | None = None) -> list[Input]:
    return [i for r in refs for i in resolve(r, root=root)]


def _looks_like_path(s: str) -> bool:
    return "/" in s or s.lower().endswith(_PATH_SUFFIXES)


def file_input(p: Path) -> Input:
    """A file by its content (readers.sniff); in a run directory when a manifest sits beside it."""
    kind = readers.sniff(p)
    return Input(path=p, kind=kind, run_dir=p.parent if (p.parent / run_store.MANIFEST).is_file() else None)


def run_inputs(d: Path) -> list[Input]:
    """The report files of one run directory (bench rows, nsys export, ncu report, torch trace); a run spread
    over workers keeps each part's reports in its ``part-<i>-gpu<k>/`` folder (read as a run of its own: its
    workload events name its first case)."""
    out = []
    for tool, name in RUN_FILES:
        f = d / name
        if f.is_file():
            kind = {"bench": "bench-json", "nsys": "nsys-sqlite", "ncu": "ncu-rep", "torch": "torch-trace"}[tool]
            out.append(Input(path=f, kind=kind, run_dir=d))
    traced: set[str] = set()
    for kind, pattern in PROTON_FILES:
        files = [f for f in sorted(d.glob(pattern)) if f.is_file()]
        # a sampled case's tree (its scopes' totals over every CTA) is part of its trace's figures, not a
        # timeline of its own: one input per case
        out += [Input(path=f, kind=kind, run_dir=d) for f in files if f.name.rsplit(".", 1)[0] not in traced]
        traced |= {f.name.rsplit(".", 1)[0] for f in files}
    if (d / run_store.MANIFEST).is_file():
        for part in sorted((p for p in d.glob("part-*") if p.is_dir()), key=_part_number):
            out += [i for i in run_inputs(part) if i.kind != "bench-json"]
    return out


def _part_number(p: Path) -> tuple[int, str]:
    num = p.name.split("-")[1] if p.name.count("-") >= 2 else ""
    return (int(num) if num.isdigit() else 1 << 30, p.name)


# ------------------------------------------------------------------------------------------------ reading
def read(ref: str | Path | Input, **options: Any) -> Summary:
    """Any report as a Summary (`options` go to the reader, e.g. by_range=True). A reference that resolves
    to several files (a run directory) gives their concatenation."""
    if isinstance(ref, Input):
        return read_summary(ref, **options)
    ins = [i for i in resolve(ref) if i.kind != "bench-json"]
    if not ins:
        raise BadReport(f"{ref}: bench rows only: they have no per-kernel summary")

    return concat(read_summary(i, **options) for i in ins)


def read_summary(inp: Input, **options: Any) -> Summary:
    """One input as a Summary, converting through its tool where a reader cannot read the file itself."""
    if inp.kind == "nsys-rep":
        return _read_nsys_rep(inp.path, **options)
    if inp.kind == "ncu-rep":
        try:
            return readers.read(inp.path, kind=inp.kind, **options)
        except ReaderMissing as e:
            return _read_ncu_rep_with_ncu(inp.path, e, **options)
    return readers.read(inp.path, kind=inp.kind, **options)


def read_profiles(ref: str | Path, *, root: Path | str | None = None, kernels: Sequence[str] | None = None
                  ) -> list[Any]:
    """Every kernel launch of the Nsight Compute report(s) `ref` names, in depth (warp samples per instruction,
    source lines, ncu's findings): profctl.schema.profile.KernelProfile; with `kernels` (regexes over name, base
    name and NVTX path), only the launches they pick in depth, the others by their names only. Only an .ncu-rep
    holds them; any other input is a BadReport saying what to give instead."""
    from profctl.readers.ncu_profiles import read_profiles as read_rep

    inps = resolve(ref, root=root)
    reps = [i for i in inps if i.kind == "ncu-rep"]
    if not reps:
        kinds = ", ".join(sorted({i.what for i in inps})) or "nothing readable"
        raise BadReport(f"{ref}: holds {kinds}, not an Nsight Compute report (.ncu-rep): source lines, warp stalls "
                        "and explain need one (profctl ncu --recipe stalls, or ncu -o FILE)")
    out: list[Any] = []
    for i in reps:
        out += read_rep(i.path, kernels=kernels)
    return out


def read_rows(inp: Input) -> list[BenchRow]:
    """The bench rows of a bench input."""
    return bench_json.read(inp.path)


def read_for_join(inp: Input) -> Summary:
    """A Summary with per-range rows for the cross-tool join: an nsys export of a profctl run per range *path*
    (measured iterations, per shape and pass); an ncu run's summary.json when its report cannot be read."""
    from profctl.readers import nsys_sqlite

    if inp.in_run and inp.kind == "nsys-sqlite":
        s = nsys_sqlite.read_paths(inp.path, first_case=first_case(inp.run_dir))
        if s.kernels:
            return s
        return nsys_sqlite.read(inp.path, by_range=True, window="profiler-api")  # not profctl's NVTX scheme
    if inp.in_run and inp.kind == "ncu-rep":
        try:
            return read_summary(inp, by_range=True)
        except BadReport:
            alt = inp.path.parent / SUMMARY_NAME
            if alt.exists():
                return readers.read(alt)
            raise
    return read_summary(inp, by_range=True)


def first_case(run_dir: Path | None) -> str | None:
    """``<backend>[<shape>]`` of the first case a run's workload ran (its events file)."""
    from profctl.spec import AttentionSpec

    if run_dir is None:
        return None

    for name in ("rows.jsonl", "workload.jsonl", "events.jsonl"):
        for ev in run_store.read_events(run_dir / name):
            spec = ev.get("spec")
            if isinstance(spec, dict) and "backend" in spec:
                try:
                    return AttentionSpec.from_dict(spec).case_id
                except (TypeError, ValueError):
                    return None
    return None


def device_of(inp: Input) -> str | None:
    """The device a run's manifest names (the workload's device event: a GPU model, or 'cpu'), None for loose
    files."""
    if inp.run_dir is None:
        return None
    try:
        d = run_store.read_manifest(inp.run_dir).get("device") or {}
    except ProfctlError:
        return None
    if isinstance(d, dict):
        name = d.get("name") or d.get("nvml_name")
        return str(name) if name else None
    return None


# ------------------------------------------------------------------------------------------------ runs to compare
@dataclass
class Side:
    """One side of a comparison as read: a bench run's rows, or a kernel summary, with its run's manifest; a side
    given as several runs (``A1,A2,A3``) keeps each as a member."""

    ref: str
    kind: str  # "bench" | "summary" (| "ab": the two variants of profctl bench --ab)
    path: Path
    name: str
    manifest: run_store.Manifest = field(default_factory=run_store.Manifest)
    status: str | None = None
    rows: list[BenchRow] = field(default_factory=list)
    summary: Summary | None = None
    #: the runs of a side given as several (``A1,A2,A3``): each a Side of one run; empty for one run
    members: list[Side] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rows = bench_rows(self.rows)  # rows given as JSON objects
        if isinstance(self.manifest, dict):  # a manifest given as stored
            self.manifest = run_store.Manifest.from_dict(self.manifest)

    @property
    def runs(self) -> list[Side]:
        """The side's runs: its members, or itself."""
        return self.members or [self]

    def gpu(self) -> str | None:
        """The GPU its run names (manifest), else the GPUs its summary names."""
        if self.manifest.gpu:
            return self.manifest.gpu
        if self.summary is not None:
            names = _summary_gpus(self.summary.meta)
            if names:
                return ", ".join(sorted(names))
        return None

    def describe(self) -> dict[str, Any]:
        m = self.manifest
        out: dict[str, Any] = {"ref": self.ref, "kind": self.kind, "path": str(self.path), "name": self.name,
                               "run_id": m.run_id, "status": self.status, "label": m.label, "gpu": self.gpu(),
                               "git": m.commit}
        if self.members:
            out["runs"] = [r.describe() for r in self.members]
        return out


def _summary_gpus(meta: dict[str, Any]) -> set[str]:
    out: set[str] = set()
    for g in meta.get("gpus") or []:
        if isinstance(g, dict) and g.get("name"):
            out.add(str(g["name"]))
    for d in meta.get("devices") or []:
        if isinstance(d, dict) and d.get("device"):
            out.add(str(d["device"]))
        elif isinstance(d, str) and d:
            out.add(d)
    return out


def kind_words(s: Side) -> str:
    return "a bench run" if s.kind == "bench" else "a kernel summary"


def load_sides(refs: str | Path, root: Path | str | None = None) -> Side:
    """One side of a comparison: a run or file (:func:`load_side`), or several runs of the same thing given as a
    comma list (``A1,A2,A3``), whose scatter measures the noise between runs."""
    parts = [p.strip() for p in str(refs).split(",")] if "," in str(refs) and not Path(refs).exists() else [str(refs)]
    if any(not p for p in parts):
        raise UsageError(f"{refs!r}: an empty run in the comma list")
    if len(parts) == 1:
        return load_side(parts[0], root)
    runs = [load_side(p, root) for p in parts]
    kinds = {r.kind for r in runs}
    if len(kinds) > 1:
        raise NotComparable(f"{refs}: the runs of one side must be of one kind (bench runs or summaries), not "
                            f"{' and '.join(sorted(kind_words(r) for r in runs))}")
    names = [r.name for r in runs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"{refs}: {', '.join(twice)} given twice in one side")
    first = runs[0]
    return Side(ref=str(refs), kind=first.kind, path=first.path, name=f"{first.name} (+{len(runs) - 1} more)",
                manifest=first.manifest, status=first.status, rows=list(first.rows), summary=first.summary,
                members=runs)


def load_side(ref: str | Path, root: Path | str | None = None) -> Side:
    """A run (directory, id, unique part of an id, 'latest'), a bench JSON file, a summary file or a report."""
    p = Path(ref)
    if p.is_file() and p.name != run_store.MANIFEST:
        inp = file_input(p)
        manifest = run_store.Manifest()
        status = None
        if inp.run_dir is not None:
            info = run_store.load_run_dir(inp.run_dir)
            manifest, status = run_store.Manifest.from_dict(info.manifest), info.status
        common: dict[str, Any] = {"ref": str(ref), "path": p, "name": p.name, "manifest": manifest, "status": status}
        if inp.kind == "bench-json":
            return Side(kind="bench", rows=bench_json.read(p, strict=False), **common)
        return Side(kind="summary", summary=read_summary(inp), **common)
    info = run_store.load_run(ref, root)
    d = info.path
    if info.status == "unreadable":
        raise BadReport(info.note or f"{d}: unreadable manifest")
    run: dict[str, Any] = {"ref": str(ref), "path": d, "name": info.run_id,
                           "manifest": run_store.Manifest.from_dict(info.manifest), "status": info.status}
    if (d / "bench.json").is_file():
        return Side(kind="bench", rows=bench_json.read(d / "bench.json", strict=False), **run)
    if (d / SUMMARY_NAME).is_file():
        return Side(kind="summary", summary=read_summary(file_input(d / SUMMARY_NAME)), **run)
    reports = [i for i in run_inputs(d) if i.kind != "bench-json"]
    if reports:
        return Side(kind="summary", summary=concat(read_summary(i) for i in reports), **run)
    if info.kind == "ab":
        raise BadReport(f"run {info.run_id} is an A/B (profctl bench --ab): it holds its own comparison of its two "
                        f"variants; profctl show {info.run_id}")
    raise BadReport(f"run {info.run_id} ({info.kind}) holds nothing to compare: no bench.json, no summary JSON, "
                    "no report file")


# ------------------------------------------------------------------------------------------------ via tools
def _read_nsys_rep(p: Path, **options: Any) -> Summary:
    """A fresh .sqlite beside the report, else an export by nsys into a temporary folder."""
    from profctl.readers import nsys_sqlite

    with _nsys_rep_sqlite(p) as (db, exported):
        s = nsys_sqlite.read(db, **options)
    if not exported:
        return s
    return Summary(sources=(Source(path=str(p), tool="nsys", tool_version=s.sources[0].tool_version),),
                   kernels=s.kernels, ranges=s.ranges, meta=s.meta)


@contextlib.contextmanager
def _nsys_rep_sqlite(p: Path) -> Iterator[tuple[Path, bool]]:
    """(the SQLite export of the .nsys-rep `p`, whether nsys made it here): a fresh .sqlite beside the report,
    else nsys' export into a temporary folder, removed afterwards (on a failed export it stays, with its log)."""
    from profctl.tools import nsys

    beside = p.with_name(Path(plain_name(p)).stem + ".sqlite")
    if beside.exists() and beside.stat().st_mtime >= p.stat().st_mtime:
        yield beside, False
        return
    try:
        exe = nsys.find()
    except ToolNotFound as e:
        raise ToolNotFound(f"{p}: reading an .nsys-rep needs nsys to export it to SQLite, and {e.message}",
                           hint="export it where nsys is installed (nsys export --type sqlite FILE.nsys-rep) and "
                                "pass the .sqlite") from None
    tmp = Path(tempfile.mkdtemp(prefix="profctl-nsys-"))
    out = tmp / (Path(plain_name(p)).stem + ".sqlite")
    with plain_copy(p, default_name="report.nsys-rep") as rep:  # an .nsys-rep.gz: nsys reads it decompressed
        nsys.export_sqlite(exe, rep, out, log=tmp / "export.log")  # on failure the folder stays, with its log
    try:
        yield out, True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def nsys_sqlite_of(inp: Input) -> Iterator[Path]:
    """The plain SQLite file of an nsys input, for what reads the export itself (a timeline): the file, a
    decompressed temporary copy of a ``.sqlite.gz``, or the export of an ``.nsys-rep`` (as :func:`read_summary`
    gets it). The user's files are never written."""
    if inp.kind == "nsys-rep":
        with _nsys_rep_sqlite(inp.path) as (db, _):
            yield db
        return
    if inp.kind != "nsys-sqlite":
        raise BadReport(f"{inp.path}: a {inp.tool} report, not an nsys export")

    with plain_copy(inp.path, default_name="report.sqlite") as plain:
        yield plain


def _read_ncu_rep_with_ncu(p: Path, missing: BadReport, *, by_range: bool = True, **_: Any) -> Summary:
    """The report through ``ncu --import``, when the ncu_report module is missing."""
    from profctl.readers import ncu_rep

    launches, version, reader = ncu_import_launches(p, missing)
    return ncu_rep.summarize(launches, path=p, tool_version=version, by_range=by_range, reader=reader)


def ncu_import_launches(p: Path, missing: BadReport | None = None) -> tuple[list[Any], str | None, str]:
    """(launches, writer's version, reader) of a report exported by ``ncu --import FILE --csv --page raw
    --print-units base`` and read by the CSV reader."""
    from profctl.readers import ncu_csv, ncu_rep
    from profctl.tools import ncu

    try:
        exe = ncu.find()
    except ToolNotFound:
        why = missing.message if missing else f"{p}: reading .ncu-rep needs the ncu_report module"
        raise BadReport(f"{why} or Nsight Compute's ncu; neither is here") from None
    ver = ncu.version(exe)
    with ncu_rep.plain_report(p) as rep:
        info = ncu_rep.check_rep(rep)
        if ncu_rep.newer_than(info.tool_version, ver):
            raise BadReport(f"{p}: written by Nsight Compute {info.tool_version}, newer than this ncu ({ver}); "
                            "install a newer Nsight Compute or pip install 'profctl[ncu]'")
        with tempfile.TemporaryDirectory(prefix="profctl-ncu-") as td:
            out = Path(td) / "raw.csv"
            try:
                ncu.export_csv(exe, rep, out, page="raw")
            except ProfctlError as e:
                raise BadReport(f"{p}: ncu --import failed: {e.message}") from None
            launches = ncu_csv.read_launches(out, shown_as=p)
    return launches, info.tool_version, f"ncu --import ({ver})"
