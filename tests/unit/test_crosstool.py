"""Joining the same workload seen by nsys, ncu and torch.profiler (the shared fixtures), and the pieces it rests on."""

from __future__ import annotations

import pytest

from profctl import readers
from profctl.analysis.crosstool import backend_from_ops
from profctl.analysis.crosstool import join as merge_view
from profctl.kernels import loose_key
from profctl.kernels import match_key as join_key
from profctl.nvtx import RangeKey, parse_range
from profctl.shapes import Shape, key_of_row
from profctl.spec import canonical_backend

FIXTURE_SHAPE = "b4,sq2048,skv2048,h16,kv16,d128,bf16,causal,bhsd"


@pytest.fixture
def three_tools(shared_fixture):
    return [readers.read(shared_fixture(n), by_range=True)
            for n in ("attn.sqlite", "attn_tc.ncu-rep", "torch_trace.json.gz")]


# ---------------------------------------------------------------------------------------------- ranges
@pytest.mark.parametrize("text, want", [
    ("naive.fwd.it1", RangeKey("eager", "fwd", None, None, 1)),
    ("sdpa_mem_eff.fwd.it0", RangeKey("sdpa-efficient", "fwd", None, None, 0)),
    ("profctl:eager.bwd", RangeKey("eager", "bwd")),
    ("profctl:sdpa-flash[b1,sq1024,skv1024,h8,kv8,d128,bf16,full,bhsd]",
     RangeKey("sdpa-flash", None, "b1,sq1024,skv1024,h8,kv8,d128,bf16,full,bhsd")),
    ("profctl@fa4[b1,sq4096,skv4096,h32,kv32,d128,bf16,causal,bhsd]/measure/fa4.fwd",
     RangeKey("fa4", "fwd", "b1,sq4096,skv4096,h32,kv32,d128,bf16,causal,bhsd", "measure")),
    ("eager[b1,sq128,skv128,h4,kv4,d32,fp32,full,bhsd]/warmup/eager.fwd",
     RangeKey("eager", "fwd", "b1,sq128,skv128,h4,kv4,d32,fp32,full,bhsd", "warmup")),
    ("cuBLAS:cublasCreate_v2 | profctl@sdpa-cudnn[b1]/measure/sdpa-cudnn.bwd", RangeKey("sdpa-cudnn", "bwd", "b1",
                                                                                          "measure")),
])
def test_parse_range(text, want):
    assert parse_range(text) == want


@pytest.mark.parametrize("text", [None, "", "measure", "cublasCreate_v2", "ProfilerStep#3"])
def test_parse_range_names_no_backend(text):
    assert parse_range(text) is None


def test_canonical_backend():
    assert [canonical_backend(b) for b in ("naive", "sdpa_flash", "SDPA_CUDNN", "mem_eff", "math", "fa4")] == [
        "eager", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math", "fa4"]


def test_shape_key_round_trip():
    row = {"batch": 1, "seqlen_q": 4096, "seqlen_kv": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128,
           "dtype": "bf16", "causal": True, "layout": "bhsd"}
    key = key_of_row(row)
    assert key == "b1,sq4096,skv4096,h32,kv8,d128,bf16,causal,bhsd"
    assert vars(Shape.parse(key)) == {**row, "window": None, "docs": ()}  # no mask beyond causal
    assert Shape.parse(key).label() == "b1 s4096 h32/8 d128 bf16 causal"
    with pytest.raises(ValueError, match="lacks"):
        Shape.parse("b1,bf16")
    with pytest.raises(ValueError, match="not one of"):
        Shape.parse("b1,sq8,h2,d8,zz")


# ---------------------------------------------------------------------------------------------- names
NSYS_FLASH = ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)128, (int)64, (int)4, "
              "(bool)0, (bool)0, cutlass::bfloat16_t, Flash_kernel_traits<(int)128, (int)128, (int)64, (int)4, "
              "cutlass::bfloat16_t>>, (bool)0, (bool)1, (bool)0, (bool)0, (bool)1, (bool)1, (bool)0, (bool)0>"
              "(pytorch_flash::Flash_fwd_params)")
TORCH_FLASH = ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
               "cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, "
               "false, true, true, false, false>(pytorch_flash::Flash_fwd_params)")


