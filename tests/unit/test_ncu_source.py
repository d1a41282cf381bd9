"""Source lines and warp stalls read from real Nsight Compute reports of kernels with bottlenecks planted at known
lines (tests/data/planted: recorded with plain `ncu --set full --import-source yes` on an H200, not through
profctl). The planted line of each kernel must come out on top with the stall reasons that bottleneck causes; its
well-behaved twin must not show them; ncu's own source page (its CSV export of the same report) must agree with
profctl's per-line sample counts."""

from __future__ import annotations

import csv
import io
import lzma
from functools import cache
from pathlib import Path

import pytest

from profctl.analysis import source
from profctl.readers.ncu_profiles import read_profiles
from profctl.schema.profile import KernelProfile

pytest.importorskip("ncu_report")

PLANTED = Path(__file__).resolve().parents[1] / "data" / "planted"


@cache
def profiles(name: str) -> dict[str, KernelProfile]:
    return {p.base_name: p for p in read_profiles(PLANTED / f"{name}.ncu-rep.xz")}


def marker_line(p: KernelProfile, marker: str) -> tuple[str, int]:
    """(file, line) of the line whose text carries `marker`, from the source text the report itself embeds."""
    hits = [(f, n) for f, lines in p.source_text.items() for n, t in lines.items() if marker in t]
    assert len(hits) == 1, hits
    return hits[0]


def test_the_report_embeds_the_recorded_source_unchanged() -> None:
    p = profiles("planted_cuda")["gather_strided"]
    (f, n) = marker_line(p, "PLANT: uncoalesced")
    assert Path(f).name == "planted.cu"
    assert (PLANTED / "planted.cu").read_text().splitlines()[n - 1].strip() == p.source_text[f][n].strip()


@pytest.mark.parametrize("kernel, marker, reasons", [
    ("gather_strided", "PLANT: uncoalesced", {"long_scoreboard", "lg_throttle"}),
    ("exp_loop", "PLANT: exp", {"mio_throttle", "short_scoreboard"}),
    ("smem_conflict", "PLANT: bank conflict", {"mio_throttle", "short_scoreboard"}),
])
def test_the_planted_line_is_the_hottest_and_its_stalls_fit(kernel: str, marker: str, reasons: set[str]) -> None:
    p = profiles("planted_cuda")[kernel]
    v = source.view(p, 5)
    top = v.lines[0]
    assert (top.file, top.line) == marker_line(p, marker)
    assert top.share > 0.8
    assert top.top_stalls(1)[0][0] in reasons, (kernel, top.top_stalls(3))
    assert sum(top.stalls.get(r, 0) for r in reasons) / top.samples > 0.6


@pytest.mark.parametrize("planted, twin, reason, floor", [
    ("gather_strided", "gather_coalesced", "lg_throttle", 0.2),
    ("exp_loop", "fma_loop", "mio_throttle", 0.5),
    ("smem_conflict", "smem_padded", "mio_throttle", 0.5),
])
def test_the_twin_has_no_such_stall(planted: str, twin: str, reason: str, floor: float) -> None:
    share = {s.reason: s.share for s in source.stall_breakdown(profiles("planted_cuda")[planted])}
    twin_share = {s.reason: s.share for s in source.stall_breakdown(profiles("planted_cuda")[twin])}
    assert share[reason] > floor
    assert twin_share.get(reason, 0.0) < 0.05
    assert profiles("planted_cuda")[twin].duration_ns < profiles("planted_cuda")[planted].duration_ns / 4


def test_bank_conflict_ways_and_uncoalesced_sectors_on_the_line() -> None:
    conflict = source.view(profiles("planted_cuda")["smem_conflict"]).lines[0]
    assert conflict.memory["smem_nway"] == 32
    padded = source.hot_lines(profiles("planted_cuda")["smem_padded"], None)[0]
    assert max(h.memory.get("smem_nway", 1) for h in padded) == 1
    strided = source.view(profiles("planted_cuda")["gather_strided"]).lines[0]
    coalesced = source.view(profiles("planted_cuda")["gather_coalesced"]).lines[0]
    assert strided.memory["excessive_sectors"] > 20 * coalesced.memory.get("excessive_sectors", 1)


def test_ncus_findings_point_at_the_planted_lines() -> None:
    p = profiles("planted_cuda")["gather_strided"]
    f = next(f for f in source.ranked_findings(p) if f.rule == "UncoalescedGlobalAccess")
    file, line = marker_line(p, "PLANT: uncoalesced")
    assert f"{source.short_path(file)}:{line}" in f.where
    assert f.speedup and f.speedup > 50
    q = profiles("planted_cuda")["smem_conflict"]
    rules = {f.rule for f in source.ranked_findings(q)}
    assert rules & {"SharedMemoryConflicts", "UncoalescedSharedAccess"}
    assert not {f.rule for f in source.ranked_findings(profiles("planted_cuda")["smem_padded"])} & \
        {"SharedMemoryConflicts", "UncoalescedSharedAccess"}
    # ncu's marker sentence is shown beside the line it names
    top = source.view(p).lines[0]
    assert any(n.startswith("UncoalescedGlobalAccess:") for n in top.notes)


