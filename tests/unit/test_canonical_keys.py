"""One kernel identity and one NVTX path for every reader (issue 10 parts 1 and 2), on real reports.

`nvtx_mixed_*` (tests/data/README.md) were recorded from one script with push/pop ranges in the default domain
and nested in a custom domain `attnbench`, start/end ranges in both, a backward pass and a CUTLASS 2 GEMM: under
ncu (a report, its raw/details CSV, the command-line metrics form), nsys and torch.profiler.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from profctl.kernels import base_key, demangle, kernel_id, loose_key, readable, short_name
from profctl.nvtx import canonical_path, parse_range, split_canonical
from profctl.readers import ncu_csv, nsys_sqlite, read
from profctl.readers.ncu_csv import parse_nvtx_cells

Get = Callable[[str], Path]
#: the ranges of the recorded script's launches, in launch order (ncu; the full script, tests/data/README.md)
MIXED_PATHS = [
    "outer | ~step 0 | attnbench@attention[fa4]/forward",
    "outer | ~step 0 | attnbench@attention[fa4]/forward",
    "outer | ~step 0 | attnbench@attention[fa4]/scale | attnbench@~epoch 1",
    "outer | attnbench@~epoch 1",
    "attnbench@~epoch 1",
    "attnbench@train/fwd",
    None,  # the backward GEMM: launched on autograd's thread, where ncu sees no range
]


# ------------------------------------------------------------------------------------------- the definitions
def test_canonical_path_order_and_inverse() -> None:
    p = canonical_path({"zeta": ["z"], "attnbench": ["attention[fa4]", "scale"], "<default domain>": ["outer"]},
                       {"attnbench": ["step 9", "epoch 1"], "": ["step 0"]})
    # default domain first, then by name; per domain its push/pop stack, then its start/end ranges by text
    assert p == ("outer | ~step 0 | attnbench@attention[fa4]/scale | attnbench@~epoch 1 | attnbench@~step 9 | "
                 "zeta@z")
    assert split_canonical(p)[:3] == [("", "push_pop", ["outer"]), ("", "start_end", ["step 0"]),
                                      ("attnbench", "push_pop", ["attention[fa4]", "scale"])]
    assert canonical_path({}, {"d": []}) is None
    # start/end ranges name passes too
    assert parse_range("profctl@~sdpa-flash.fwd").pass_ == "fwd"  # type: ignore[union-attr]


def test_ncu_nvtx_cells_with_colons_and_ids() -> None:
    pp, se = parse_nvtx_cells(
        '515  "<default domain>:outer:none:none:RGB:0xff:REGISTERED:outer"  '
        '"attnbench:a:b:none:none:RGB:0xff:REGISTERED:a:b"',
        '"0:<default domain>:step 0:none:none:RGB:0xff:REGISTERED:step 0"  "12:attnbench:x::none:none:RGB:0xff:'
        'REGISTERED:x:"')
    assert pp == {"<default domain>": ["outer"], "attnbench": ["a:b"]}
    assert se == {"<default domain>": ["step 0"], "attnbench": ["x:"]}


KERNEL_SPELLINGS = [
    # nsys (EDG: casts, void, T1 placeholders, [lambda ... (instance n)])
    "void at::native::elementwise_kernel<(int)128, (int)4, void at::native::gpu_kernel_impl_nocast<at::native::"
    "direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 3)]::operator ()() const::[lambda() "
    "(instance 12)]::operator ()() const::[lambda(c10::BFloat16) (instance 1)]>(at::TensorIteratorBase &, const T1 "
    "&)::[lambda(int) (instance 1)]>(int, T3)",
    # torch.profiler (GNU: template parameters spelt out in full)
    "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_"
    "cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10"
    "::BFloat16)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda("
    ")#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1}>"
    "(int, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda"
    "()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase"
    "&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}"
    "::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1})",
    # ncu's CSV (namespaces dropped)
    "void at::elementwise_kernel<128, 4, void at::gpu_kernel_impl_nocast<at::direct_copy_kernel_cuda(at::TensorIter"
    "atorBase &)::[lambda() (instance 3)]::operator ()() const::[lambda() (instance 12)]::operator ()() const::[lambd"
    "a(c10::BFloat16) (instance 1)]>(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)",
]


def test_kernel_id_equal_across_demanglers() -> None:
    ids = {kernel_id(n) for n in KERNEL_SPELLINGS}
    assert len(ids) == 1, ids
    (kid,) = ids
    assert kid == ("elementwise_kernel<128,4,gpu_kernel_impl_nocast<direct_copy_kernel_cuda()::{lambda#3}::"
                   "operator_call()::{lambda#12}::operator_call()::{lambda#1}>()::{lambda#1}>")
    # another dtype's copy (lambda #7 in the dispatch) stays another kernel
    assert kernel_id(KERNEL_SPELLINGS[0].replace("(instance 12)", "(instance 7)")) != kid
    assert len({loose_key(n) for n in KERNEL_SPELLINGS}) == 1


CUTLASS_A = ("_ZN7cutlass6KernelINS_4gemm6kernel4GemmINS1_11threadblock12MmaPipelinedINS_9GemmShapeILi128ELi128ELi8EE"
             "ENS6_ILi64ELi64ELi8EEEEELb0EEEEEvNT_6ParamsE")
CUTLASS_B = ("_ZN7cutlass6KernelINS_4gemm6kernel4GemmINS1_11threadblock12MmaPipelinedINS_9GemmShapeILi64ELi64ELi8EEENS"
             "6_ILi32ELi32ELi8EEEEELb1EEEEEvNT_6ParamsE")


def test_cutlass_kernels_stay_apart() -> None:
    """CUTLASS 2 kernels are all `Kernel<...>`: the template arguments tell them apart, in the identity, the
    short name and the join's base key; a bare `Kernel` with its mangled name is read from the mangled one."""
    if demangle(CUTLASS_A) is None:
        pytest.skip("no C++ runtime with __cxa_demangle here")
    a, b = readable("Kernel", CUTLASS_A), readable("Kernel", CUTLASS_B)
    assert a.startswith("void cutlass::Kernel<cutlass::gemm::kernel::Gemm<") and a != b
    assert kernel_id(a) == "Kernel<Gemm<MmaPipelined<GemmShape<128,128,8>,GemmShape<64,64,8>>,0>>"
    assert kernel_id(CUTLASS_A) == kernel_id(a) != kernel_id(b)
    assert short_name(a) != short_name(b) and short_name(a).startswith("Kernel<Gemm<MmaPipelined<GemmShape<128")
    assert base_key(a) != base_key(b)
    assert readable("flash_fwd_kernel", CUTLASS_A) == "flash_fwd_kernel"  # a real name is kept