def test_join_key_equal_across_demanglers():
    assert join_key(NSYS_FLASH) == join_key(TORCH_FLASH)
    nsys_sm = ("void <unnamed>::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, (int)11, (bool)0, (bool)0>"
               "(T2 *, const T1 *, int, int, int, const bool *, int, bool)")
    torch_sm = ("void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 11, false, "
                "false>(c10::BFloat16*, c10::BFloat16 const*, int, int, int, bool const*, int, bool)")
    assert join_key(nsys_sm) == join_key(torch_sm)
    nsys_v = ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<bool>, "
              "std::array<char *, (unsigned long)1>>(int, T2, T3)")
    torch_v = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<bool>, std::array<char*, "
               "1ul> >(int, at::native::FillFunctor<bool>, std::array<char*, 1ul>)")
    assert join_key(nsys_v) == join_key(torch_v)
    # different template arguments stay different kernels
    assert join_key(nsys_v) != join_key(nsys_v.replace("FillFunctor<bool>", "FillFunctor<float>"))


def test_join_key_equal_with_lambda_signatures_spelt_differently():
    nsys = ("void at::native::elementwise_kernel<(int)128, (int)4, void at::native::gpu_kernel_impl_nocast<"
            "at::native::<unnamed>::masked_fill_kernel(at::TensorIterator &, const c10::Scalar &)::[lambda() "
            "(instance 1)]>(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)")
    torch = ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::(anonymous "
             "namespace)::masked_fill_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}>(at::"
             "TensorIteratorBase&, at::native::(anonymous namespace)::masked_fill_kernel(at::TensorIterator&, "
             "c10::Scalar const&)::{lambda()#1} const&)::{lambda(int)#1}>(int, at::native::)")
    # EDG lambdas, the `void` return type and T1 placeholders (nsys) against GNU lambdas and spelt-out
    # parameters (torch): the same kernel identity (profctl.kernels.kernel_id)
    assert join_key(nsys) == join_key(torch)
    assert loose_key(nsys) == loose_key(torch)


def test_backend_from_torch_ops():
    assert backend_from_ops({"ops": {"ScaledDotProductFlashAttentionBackward0": 2},
                             "launch_ops": {"aten::_flash_attention_backward": 2}}) == "sdpa-flash"
    assert backend_from_ops({"launch_ops": {"aten::_cudnn_attention_forward": 2}}) == "sdpa-cudnn"
    assert backend_from_ops({"ops": {"aten::softmax": 2}, "launch_ops": {"aten::_softmax": 2}}) == "eager"
    # launched by an attention op and by a matmul: cannot be split between backends
    assert backend_from_ops({"ops": {"aten::matmul": 4, "aten::scaled_dot_product_attention": 4}}) is None
    assert backend_from_ops({"ops": {"aten::to": 3}}) is None
    assert backend_from_ops({}) is None


# ---------------------------------------------------------------------------------------------- the join
def _by(view, backend, pass_, name):
    ks = [k for k in view.kernels if k.backend == backend and k.pass_ == pass_ and name in k.name]
    assert ks, f"no {backend} {pass_} kernel named like {name}"
    return ks


def test_fixtures_join_flash_fwd_across_three_tools(three_tools):
    view = merge_view(three_tools, shape=FIXTURE_SHAPE)
    (k,) = _by(view, "sdpa-flash", "fwd", "flash_fwd_kernel")
    assert set(k.tools) == {"nsys", "ncu", "torch"}
    assert k.match == "exact"
    assert k.kernel_class == "flash_fwd"
    assert k.shape_key == FIXTURE_SHAPE
    # one launch per iteration in every tool; the three times agree within 5 %
    times = [t.per_iter_ns for t in k.tools.values()]
    assert all(t.launches_per_iter == pytest.approx(1.0) for t in k.tools.values())
    assert max(times) / min(times) < 1.05
    # ncu's metrics came along
    assert k.metrics["sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"] > 0
    (cud,) = _by(view, "sdpa-cudnn", "fwd", "cudnn_generated_fort_native_sdpa")
    assert set(cud.tools) == {"nsys", "ncu", "torch"}