def _ncu_source_page(name: str) -> dict[str, dict[int, int]]:
    """function name -> {line: warp samples}, from ncu's own `--page source --print-source cuda,sass` CSV."""
    with lzma.open(PLANTED / f"{name}_source.csv.xz", "rt") as fh:
        text = fh.read()
    out: dict[str, dict[int, int]] = {}
    func = None
    for row in csv.reader(io.StringIO(text)):
        if row and row[0] == "Function Name":
            func = row[1].split("(")[0]
            out.setdefault(func, {})
        elif func and len(row) > 6 and row[0].isdigit() and row[2] == "-":
            out[func][int(row[0])] = out[func].get(int(row[0]), 0) + int(row[4] or 0)
    return out


def test_per_line_samples_equal_ncus_source_page() -> None:
    page = _ncu_source_page("planted_cuda")
    assert set(page) == set(profiles("planted_cuda"))
    for name, p in profiles("planted_cuda").items():
        mine = {h.line: h.samples for h in source.hot_lines(p, None)[0] if h.samples}
        theirs = {n: s for n, s in page[name].items() if s}
        assert mine == theirs, name


def test_triton_helper_samples_show_under_the_calling_line() -> None:
    p = profiles("planted_triton")["row_stats"]
    lines, folded, named = source.hot_lines(p, 3)
    top = lines[0]
    assert (top.file, top.line) == marker_line(p, "PLANT: tl.sum")
    # the raw samples sit in triton/language/standard.py; profctl puts them under the tl.sum line
    assert any("standard.py" in (x.file or "") for x in p.pcs if x.samples)
    assert sum(top.via.values()) > 0.5 * top.samples
    assert all("standard.py" in k for k in top.via)
    assert named == folded > 0
    assert not any(h.file and "standard.py" in h.file for h in source.hot_lines(p, None)[0])
    e = profiles("planted_triton")["exp_rows"]
    assert (source.view(e).lines[0].file, source.view(e).lines[0].line) == marker_line(e, "PLANT: tl.exp")


def test_ncus_page_has_the_samples_in_standard_py_where_profctl_folds_them() -> None:
    page = _ncu_source_page("planted_triton")
    p = profiles("planted_triton")["row_stats"]
    _, line = marker_line(p, "PLANT: tl.sum")
    folded_line = next(h for h in source.hot_lines(p, None)[0] if h.line == line)
    # ncu's page lists per file; the sum over all files' lines equals profctl's total after folding
    assert sum(page["row_stats"].values()) == sum(h.samples for h in source.hot_lines(p, None)[0])
    assert folded_line.samples > page["row_stats"].get(line, 0)


def test_a_kernel_built_without_lineinfo_shows_instructions_and_says_why() -> None:
    p = profiles("planted_nolineinfo")["exp_loop"]
    v = source.view(p)
    assert not v.lines and not v.has_source
    assert any("-lineinfo" in w for w in v.warnings)
    assert source.opcode(v.sass[0].text) == "MUFU.EX2"
    assert v.sass[0].top_stalls(1)[0][0] == "mio_throttle"


def test_a_library_kernel_has_instructions_with_opcodes() -> None:
    cudnn = next(p for p in read_profiles(PLANTED / "attn_pair.ncu-rep.xz") if "cudnn" in p.name)
    v = source.view(cudnn)
    assert not v.lines and v.sass
    ops = {source.opcode(h.text) for h in v.sass}
    assert "WARPGROUP.DEPBAR.LE" in ops


def test_a_report_without_samples_says_how_to_collect_them(shared_fixture) -> None:
    p = read_profiles(shared_fixture("flash_sol.ncu-rep"))[0]
    assert not p.has_samples and p.total_samples == 0
    v = source.view(p)
    assert any("--recipe stalls" in w for w in v.warnings)


def test_profiles_survive_json() -> None:
    p = profiles("planted_triton")["row_stats"]
    q = KernelProfile.from_dict(p.to_dict())
    assert q == p
    assert source.view(q).lines[0].line == source.view(p).lines[0].line


def test_helper_names() -> None:
    assert source.helper_name("_sum_combine") == "sum"
    assert source.helper_name("_elementwise_max") == "max"
    assert source.helper_name("sum") == "sum"
    assert source.helper_name(None) is None


def test_docs_explain_every_stall_reason() -> None:
    from profctl.analysis.stalls import REASONS

    text = (Path(__file__).resolve().parents[2] / "docs" / "diagnosis.md").read_text()
    missing = [k for k in REASONS if f"`{k}`" not in text]
    assert not missing, f"docs/diagnosis.md lacks {missing}: regenerate its stall table from profctl.analysis.stalls"


def test_one_load_gives_the_same_summary_as_the_summary_reader() -> None:
    from profctl.readers.ncu_profiles import read_with_summary
    from profctl.readers.ncu_rep import read

    path = PLANTED / "attn_pair.ncu-rep.xz"
    summary, profs = read_with_summary(path, isolate=False)
    alone = read(path, isolate=True)
    assert summary.to_dict()["kernels"] == alone.to_dict()["kernels"]
    assert [p.name for p in profs] == [p.name for p in read_profiles(path)]
    assert source.view(profs[0]).lines[0].line == source.view(profiles("attn_pair")["_fwd_kernel"]).lines[0].line