# ------------------------------------------------------------------------------------------- ncu: report == CSV
def _launch_keys(launches: list) -> list[tuple[str, str | None]]:
    return [(kernel_id(x.name), x.nvtx_range) for x in launches]


@pytest.mark.parametrize(("rep", "csv", "where"), [
    ("attn_tc.ncu-rep", "attn_tc_raw.csv", "h100"),
    ("flash_sol.ncu-rep", "flash_sol_details.csv", "h100"),
    ("nvtx_mixed.ncu-rep", "nvtx_mixed_raw.csv", "data"),
    ("nvtx_mixed.ncu-rep", "nvtx_mixed_details.csv", "data"),
    ("ncu_profctl_fwdbwd.ncu-rep", "ncu_profctl_fwdbwd_raw.csv", "data"),
])
def test_report_and_its_csv_give_identical_keys(rep: str, csv: str, where: str, shared_fixture: Get,
                                                data_file: Get) -> None:
    pytest.importorskip("ncu_report")
    from profctl.readers import ncu_rep

    get = shared_fixture if where == "h100" else data_file
    a, _, _ = ncu_rep.read_launches(get(rep))
    b = ncu_csv.read_launches(get(csv))
    assert _launch_keys(a) == _launch_keys(b)
    sa, sb = read(get(rep), by_range=True), read(get(csv), by_range=True)
    keys = lambda s: sorted((k.kernel_id, k.nvtx_range or "", k.count) for k in s.kernels)  # noqa: E731
    assert keys(sa) == keys(sb)
    assert sa.meta["devices"] == ["NVIDIA H100 80GB HBM3"]
    if "details" in csv:  # the details page names the GPU by index only, and says so
        assert "devices" not in sb.meta and sb.meta["device_info"] == [{"name": "0", "cc": "9.0"}]
        assert any("only by index" in w for w in sb.warnings)
    else:
        assert sb.meta["devices"] == ["NVIDIA H100 80GB HBM3"]
    if rep.startswith("nvtx_mixed"):
        assert [x.nvtx_range for x in a] == MIXED_PATHS


def test_csv_with_base_names_only_keeps_the_paths(data_file: Get) -> None:
    """`--print-kernel-base function`: names are bare, the paths are the same."""
    b = ncu_csv.read_launches(data_file("nvtx_mixed_raw_function.csv"))
    assert [x.nvtx_range for x in b] == MIXED_PATHS
    assert b[1].name == "elementwise_kernel"


