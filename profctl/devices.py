"""Peak rates per GPU model, each with its source, to put measured rates in proportion and to flag the
impossible ones (a rate above the datasheet peak means the FLOP count or the timing is wrong).

GPU names come spelt many ways: ``NVIDIA H100 80GB HBM3`` (CUDA, NVML, ncu, nsys), ``H100``, ``h100-sxm``,
``H100 PCIe``, ``NVIDIA H100 NVL``. :func:`match` reads the model and the variant from any of them and says which
table entry it took and why; :func:`lookup` is the entry alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class DevicePeak:
    model: str
    match: tuple[str, ...]          # the model's name in lower case, e.g. "h100" (a whole word of the GPU name)
    tflops: dict[str, float]        # dense tensor-core TFLOP/s per input dtype (fp32 = TF32 tensor-core peak)
    dram_tbps: float                # DRAM bandwidth, TB/s
    source: str
    measured_tflops_bf16: float | None = None
    measured_source: str | None = None
    variant: tuple[str, ...] = ()   # words naming this variant of the model ("pcie", "nvl"); () = the default one
    sms: int | None = None          # streaming multiprocessors
    boost_mhz: float | None = None  # the SM clock the datasheet peaks assume (max boost)
    sfu_per_clk_sm: int = 16        # special-function (MUFU: exp2, rcp, ...) results per clock per SM
    sfu_source: str = ("CUDA C++ Programming Guide, arithmetic instruction throughput: 16 results per clock per "
                       "SM for exp2/log2/rcp/rsqrt/sin/cos on compute capability 8.x and 9.x; x SMs x boost clock")

    @property
    def sfu_tops(self) -> float | None:
        """Special-function results per second, in 1e12 (one exponential each): SMs x 16 x boost clock."""
        if self.sms is None or self.boost_mhz is None:
            return None
        return self.sms * self.sfu_per_clk_sm * self.boost_mhz * 1e6 / 1e12


PEAKS: tuple[DevicePeak, ...] = (
    DevicePeak("H100 SXM5", ("h100",), {"bf16": 989.4, "fp16": 989.4, "fp32": 494.7, "fp8": 1978.9}, 3.35,
               "NVIDIA H100 Tensor Core GPU datasheet (SXM5; dense, i.e. half the sparsity figure)",
               800.0, "bf16 8192^3 torch.matmul on the project's GPU test machine, 2026-11-21 (shared/device)",
               variant=("sxm", "sxm5", "hbm3"), sms=132, boost_mhz=1980),
    DevicePeak("H100 PCIe", ("h100",), {"bf16": 756.5, "fp16": 756.5, "fp32": 378.0, "fp8": 1513.0}, 2.0,
               "NVIDIA H100 Tensor Core GPU datasheet (PCIe; dense)", variant=("pcie",), sms=114, boost_mhz=1755),
    DevicePeak("H100 NVL", ("h100",), {"bf16": 835.0, "fp16": 835.0, "fp32": 417.5, "fp8": 1670.5}, 3.9,
               "NVIDIA H100 NVL datasheet (dense)", variant=("nvl",), sms=132, boost_mhz=1785),
    DevicePeak("H200", ("h200",), {"bf16": 989.4, "fp16": 989.4, "fp32": 494.7, "fp8": 1978.9}, 4.8,
               "NVIDIA H200 Tensor Core GPU datasheet (SXM; dense)", sms=132, boost_mhz=1980),
    DevicePeak("A100", ("a100",), {"bf16": 312.0, "fp16": 312.0, "fp32": 156.0}, 2.039,
               "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB; dense; 40GB: 1.555 TB/s; no FP8)",
               sms=108, boost_mhz=1410),
    DevicePeak("L40S", ("l40s",), {"bf16": 362.05, "fp16": 362.05, "fp32": 183.0, "fp8": 733.0}, 0.864,
               "NVIDIA L40S datasheet (dense)", sms=142, boost_mhz=2520),
    DevicePeak("B200", ("b200",), {"bf16": 2250.0, "fp16": 2250.0, "fp32": 1100.0, "fp8": 4500.0}, 8.0,
               "NVIDIA HGX B200 datasheet, per GPU (dense)"),
)


@dataclass(frozen=True)
class DeviceMatch:
    """The peak table entry a GPU name was matched to (None: no entry), and why, in words."""

    name: str | None
    peak: DevicePeak | None
    why: str


def _words(name: str) -> str:
    """Lower case, every run of other characters one space, letters and digits split where a model name ends
    (``h100sxm5`` -> ``h100 sxm5``): `` nvidia h100 80gb hbm3 ``."""
    s = re.sub(r"[^a-z0-9]+", " ", name.lower())
    s = re.sub(r"(?<=\d)(?=(sxm|pcie|nvl|hbm))", " ", s)
    return f" {s.strip()} "


def match(device_name: str | None) -> DeviceMatch:
    """Which entry of :data:`PEAKS` a GPU name means, and why. The model is a whole word of the name (so
    ``GH200`` is not an H200); among a model's variants the one whose words the name holds (``pcie``, ``nvl``;
    ``sxm`` or ``hbm3`` for the SXM5 part), else the model's default entry, said so."""
    if not device_name or not isinstance(device_name, str) or not device_name.strip():
        return DeviceMatch(None, None, "no device named")
    words = _words(device_name)
    if words.strip() == "cpu":
        return DeviceMatch(device_name, None, "a CPU: no GPU peak applies")
    for model in dict.fromkeys(m for p in PEAKS for m in p.match):
        if f" {model} " not in words:
            continue
        entries = [p for p in PEAKS if model in p.match]
        named = [p for p in entries if any(f" {v} " in words for v in p.variant)]
        if len(named) == 1:
            hit = next(v for v in named[0].variant if f" {v} " in words)
            return DeviceMatch(device_name, named[0], f"{model.upper()} with '{hit}' in the name: {named[0].model}")
        default = entries[0]
        if len(entries) == 1:
            return DeviceMatch(device_name, default, f"{model.upper()} in the name: {default.model}")
        others = ", ".join(p.model for p in entries[1:])
        return DeviceMatch(device_name, default, f"{model.upper()} in the name, no variant said ({others} named "
                                                 f"none of their words): taken as {default.model}")
    return DeviceMatch(device_name, None, f"no peak figures for {device_name!r} in profctl.devices")


def lookup(device_name: str | None) -> DevicePeak | None:
    """The peak table entry for a device name, or None (a CPU, or a GPU we have no figures for)."""
    return match(device_name).peak


def peak_tflops(device_name: str | None, dtype: str) -> float | None:
    p = lookup(device_name)
    return p.tflops.get(dtype) if p else None
