"""Kernel classes and cross-tool name keys, on names seen in the shared fixtures."""

import pytest

from profctl.kernels import base_name, classify, match_key

NSYS_FLASH = ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)128, (int)64, (int)4, "
              "(bool)0, (bool)0, cutlass::bfloat16_t, Flash_kernel_traits<(int)128, (int)128, (int)64, (int)4, "
              "cutlass::bfloat16_t>>, (bool)1, (bool)1, (bool)0, (bool)0, (bool)1, (bool)1, (bool)0, (bool)0>"
              "(Flash_fwd_params)")
TORCH_FLASH = ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
               "cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, true, true, "
               "false, false, true, true, false, false>(Flash_fwd_params)")


@pytest.mark.parametrize(("name", "cls"), [
    (NSYS_FLASH, "flash_fwd"),
    ("flash_fwd_kernel", "flash_fwd"),
    ("flash_fwd_splitkv_combine_kernel", "flash_fwd"),
    ("flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel", "flash_bwd"),
    ("flash_bwd_dot_do_o_kernel", "flash_bwd"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_kernel0_0", "flash_fwd"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_3_64x128x128", "flash_bwd"),
    ("fmha_cutlassF_bf16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel<...>::Params)", "flash_fwd"),
    ("fmha_cutlassB_bf16_aligned_64x64_k128_sm80", "flash_bwd"),
    ("kernel_cutlass_kernel_flash_attncuteflash_fwd_sm90FlashAttentionForwardSm90_object_at_", "flash_fwd"),
    ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNN", "gemm"),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3", "gemm"),
    ("void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 11, false>", "softmax"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForwardReg<float, float, float>", "softmax"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", "elementwise"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>", "reduce"),
    ("[CUDA memcpy Host-to-Device]", "memcpy"),
    ("[CUDA memset]", "memset"),
    ("some_custom_kernel", "other"),
])
def test_classify(name: str, cls: str) -> None:
    assert classify(name) == cls


def test_match_key_equates_nsys_and_torch_names() -> None:
    # nsys writes (int)128 and (bool)1, torch writes 128 and true, and spaces differ ("> >")
    assert match_key(NSYS_FLASH) == match_key(TORCH_FLASH)
    other = NSYS_FLASH.replace("(bool)1, (bool)1, (bool)0", "(bool)0, (bool)1, (bool)0")
    assert match_key(NSYS_FLASH) != match_key(other)  # a different instantiation stays different


def test_base_name() -> None:
    assert base_name(NSYS_FLASH) == "flash_fwd_kernel"
    assert base_name("void at::native::reduce_kernel<512, 1>(at::native::ReduceOp<float>)") == "reduce_kernel"
    assert base_name("nvjet_sm90_tst_256x128") == "nvjet_sm90_tst_256x128"


@pytest.mark.parametrize("bad", [None, "", "   ", 5, "(", "<<<>", "void (", "_Z", "operator()"])
def test_names_no_report_should_hold_do_not_raise(bad) -> None:
    """A launch without a readable name (ncu_report returns None) once ended in AttributeError in
    strip_signature; every name function takes anything."""
    from profctl.kernels import kernel_id, loose_key, readable, short_name, strip_signature

    for fn in (strip_signature, readable, kernel_id, loose_key, short_name, classify):
        assert isinstance(fn(bad), str)  # type: ignore[arg-type]


def test_generic_names() -> None:
    from profctl.kernels import is_generic

    assert [is_generic(n) for n in ("Kernel", "Kernel2", "device_kernel", "flash_fwd_kernel", "kernel_foo")] == [
        True, True, True, False, False]


def test_ncu_launch_without_a_name_is_a_damaged_report() -> None:
    """A stand-in for ncu_report's objects: a launch whose names are None is one ncu_report could not decode
    (Nsight Compute names every kernel it profiles): the report is damaged, not a kernel to show as unnamed
    (issue 29 item 5). A Launch without a name that reaches the summary some other way is still said."""
    from pathlib import Path
    from types import SimpleNamespace

    import pytest

    from profctl.errors import BadReport
    from profctl.readers import _ncu, _ncu_load

    class Metric:
        def kind(self) -> int:
            return 1

        def as_double(self) -> float:
            return 1000.0

        def unit(self) -> None:
            return None

        def as_string(self) -> None:
            return None

    action = SimpleNamespace(
        name=lambda base: None, metric_names=lambda: ["gpu__time_duration.sum"],
        metric_by_name=lambda m: Metric() if m == "gpu__time_duration.sum" else None,
        nvtx_state=lambda: None, rule_results_as_dicts=lambda: None)
    mod = SimpleNamespace(IAction=SimpleNamespace(NameBase_FUNCTION=0, NameBase_DEMANGLED=1, NameBase_MANGLED=2),
                          IMetric=SimpleNamespace(ValueKind_DOUBLE=1, ValueKind_FLOAT=2, ValueKind_UINT32=3,
                                                  ValueKind_UINT64=4))
    with pytest.raises(BadReport, match=r"x.ncu-rep: a damaged Nsight Compute report: launch 0 has no kernel name "
                                        r"\(1 metrics\)"):
        _ncu_load.launch_of(mod, action, 0, Path("x.ncu-rep"))
    ln = _ncu.Launch(id=0, name="", base_name="", metrics={"gpu__time_duration.sum": 1000.0})
    s = _ncu.summarize([ln], path=Path("x.ncu-rep"), tool_version=None, reader="stub")
    assert s.kernels[0].count == 1 and any("without a kernel name" in w for w in s.warnings)
