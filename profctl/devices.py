"""Peak rates per GPU model, each with its source, to put measured rates in proportion and to flag the
impossible ones (a rate above the datasheet peak means the FLOP count or the timing is wrong)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DevicePeak:
    model: str
    match: tuple[str, ...]          # substrings of torch.cuda.get_device_name / NVML name, lower case
    tflops: dict[str, float]        # dense tensor-core TFLOP/s per input dtype (fp32 = TF32 tensor-core peak)
    dram_tbps: float                # DRAM bandwidth, TB/s
    source: str
    measured_tflops_bf16: float | None = None
    measured_source: str | None = None


PEAKS: tuple[DevicePeak, ...] = (
    DevicePeak("H100 SXM5", ("h100 80gb hbm3", "h100 sxm"), {"bf16": 989.4, "fp16": 989.4, "fp32": 494.7}, 3.35,
               "NVIDIA H100 Tensor Core GPU datasheet (SXM5; dense, i.e. half the sparsity figure)",
               800.0, "bf16 8192^3 torch.matmul on the project's GPU test machine, 2026-11-21 (shared/device)"),
    DevicePeak("H100 PCIe", ("h100 pcie",), {"bf16": 756.5, "fp16": 756.5, "fp32": 378.0}, 2.0,
               "NVIDIA H100 Tensor Core GPU datasheet (PCIe; dense)"),
    DevicePeak("H100 NVL", ("h100 nvl",), {"bf16": 835.0, "fp16": 835.0, "fp32": 417.5}, 3.9,
               "NVIDIA H100 NVL datasheet (dense)"),
    DevicePeak("H200", ("h200",), {"bf16": 989.4, "fp16": 989.4, "fp32": 494.7}, 4.8,
               "NVIDIA H200 Tensor Core GPU datasheet (SXM; dense)"),
    DevicePeak("A100", ("a100",), {"bf16": 312.0, "fp16": 312.0, "fp32": 156.0}, 2.039,
               "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB; dense; 40GB: 1.555 TB/s)"),
    DevicePeak("L40S", ("l40s",), {"bf16": 362.05, "fp16": 362.05, "fp32": 183.0}, 0.864,
               "NVIDIA L40S datasheet (dense)"),
    DevicePeak("B200", ("b200",), {"bf16": 2250.0, "fp16": 2250.0, "fp32": 1100.0}, 8.0,
               "NVIDIA HGX B200 datasheet, per GPU (dense)"),
)


def lookup(device_name: str | None) -> DevicePeak | None:
    """The peak table entry for a device name, or None (a CPU, or a GPU we have no figures for)."""
    if not device_name:
        return None
    low = device_name.lower()
    for p in PEAKS:
        if any(m in low for m in p.match):
            return p
    return None


def peak_tflops(device_name: str | None, dtype: str) -> float | None:
    p = lookup(device_name)
    return p.tflops.get(dtype) if p else None