def test_fixtures_join_every_ncu_kernel(three_tools):
    """ncu profiled the it1 forward kernels of four backends: each joins its nsys kernel."""
    view = merge_view(three_tools)
    ncu = [k for k in view.kernels if "ncu" in k.tools]
    assert len(ncu) == 10
    assert all("nsys" in k.tools for k in ncu)
    assert {k.backend for k in ncu} == {"eager", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient"}
    # the eager forward: GEMMs, softmax, elementwise all seen by the three tools
    eager = view.kernels_of("eager", "fwd", None)
    three = [k for k in eager if set(k.tools) == {"nsys", "ncu", "torch"}]
    assert {k.kernel_class for k in three} == {"gemm", "softmax", "elementwise"}
    assert len(three) == 7


def test_fixture_iteration_median_drops_first_iteration_costs(three_tools):
    """nsys saw three iterations (it0 carries one-time costs); per-iteration figures are their median."""
    view = merge_view(three_tools[:1])
    sp = view.spans[("sdpa-cudnn", "fwd", None)]
    assert sp.iterations == 3
    # it0's projected span is 118 ms (library loading); it1/it2 are 0.19 and 0.16 ms
    assert sp.per_iter_ns == pytest.approx(193860.0)


def test_torch_backward_attributed_by_ops(three_tools):
    """The fixtures' torch trace has no ranges; backward kernels are placed by the ops that launched them."""
    view = merge_view(three_tools[2:])
    (dq,) = _by(view, "sdpa-flash", "bwd", "flash_bwd_dq_dk_dv")
    assert dq.tools["torch"].launches_per_iter == pytest.approx(1.0)
    gemms = [k for k in view.kernels_of("eager", "bwd", None) if k.kernel_class == "gemm"]
    assert len(gemms) == 4
    assert any("could not be attributed" in n for n in view.notes)


def test_profctl_scheme_nsys_rows(data_file):
    """profctl's own NVTX scheme in an nsys export: backend and pass from the leaf range, shape from the case."""
    s = readers.read(data_file("profctl_bwd_nvtx.sqlite"), by_range=True)
    view = merge_view([s])
    shape = "b1,sq1024,skv1024,h8,kv8,d128,bf16,full,bhsd"
    assert {(k.backend, k.pass_, k.shape_key) for k in view.kernels} == {
        ("eager", "fwd", shape), ("eager", "bwd", shape), ("sdpa-flash", "fwd", shape), ("sdpa-flash", "bwd", shape)}
    bwd = {k.short_name for k in view.kernels_of("sdpa-flash", "bwd", shape)}
    assert {"flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel", "flash_bwd_dot_do_o_kernel"} <= bwd
    assert ("eager", "bwd", shape) in view.spans


def test_bench_rows_join_the_view():
    rows = [{"backend": "sdpa_flash", "batch": 4, "seqlen_q": 2048, "seqlen_kv": 2048, "heads": 16, "kv_heads": 16,
             "head_dim": 128, "dtype": "bf16", "causal": True, "pass": "fwd", "status": "ok", "median_ms": 0.27}]
    view = merge_view([], rows)
    assert view.groups() == [("sdpa-flash", "fwd", FIXTURE_SHAPE)]
    assert view.tools() == ["bench"]


def test_read_nsys_paths_keeps_shape_and_measure_only(data_file):
    """Per range path: only the measured iterations (3 of the 5 in the export), per shape and pass."""
    from profctl.readers.nsys_sqlite import read_paths

    s = read_paths(data_file("profctl_bwd_nvtx.sqlite"))
    shape = "b1,sq1024,skv1024,h8,kv8,d128,bf16,full,bhsd"
    paths = {k.nvtx_range for k in s.kernels}
    assert paths == {f"profctl@{b}[{shape}]/measure/{b}.{p}" for b in ("eager", "sdpa-flash") for p in ("fwd", "bwd")}
    dq = next(k for k in s.kernels if "dq_dk_dv" in k.name)
    assert dq.count == 3 and dq.extra["nvtx_instances"] == 3
    view = merge_view([s])
    assert view.spans[("eager", "bwd", shape)].iterations == 3
    assert {k.backend for k in view.kernels} == {"eager", "sdpa-flash"}