def test_mangled_csv_gives_the_demangled_identity(data_file: Get) -> None:
    """`--print-kernel-base mangled`: the same identities as the demangled CSV (88 launches of the full script),
    the CUTLASS `Kernel2` GEMM with its template argument."""
    if demangle("_ZN7cutlass7Kernel2I41cutlass_80_simt_sgemm_64x64_8x5_tn_align1EEvNT_6ParamsE") is None:
        pytest.skip("no C++ runtime with __cxa_demangle here")
    a = ncu_csv.read_launches(data_file("nvtx_mixed_full_raw.csv"))
    b = ncu_csv.read_launches(data_file("nvtx_mixed_full_raw_mangled.csv"))
    assert len(a) == len(b) == 88
    assert _launch_keys(a) == _launch_keys(b)
    k2 = [x for x in b if "Kernel2" in x.name]
    assert len(k2) == 1 and k2[0].mangled and k2[0].mangled.startswith("_ZN7cutlass7Kernel2")
    assert short_name(k2[0].name) == "Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>"


# ------------------------------------------------------------------------------------------- nsys, torch, ncu
def test_nsys_torch_and_ncu_name_every_kernel_alike(data_file: Get) -> None:
    """The same script under nsys, torch.profiler and ncu: the same set of kernel identities (48), from nsys'
    demangled and mangled names, torch's names and ncu's CSV."""
    db = data_file("nvtx_mixed_nsys.sqlite")
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = c.execute("SELECT DISTINCT d.value, m.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds d ON "
                     "d.id = k.demangledName JOIN StringIds m ON m.id = k.mangledName").fetchall()
    c.close()
    nsys_ids = {kernel_id(d) for d, _ in rows}
    trace = json.loads(Path(data_file("nvtx_mixed_torch.json")).read_text())
    torch_ids = {kernel_id(e["name"]) for e in trace["traceEvents"] if e.get("cat") == "kernel"}
    ncu_ids = {kernel_id(x.name) for x in ncu_csv.read_launches(data_file("nvtx_mixed_full_raw.csv"))}
    assert len(nsys_ids) == 48
    assert nsys_ids == torch_ids == ncu_ids
    if demangle(rows[0][1]) is not None:
        assert {kernel_id(m) for _, m in rows} == nsys_ids
    # and through the readers: every torch kernel row meets an nsys kernel row by its identity
    s_nsys, s_torch = read(db), read(data_file("nvtx_mixed_torch.json"))
    assert {k.kernel_id for k in s_torch.kernels if k.extra.get("kind") == "kernel"} <= {
        k.kernel_id for k in s_nsys.kernels}


def test_nsys_paths_equal_ncu_paths(data_file: Get) -> None:
    """nsys per-range rows carry the canonical path ncu recorded for the same launches; the launches autograd
    made outside any range (ncu: no path) sit in the range open on the calling thread, `attnbench@train/bwd`."""
    s = nsys_sqlite.read(data_file("nvtx_mixed_nsys.sqlite"), by_range=True)
    ncu = ncu_csv.read_launches(data_file("nvtx_mixed_full_raw.csv"))
    want = Counter((kernel_id(x.name), x.nvtx_range) for x in ncu if x.nvtx_range)
    got: Counter[tuple[str, str | None]] = Counter()
    borrowed: Counter[str] = Counter()
    for k in s.kernels:
        if k.nvtx_range and "borrowed_launches" not in k.extra:
            got[(k.kernel_id, k.nvtx_range)] += k.count
        elif k.nvtx_range:
            assert k.nvtx_range == "attnbench@train/bwd"
            borrowed[k.kernel_id] += k.count
    assert got == want
    # what ncu saw outside any range right after `train/bwd` began: autograd's launches
    unranged = [x for x in ncu if x.nvtx_range is None]
    bwd = next(i for i, x in enumerate(ncu) if x.nvtx_range == "attnbench@train/bwd")
    after = Counter(kernel_id(x.name) for x in ncu[bwd + 1:] if x.nvtx_range is None and x in unranged)
    assert borrowed == Counter({k: n for k, n in after.items() if k in borrowed}) and sum(borrowed.values()) == 5
    assert s.meta["nvtx_borrowed"] == [{"launches": 5, "thread": "pt_autograd_0", "from_thread": "python3"}]


def test_cutlass_kernel_in_nsys_export_keeps_its_template_arguments(data_file: Get, tmp_path: Path) -> None:
    """nsys' shortName for CUTLASS kernels is `Kernel2`; the row's short name keeps the template argument. In a
    copy where two kernels' demangled names are just `Kernel` (their mangled names in `mangledName`), they stay
    two rows, named from the mangled names."""
    src = data_file("nvtx_mixed_nsys.sqlite")
    s = read(src)
    k2 = [k for k in s.kernels if "Kernel2" in k.name]
    assert [k.short_name for k in k2] == ["Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>"]
    if demangle(CUTLASS_A) is None:
        pytest.skip("no C++ runtime with __cxa_demangle here")
    db = tmp_path / "kernel.sqlite"
    db.write_bytes(Path(src).read_bytes())
    c = sqlite3.connect(db)
    ids = [c.execute("INSERT INTO StringIds(value) VALUES (?)", (v,)).lastrowid for v in ("Kernel", CUTLASS_A,
                                                                                          CUTLASS_B)]
    rows = [r for (r,) in c.execute("SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start LIMIT 4")]
    for r, m in zip(rows, (ids[1], ids[1], ids[2], ids[2]), strict=True):
        c.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = ?, shortName = ?, mangledName = ? "
                  "WHERE rowid = ?", (ids[0], ids[0], m, r))
    c.commit()
    c.close()
    cut = [k for k in read(db).kernels if "cutlass::Kernel<" in k.name]
    assert sorted(k.count for k in cut) == [2, 2]
    assert len({k.kernel_id for k in cut}) == 2 and len({k.short_name for k in cut}) == 2
    assert all(k.short_name.startswith("Kernel<Gemm<MmaPipelined<") for k in cut)


def test_cross_tool_join_meets_every_torch_kernel(shared_fixture: Get) -> None:
    """issue 10 part 2: the shared fixtures' nsys and torch traces of one workload; every torch kernel the join
    places meets its nsys kernel exactly (before, the eager copy kernel did not), and each tool's match is kept."""
    from profctl.analysis.crosstool import join

    view = join([read(shared_fixture(n), by_range=True) for n in ("attn.sqlite", "torch_trace.json.gz")])
    with_torch = [k for k in view.kernels if "torch" in k.tools]
    assert with_torch and all(set(k.tools) == {"nsys", "torch"} for k in with_torch)
    assert all(k.match == "exact" and k.matches == {"nsys": "exact", "torch": "exact"} for k in with_torch)
    copies = [k for k in with_torch if "direct_copy_kernel_cuda" in k.name]
    assert copies


def test_join_falls_back_and_says_so() -> None:
    """When the names do not meet exactly, the join tries the loose key, then the base key with the nearest
    per-launch time, and records which (`matches`, `match`)."""
    from profctl.analysis.crosstool import join
    from profctl.schema import KernelRow, Source, Summary

    def summary(tool: str, rows: list[tuple[str, float]]) -> Summary:
        ks = tuple(KernelRow(tool=tool, name=n, short_name=n, kernel_class="other",
                             nvtx_range="profctl@eager[b1,sq8,skv8,h1,kv1,d8,fp32,full,bhsd]/measure/eager.fwd",
                             count=1, total_ns=t, avg_ns=t, med_ns=t, min_ns=t, max_ns=t, std_ns=0.0,
                             extra={"kind": "kernel"}) for n, t in rows)
        return Summary(sources=(Source("x", tool),), kernels=ks)

    nsys = summary("nsys", [("void ns::k<(int)1, Foo<(int)2>>(T1)", 100.0), ("my_kernel_v1", 50.0),
                            ("my_kernel_v2", 500.0)])
    torch = summary("torch", [("void ns::k<1, Foo<2, Bar> >(int)", 101.0), ("other::my_kernel_v2", 480.0)])
    view = join([nsys, torch])
    by = {k.short_name: k for k in view.kernels}
    assert by["k"].matches == {"nsys": "exact", "torch": "loose"} and by["k"].match == "loose"
    assert by["my_kernel_v2"].matches == {"nsys": "exact", "torch": "exact"}  # namespaces do not count
    assert by["my_kernel_v1"].match == "only"


def test_profctl_pair_eager_copy_kernel_meets(data_file: Get) -> None:
    """issue 10 part 2's case: a profctl nsys export and a profctl torch trace of the eager workload; nsys writes
    the copy kernel's template parameter as `gpu_kernel_impl_nocast<...>(at::TensorIteratorBase &, const T1 &)`,
    torch spells T1 out in full. The identities meet (the two runs had other shapes, so the flash kernels' template
    arguments differ; the shape-independent kernels all meet)."""
    nsys = read(data_file("nsys_profctl_fwdbwd.sqlite"))
    torch = read(data_file("torch_profctl_gpu_nvtx.json"))
    ids = {k.kernel_id for k in nsys.kernels}
    copies = [k for k in torch.kernels if "direct_copy_kernel_cuda" in k.name]
    assert copies and all(k.kernel_id in ids for k in copies)
    assert "const T1 &" in next(k.name for k in nsys.kernels if k.kernel_id == copies[0].kernel_id)
    shape_free = [k for k in torch.kernels if k.extra.get("kind") == "kernel" and not k.short_name.startswith(
        ("flash_", "nvjet", "softmax"))]
    assert shape_free and all(k.kernel_id in ids for k in shape_free)
