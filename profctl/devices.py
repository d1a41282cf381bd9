"""Peak rates per GPU model, each with its source, to put measured rates in proportion and to flag the
impossible ones (a rate above the datasheet peak means the FLOP count or the timing is wrong).

Per model: the dense tensor-core TFLOP/s per input dtype, DRAM bandwidth, SM count, the boost clock, L2 size,
FP32 (non-tensor, FMA) TFLOP/s and the compute capability; per architecture (:data:`ARCHS`): the special-function
(MUFU: exp2, rcp, ...) rate and the shared-memory bandwidth per SM per clock. From those, the device-wide rates the
roofs divide by (:attr:`DevicePeak.sfu_tops`, :attr:`DevicePeak.smem_tbps`). docs/diagnosis.md ("Peaks and roofs
per GPU") lists every figure with its source. Where two sources disagree the lower figure is taken and the source
string says so; where only a sparse figure is published the dense one is half of it, said so. GeForce parts run
FP16/BF16 (and FP8) tensor math with an FP32 accumulator at half the FP16-accumulate rate; attention kernels
accumulate in FP32, so their entries carry the FP32-accumulate figure.

GPU names come spelt many ways: ``NVIDIA H100 80GB HBM3`` (CUDA, NVML, ncu, nsys), ``H100``, ``h100-sxm``,
``NVIDIA A100-SXM4-40GB``, ``NVIDIA A100 80GB PCIe``, ``NVIDIA GeForce RTX 4090``, ``NVIDIA B300 SXM6 AC``.
:func:`match` reads the model and the variant from any of them and says which table entry it took and why;
:func:`lookup` is the entry alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

_SFU_GUIDE = ("CUDA C++ Programming Guide, throughput of native arithmetic instructions (results per clock per SM): "
              "16 for 32-bit rcp/rsqrt/__log2f/exp2f/__sinf/__cosf")
_UNREAD = "; the copies of that table found when this entry was written stop at the 8.6 column: not re-read here"
_SMEM_GUIDE = ("CUDA C++ Programming Guide, shared memory (compute capability 5.x and later): 32 banks, each 32 bits "
               "per clock = 128 B/clk/SM")


@dataclass(frozen=True)
class ArchRates:
    """Per-SM rates of one architecture (compute capability), each with its source."""

    cc: str                     # compute capability, "9.0"
    name: str                   # "Hopper"
    sfu_per_clk_sm: int         # MUFU results (exp2, rcp, ...) per clock per SM
    sfu_source: str
    smem_bytes_per_clk_sm: int  # shared-memory bandwidth, bytes per clock per SM
    smem_source: str

    @property
    def sm(self) -> str:
        """The nvcc target, ``sm_90``."""
        return "sm_" + self.cc.replace(".", "")


ARCHS: dict[str, ArchRates] = {a.cc: a for a in (
    ArchRates("8.0", "Ampere (GA100)", 16, _SFU_GUIDE + " (8.0 column)", 128, _SMEM_GUIDE),
    ArchRates("8.6", "Ampere (GA10x)", 16, _SFU_GUIDE + " (8.6 column)", 128, _SMEM_GUIDE),
    ArchRates("8.9", "Ada Lovelace", 16, _SFU_GUIDE + " (8.9 column)" + _UNREAD, 128, _SMEM_GUIDE),
    ArchRates("9.0", "Hopper", 16,
              _SFU_GUIDE + " (9.0 column)" + _UNREAD + "; measured on the project's H200: __expf 3.77 T/s = 90 % of "
              "132 SMs x 16 x 1980 MHz (benchmarks/RESULTS.md); FlashAttention-4: the SFU rate did not change from "
              "H100 to B200 (16)", 128, _SMEM_GUIDE),
    ArchRates("10.0", "Blackwell (datacenter)", 16,
              "FlashAttention-4 (Zadouri et al., arXiv 2603.05451): MUFU 16 ops/clk/SM on B200, unchanged from "
              "Hopper (the reason FA4 emulates part of exp2 on the FMA pipe)",
              128, "FlashAttention-4 (arXiv 2603.05451): shared-memory bandwidth 128 B/clk/SM on B200, unchanged from "
              "Hopper; " + _SMEM_GUIDE),
    ArchRates("10.3", "Blackwell Ultra", 32,
              "NVIDIA technical blog 'Making Softmax More Efficient with NVIDIA Blackwell Ultra': MUFU.EX2 throughput "
              "doubled over Blackwell (16 -> 32 per clock per SM; NVIDIA quotes 10.7 against 5 T exponentials/s for "
              "GB300 against GB200); stated for EX2 only, the figure the softmax needs", 128, _SMEM_GUIDE),
    ArchRates("12.0", "Blackwell (GeForce / RTX PRO)", 16,
              _SFU_GUIDE + " (12.0 column)" + _UNREAD + "; the doubled EX2 is a Blackwell Ultra (sm_103) change",
              128, _SMEM_GUIDE),
)}


@dataclass(frozen=True)
class DevicePeak:
    model: str
    match: tuple[str, ...]          # the model's name in lower case, e.g. "h100" (whole words of the GPU name)
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
    cc: str | None = None           # compute capability ("9.0"); ARCHS has its per-SM rates
    l2_bytes: int | None = None     # L2 cache size
    fp32_tflops: float | None = None  # FP32 non-tensor (FMA pipe) peak
    tensor_mhz: float | None = None   # the clock the tensor peaks imply where it is below boost_mhz (H100: 1830)
    smem_bytes_per_clk_sm: int = 128  # shared-memory bandwidth per SM per clock
    smem_source: str = _SMEM_GUIDE
    exclude: tuple[str, ...] = ()   # words that name a different part ("ti", "laptop"): such a name is not this one
    sources: Mapping[str, str] = field(default_factory=dict)  # where sms, boost_mhz, l2, fp32_tflops, cc... come from

    @property
    def sfu_tops(self) -> float | None:
        """Special-function results per second, in 1e12 (one exponential each): SMs x MUFU/clk x boost clock."""
        if self.sms is None or self.boost_mhz is None:
            return None
        return self.sms * self.sfu_per_clk_sm * self.boost_mhz * 1e6 / 1e12

    @property
    def smem_tbps(self) -> float | None:
        """Shared-memory bandwidth, TB/s: SMs x bytes per clock per SM x boost clock (all SMs loading at once)."""
        if self.sms is None or self.boost_mhz is None:
            return None
        return self.sms * self.smem_bytes_per_clk_sm * self.boost_mhz * 1e6 / 1e12

    @property
    def l2_mib(self) -> float | None:
        return self.l2_bytes / 2**20 if self.l2_bytes is not None else None

    @property
    def arch(self) -> ArchRates | None:
        """The architecture's per-SM rates (None when the compute capability is not in :data:`ARCHS`)."""
        return ARCHS.get(self.cc) if self.cc else None

    @property
    def sm(self) -> str | None:
        """The nvcc target, ``sm_90`` (None without a compute capability)."""
        return "sm_" + self.cc.replace(".", "") if self.cc else None


def _gpu(model: str, match: tuple[str, ...], tflops: dict[str, float], dram_tbps: float, source: str, *, cc: str,
         sms: int | None, boost_mhz: float | None, l2_mib: float | None, fp32_tflops: float | None,
         sources: Mapping[str, str], variant: tuple[str, ...] = (), exclude: tuple[str, ...] = (),
         tensor_mhz: float | None = None, l2_bytes: int | None = None, measured_tflops_bf16: float | None = None,
         measured_source: str | None = None) -> DevicePeak:
    """One table entry, its SFU and shared-memory rates taken from its architecture (:data:`ARCHS`)."""
    a = ARCHS[cc]
    l2 = l2_bytes if l2_bytes is not None else (round(l2_mib * 2**20) if l2_mib is not None else None)
    return DevicePeak(model, match, tflops, dram_tbps, source, measured_tflops_bf16=measured_tflops_bf16,
                      measured_source=measured_source, variant=variant, sms=sms, boost_mhz=boost_mhz,
                      sfu_per_clk_sm=a.sfu_per_clk_sm, sfu_source=f"{a.name} ({a.sm}): {a.sfu_source}", cc=cc,
                      l2_bytes=l2, fp32_tflops=fp32_tflops, tensor_mhz=tensor_mhz,
                      smem_bytes_per_clk_sm=a.smem_bytes_per_clk_sm, smem_source=a.smem_source, exclude=exclude,
                      sources=dict(sources))


def _tf(bf16: float, tf32: float, fp8: float | None = None, fp4: float | None = None,
        fp16: float | None = None) -> dict[str, float]:
    """Dense tensor TFLOP/s per input dtype (fp16 = bf16 unless given; fp8/fp4 only where the part has them)."""
    out = {"bf16": bf16, "fp16": bf16 if fp16 is None else fp16, "fp32": tf32}
    if fp8 is not None:
        out["fp8"] = fp8
    if fp4 is not None:
        out["fp4"] = fp4
    return out


_XLA = "OpenXLA specs/{}"  # openxla/xla xla/backends/gpu/target_config/specs/: device-property records
_CC = "compute capability (NVIDIA CUDA GPUs list; the device records above): "
_TPU = "TechPowerUp GPU database (as mirrored by public spec sites)"
_AMPERE_WP = "NVIDIA A100 Tensor Core GPU datasheet and Ampere architecture whitepaper"
_HOPPER = "NVIDIA H100 whitepaper, Table 3: tensor peaks at 1830 MHz (SXM5), 1620 MHz (PCIe); FP32 at max boost"
_A100_SRC = {"sms": _AMPERE_WP + " (108 SMs)", "boost_mhz": _AMPERE_WP + " (1410 MHz; 312 TF = 108 x 2048 x 1410 MHz)",
             "l2": _XLA.format("a100_pcie_80.txtpb") + " and a deviceQuery of an A100 40GB SXM4 (PC2 wiki): 41943040 B",
             "fp32_tflops": "A100 datasheet: 19.5 TFLOPS",
             "cc": _CC + "8.0"}
_H100_SRC = {"sms": _XLA.format("h100_sxm.txtpb") + ": 132", "boost_mhz": _XLA.format("h100_sxm.txtpb") + ": 1980 MHz",
             "l2": _XLA.format("h100_sxm.txtpb") + ": 52428800 B", "fp32_tflops": "H100 datasheet: 67 TFLOPS (SXM)",
             "tensor_mhz": _HOPPER, "cc": _CC + "9.0"}

PEAKS: tuple[DevicePeak, ...] = (
    # ---- Hopper (sm_90)
    _gpu("H100 SXM5", ("h100",), _tf(989.4, 494.7, 1978.9), 3.35,
         "NVIDIA H100 Tensor Core GPU datasheet (SXM5; dense, i.e. half the sparsity figure)", cc="9.0", sms=132,
         boost_mhz=1980, l2_mib=50, fp32_tflops=67.0, tensor_mhz=1830, sources=_H100_SRC,
         variant=("sxm", "sxm5", "hbm3"), measured_tflops_bf16=800.0,
         measured_source="bf16 8192^3 torch.matmul on the project's GPU test machine, 2026-11-21 (shared/device)"),
    _gpu("H100 PCIe", ("h100",), _tf(756.5, 378.0, 1513.0), 2.0,
         "NVIDIA H100 Tensor Core GPU datasheet (PCIe; dense; 2.0 TB/s, the XLA spec's 2.04 TB/s is higher)",
         cc="9.0", sms=114, boost_mhz=1755, l2_mib=50, fp32_tflops=51.0, tensor_mhz=1620, variant=("pcie",),
         sources={"sms": _XLA.format("h100_pcie.txtpb") + ": 114", "boost_mhz": _XLA.format("h100_pcie.txtpb") +
                  ": 1755 MHz", "l2": _XLA.format("h100_pcie.txtpb") + ": 52428800 B",
                  "fp32_tflops": "H100 datasheet: 51 TFLOPS (PCIe)", "tensor_mhz": _HOPPER, "cc": _CC + "9.0"}),
    _gpu("H100 NVL", ("h100",), _tf(835.0, 417.5, 1670.5), 3.9, "NVIDIA H100 NVL datasheet (dense)", cc="9.0",
         sms=132, boost_mhz=1785, l2_mib=None, fp32_tflops=60.0, variant=("nvl",),
         sources={"sms": "132 (GH100 as in H100 SXM5); cross-check: datasheet FP32 60 TFLOPS = 132 x 256 x 1785 MHz",
                  "boost_mhz": "1785 MHz max boost (cross-checked by the FP32 figure)",
                  "fp32_tflops": "H100 NVL datasheet: 60 TFLOPS", "l2": "not in the sources found", "cc": _CC + "9.0"}),
    _gpu("H200", ("h200",), _tf(989.4, 494.7, 1978.9), 4.8,
         "NVIDIA H200 Tensor Core GPU datasheet (SXM; dense; 141 GB HBM3e)", cc="9.0", sms=132, boost_mhz=1980,
         l2_mib=50, fp32_tflops=67.0, tensor_mhz=1830, exclude=("nvl",),
         sources={"sms": _XLA.format("h200.txtpb") + ": 132", "boost_mhz": _XLA.format("h200.txtpb") + ": 1980 MHz",
                  "l2": _XLA.format("h200.txtpb") + ": 52428800 B", "fp32_tflops": "H200 datasheet: 67 TFLOPS",
                  "tensor_mhz": _HOPPER + "; the XLA spec's matrix clock 1.8295 GHz", "cc": _CC + "9.0",
                  "exclude": "H200 NVL (a 600 W PCIe card) is a different part: its figures were not in the sources "
                             "found, so it gets none rather than the SXM ones"}),
    _gpu("GH200 480GB", ("gh200",), _tf(990.0, 494.0, 1979.0), 4.0,
         "NVIDIA GH200 Grace Hopper Superchip datasheet (96 GB HBM3, up to 4 TB/s; dense column: TF32 494, BF16/FP16 "
         "990, FP8 1,979 TFLOPS)", cc="9.0", sms=132, boost_mhz=1980, l2_mib=None, fp32_tflops=67.0,
         variant=("480gb", "hbm3"),
         sources={"sms": "OpenCL-Benchmark on an 'NVIDIA GH200 480GB' (mredenti/PowerCapping): 132 CUs at 1980 MHz",
                  "boost_mhz": "the same record: 1980 MHz", "fp32_tflops": "GH200 datasheet: 67 TFLOPS",
                  "l2": "not in the sources found", "cc": _CC + "9.0"}),
    _gpu("GH200 144GB HBM3e", ("gh200",), _tf(990.0, 494.0, 1979.0), 4.9,
         "NVIDIA GH200 Grace Hopper Superchip datasheet (144 GB HBM3e, up to 4.9 TB/s; the same compute column as "
         "the 96 GB HBM3 part)", cc="9.0", sms=132, boost_mhz=1980, l2_mib=None, fp32_tflops=67.0,
         variant=("hbm3e", "144g", "144gb"),
         sources={"sms": "the datasheet's one compute column: FP32 67 TFLOPS = 132 SMs x 256 x 1980 MHz (derived)",
                  "boost_mhz": "as the GH200 480GB (1980 MHz; derived, see sms)",
                  "fp32_tflops": "GH200 datasheet: 67 TFLOPS", "l2": "not in the sources found", "cc": _CC + "9.0"}),
    _gpu("H20", ("h20",), _tf(148.0, 74.0, 296.0), 4.0,
         "NVIDIA H20 figures as published (96 GB HBM3, 4.0 TB/s; dense FP16/BF16 148, TF32 74, INT8 296 TFLOPS); "
         "NVIDIA's H20 product brief was not among the sources found; FP8 taken at the INT8 rate (Hopper runs both "
         "at one rate: H100 datasheet 3,958 each). The tensor rate is capped below what 78 SMs could do", cc="9.0",
         sms=78, boost_mhz=None, l2_mib=60, fp32_tflops=44.0,
         sources={"sms": "78 SMs (multiProcessorCount in public H20 code and notes; Geekbench 6)",
                  "l2": "60 MB (public H20 notes)", "fp32_tflops": "44 TFLOPS as published",
                  "boost_mhz": "not published in the sources found: no SFU or shared-memory roof", "cc": _CC + "9.0"}),
    # ---- Ampere (sm_80, sm_86)
    _gpu("A100 SXM4 80GB", ("a100",), _tf(312.0, 156.0), 2.039,
         "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB; dense; no FP8)", cc="8.0", sms=108, boost_mhz=1410,
         l2_mib=40, fp32_tflops=19.5, variant=("sxm4", "sxm", "80gb"), sources=_A100_SRC),
    _gpu("A100 SXM4 40GB", ("a100",), _tf(312.0, 156.0), 1.555,
         "NVIDIA A100 Tensor Core GPU datasheet (SXM4 40GB: 1,555 GB/s; dense; no FP8)", cc="8.0", sms=108,
         boost_mhz=1410, l2_mib=40, fp32_tflops=19.5, variant=("sxm4", "sxm", "40gb"), sources=_A100_SRC),
    _gpu("A100 PCIe 80GB", ("a100",), _tf(312.0, 156.0), 1.935,
         "NVIDIA A100 Tensor Core GPU datasheet (PCIe 80GB: 1,935 GB/s, the XLA a100_pcie_80 spec's 2,039 is "
         "higher; same compute as SXM4; dense; no FP8)",
         cc="8.0", sms=108, boost_mhz=1410, l2_mib=40, fp32_tflops=19.5, variant=("pcie", "80gb"),
         sources=_A100_SRC),
    _gpu("A100 PCIe 40GB", ("a100",), _tf(312.0, 156.0), 1.555,
         "NVIDIA A100 Tensor Core GPU datasheet (PCIe 40GB: 1,555 GB/s; same compute as SXM4; dense; no FP8)",
         cc="8.0", sms=108, boost_mhz=1410, l2_mib=40, fp32_tflops=19.5, variant=("pcie", "40gb"),
         sources=_A100_SRC),
    _gpu("A10", ("a10",), _tf(125.0, 62.5), 0.600,
         "NVIDIA A10 datasheet (dense: BF16/FP16 125, TF32 62.5 TFLOPS; 600 GB/s); cross-check 72 SMs x 1024 FLOP/clk "
         "x 1695 MHz = 125.0", cc="8.6", sms=72, boost_mhz=1695, l2_mib=6, fp32_tflops=31.2,
         sources={"sms": _TPU + ": 72 SMs", "boost_mhz": _TPU + ": 1695 MHz", "l2": _TPU + ": 6 MB",
                  "fp32_tflops": "A10 datasheet: 31.2 TFLOPS", "cc": _CC + "8.6"}),
    _gpu("RTX A6000", ("a6000",), _tf(154.8, 77.4), 0.768,
         "NVIDIA RTX A6000 datasheet: tensor 309.7 TFLOPS with sparsity, dense = 154.8 (sparse/2); professional GA102 "
         "runs FP32 accumulate at full rate (the A40 datasheet lists BF16-with-FP32-accumulate = FP16-with-FP16-"
         "accumulate); TF32 = half the FP16 rate on GA102 (A40 datasheet: 74.8 against 149.7), 77.4 derived",
         cc="8.6", sms=84, boost_mhz=1800, l2_mib=None, l2_bytes=6291456, fp32_tflops=38.7,
         sources={"sms": _XLA.format("a6000.txtpb") + ": 84", "boost_mhz": _XLA.format("a6000.txtpb") + ": 1800 MHz",
                  "l2": _XLA.format("a6000.txtpb") + ": 6291456 B", "fp32_tflops": "RTX A6000 datasheet: 38.7 TFLOPS",
                  "cc": _CC + "8.6"}),
    _gpu("RTX 3090", ("3090",), _tf(71.0, 35.6), 0.936,
         "NVIDIA Ampere GA102 whitepaper, Appendix A (GeForce RTX 3090): FP16 tensor 142 TFLOPS dense with FP16 "
         "accumulate (285 sparse); GeForce runs FP32 accumulate at half that: 71 (the figure attention kernels get); "
         "TF32 35.6 (= 82 SMs x 256 x 1695 MHz); no FP8", cc="8.6", sms=82, boost_mhz=1695, l2_mib=6,
         fp32_tflops=35.6, exclude=("ti", "laptop", "mobile"),
         sources={"sms": "GA102 whitepaper / Tom's Hardware spec table: 82 SMs", "boost_mhz": "1695 MHz (same)",
                  "l2": "6 MB (same)", "fp32_tflops": "35.6 TFLOPS (same)", "cc": _CC + "8.6",
                  "exclude": "RTX 3090 Ti (84 SMs, 1860 MHz) and laptop parts are different chips"}),
    # ---- Ada Lovelace (sm_89)
    _gpu("L4", ("l4",), _tf(121.0, 60.0, 242.5), 0.300,
         "NVIDIA L4 datasheet: FP8 485, FP16/BF16 242, TF32 120 TFLOPS with sparsity; dense = half (derived); "
         "cross-check 58 SMs x 1024 x 2040 MHz = 121.2", cc="8.9", sms=58, boost_mhz=2040, l2_mib=48, fp32_tflops=30.3,
         sources={"sms": _TPU + ": 58 SMs (7424 cores); L4 datasheet FP32 30.3 TFLOPS = 58 x 256 x 2040 MHz",
                  "boost_mhz": "2040 MHz max boost (public spec listings)", "l2": _TPU + ": 48 MB",
                  "fp32_tflops": "L4 datasheet: 30.3 TFLOPS", "cc": _CC + "8.9"}),
    _gpu("L40", ("l40",), _tf(181.05, 90.5, 362.0), 0.864,
         "NVIDIA L40/L40S datasheet, L40 column (dense: BF16/FP16 181.05, TF32 90.5, FP8 362 TFLOPS; 864 GB/s)",
         cc="8.9", sms=142, boost_mhz=2490, l2_mib=96, fp32_tflops=90.5,
         sources={"sms": _TPU + ": 142 SMs (568 tensor cores in the datasheet)", "boost_mhz": _TPU + ": 2490 MHz",
                  "l2": _TPU + ": 96 MB", "fp32_tflops": "L40 datasheet: 90.5 TFLOPS", "cc": _CC + "8.9"}),
    _gpu("L40S", ("l40s",), _tf(362.05, 183.0, 733.0), 0.864,
         "NVIDIA L40S datasheet (dense). The sheet disagrees with itself: BF16 362.05 dense against 733 sparse "
         "(733/2 = 366.5); the lower dense figure is taken", cc="8.9", sms=142, boost_mhz=2520, l2_mib=96,
         fp32_tflops=91.6,
         sources={"sms": "142 SMs (568 tensor cores, datasheet)", "boost_mhz": "2520 MHz max boost (spec listings)",
                  "l2": _TPU + ": 96 MB", "fp32_tflops": "L40S datasheet: 91.6 TFLOPS", "cc": _CC + "8.9"}),
    _gpu("RTX 4090", ("4090",), _tf(165.2, 82.6, 330.3), 1.008,
         "NVIDIA Ada GPU architecture whitepaper v2.1, Appendix A, Table 2 (GeForce RTX 4090, dense): FP16/BF16 "
         "tensor with FP32 accumulate 165.2 (half the 330.3 FP16-accumulate figure), TF32 82.6, FP8 with FP32 "
         "accumulate 330.3 (corrected from 660.6 in v2.02)", cc="8.9", sms=128, boost_mhz=2520, l2_mib=72,
         fp32_tflops=82.6, exclude=("d", "laptop", "mobile"),
         sources={"sms": "Ada whitepaper Table 2: 128 SMs", "boost_mhz": "Ada whitepaper Table 2: 2520 MHz",
                  "l2": "Ada whitepaper Table 2: 73728 KB", "fp32_tflops": "Ada whitepaper Table 2: 82.6 TFLOPS",
                  "cc": _CC + "8.9",
                  "exclude": "RTX 4090 D (China) and the laptop RTX 4090 (AD103) are different parts"}),
    # ---- Blackwell (sm_100, sm_103)
    _gpu("B200", ("b200",), _tf(2250.0, 1100.0, 4500.0, 9000.0), 7.7,
         "NVIDIA HGX B200 per-GPU specification (sparse: FP4 18, FP8 9, FP16/BF16 4.5, TF32 2.2 PFLOPS; dense = half; "
         "180 GB HBM3E at 7.7 TB/s; an earlier sheet said 8 TB/s, the lower taken)", cc="10.0", sms=148,
         boost_mhz=1965, l2_mib=None, l2_bytes=132644864, fp32_tflops=75.0,
         sources={"sms": _XLA.format("b200.txtpb") + ": 148", "boost_mhz": _XLA.format("b200.txtpb") + ": 1965 MHz",
                  "l2": _XLA.format("b200.txtpb") + ": 132644864 B", "fp32_tflops": "HGX B200: 75 TFLOPS per GPU",
                  "cc": _CC + "10.0"}),
    _gpu("GB200", ("gb200",), _tf(2250.0, 1100.0, 4500.0, 9000.0), 7.7,
         "GB200 per GPU. Sources disagree: NVIDIA's GB200 NVL72 table (sparse: FP4 20, FP8 10, BF16 5, TF32 2.5 "
         "PFLOPS -> dense 10, 5, 2.5, 1.25; 8 TB/s) against Verda's per-GPU dense table (FP4 9, FP8 4.5, BF16 2.25, "
         "TF32 1.1 PFLOPS; 7.7 TB/s); the lower taken", cc="10.0", sms=152, boost_mhz=2062, l2_mib=None,
         l2_bytes=135528448, fp32_tflops=75.0,
         sources={"sms": _XLA.format("gb200.txtpb") + ": 152", "boost_mhz": _XLA.format("gb200.txtpb") +
                  ": 2062 MHz (152 x 16 x 2062 MHz = 5.0 T exp/s, NVIDIA's own GB200 figure)",
                  "l2": _XLA.format("gb200.txtpb") + ": 135528448 B",
                  "fp32_tflops": "75 (Verda) against 80 (NVIDIA NVL72 table) TFLOPS; the lower taken",
                  "cc": _CC + "10.0"}),
    _gpu("B300", ("b300",), _tf(2250.0, 1100.0, 4500.0, 13125.0), 7.7,
         "HGX B300 per GPU. Sources disagree: the HGX B300 datasheet as tabulated by glennklockwood.com (dense: BF16 "
         "2250, TF32 1125, FP8 4500, FP4 13125 TFLOPS; 8 TB/s) against Verda's per-GPU table (TF32 1.1, FP4 14 PFLOPS;"
         " 7.7 TB/s); the lower taken. NVIDIA's 15 PFLOPS dense NVFP4 is for the full 160-SM Blackwell Ultra",
         cc="10.3", sms=148, boost_mhz=1965, l2_mib=None, l2_bytes=132644864, fp32_tflops=75.0,
         sources={"sms": "148: multiProcessorCount of an 'NVIDIA B300 SXM6 AC' (public B300 characterization notes); "
                         "OpenXLA's b300.txtpb says 158 and NVIDIA's blog 160 for the full die; the lower taken",
                  "boost_mhz": "1965 MHz (OpenXLA b300.txtpb) against 2032 MHz (nvidia-smi max on a B300 SXM6 AC, "
                               "same notes); the lower taken",
                  "l2": "132644864 B (cudaGetDeviceProperties on a B300 SXM6 AC, same notes) against 135528448 B "
                        "(OpenXLA b300.txtpb); the lower taken", "fp32_tflops": "HGX B300: 75 TFLOPS per GPU",
                  "cc": _CC + "10.3"}),
    _gpu("GB300", ("gb300",), _tf(2500.0, 1250.0, 5000.0, 15000.0), 8.0,
         "GB300 per GPU, dense: FP4 15, FP8 5, FP16/BF16 2.5, TF32 1.25 PFLOPS, 8 TB/s (Verda's per-GPU table; GB300 "
         "NVL72: 1.1 EF dense FP4, 360 PF FP8 and 576 TB/s over 72 GPUs agree)", cc="10.3", sms=152,
         boost_mhz=2070, l2_mib=None, l2_bytes=135528448, fp32_tflops=80.0,
         sources={"sms": _XLA.format("gb300.txtpb") + ": 152", "boost_mhz": _XLA.format("gb300.txtpb") + ": 2070 MHz",
                  "l2": _XLA.format("gb300.txtpb") + ": 135528448 B", "fp32_tflops": "Verda: 80 TFLOPS per GPU",
                  "cc": _CC + "10.3"}),
    # ---- Blackwell GeForce (sm_120)
    _gpu("RTX 5090", ("5090",), _tf(209.5, 104.8, 419.0, 1676.0), 1.792,
         "NVIDIA RTX Blackwell GPU architecture whitepaper, Table 3 (GeForce RTX 5090): FP16/BF16 tensor with FP32 "
         "accumulate 209.5 dense (half the 419 FP16-accumulate figure; 838 sparse); FP8 with FP32 accumulate at half "
         "the FP16-accumulate 838: 419; FP4 3352 sparse -> 1676 dense; TF32 = 170 SMs x 256 x 2407 MHz = 104.8 "
         "(derived from the whitepaper's per-SM rates)", cc="12.0", sms=170, boost_mhz=2407, l2_mib=96,
         fp32_tflops=104.8, exclude=("d", "laptop", "mobile"),
         sources={"sms": "RTX Blackwell whitepaper / Tom's Hardware spec box: 170 SMs", "boost_mhz": "2407 MHz (same)",
                  "l2": "96 MB (same)", "fp32_tflops": "104.8 TFLOPS (170 x 256 x 2407 MHz; Tom's Hardware: 104)",
                  "cc": _CC + "12.0", "exclude": "RTX 5090 D and the laptop RTX 5090 are different parts"}),
)


@dataclass(frozen=True)
class DeviceMatch:
    """The peak table entry a GPU name was matched to (None: no entry), and why, in words."""

    name: str | None
    peak: DevicePeak | None
    why: str


def _words(name: str) -> str:
    """Lower case, every run of other characters one space, letters and digits split where a model name ends
    (``h100sxm5`` -> ``h100 sxm5``, ``rtx4090`` -> ``rtx 4090``): `` nvidia h100 80gb hbm3 ``."""
    s = re.sub(r"[^a-z0-9]+", " ", name.lower())
    s = re.sub(r"(?<=\d)(?=(sxm|pcie|nvl|hbm))", " ", s)
    s = re.sub(r"(?<=rtx)(?=\d)", " ", s)
    return f" {s.strip()} "


def _has(words: str, w: str) -> bool:
    return f" {w} " in words


def match(device_name: str | None) -> DeviceMatch:
    """Which entry of :data:`PEAKS` a GPU name means, and why. The model is a whole word of the name (so
    ``GH200`` is not an H200 nor ``A10G`` an A10); a word an entry excludes (``ti``, ``laptop``) means another part.
    Among a model's variants the one whose words the name holds most of (``sxm4`` and ``40gb``), the first listed
    on a tie, said so; with none of them, the model's default (first) entry, said so."""
    if not device_name or not isinstance(device_name, str) or not device_name.strip():
        return DeviceMatch(None, None, "no device named")
    words = _words(device_name)
    if words.strip() == "cpu":
        return DeviceMatch(device_name, None, "a CPU: no GPU peak applies")
    for model in dict.fromkeys(m for p in PEAKS for m in p.match):
        if not _has(words, model):
            continue
        entries = [p for p in PEAKS if model in p.match]
        kept = [p for p in entries if not any(_has(words, w) for w in p.exclude)]
        if not kept:
            hit = next(w for p in entries for w in p.exclude if _has(words, w))
            return DeviceMatch(device_name, None, f"{model.upper()} with '{hit}' in the name is a different part: "
                                                  f"no peak figures for {device_name!r} in profctl.devices")
        return _variant(device_name, model, words, kept)
    return DeviceMatch(device_name, None, f"no peak figures for {device_name!r} in profctl.devices")


def _variant(device_name: str, model: str, words: str, entries: list[DevicePeak]) -> DeviceMatch:
    """The entry among one model's variants that the name's words point to (see :func:`match`)."""
    hits = {p.model: [v for v in p.variant if _has(words, v)] for p in entries}
    best = max(len(h) for h in hits.values())
    if best:
        winners = [p for p in entries if len(hits[p.model]) == best]
        said = ", ".join(f"'{w}'" for w in hits[winners[0].model])
        if len(winners) == 1:
            return DeviceMatch(device_name, winners[0], f"{model.upper()} with {said} in the name: {winners[0].model}")
        fits = " and ".join(p.model for p in winners)
        return DeviceMatch(device_name, winners[0], f"{model.upper()} with {said} in the name fits {fits}: taken as "
                                                    f"{winners[0].model}")
    default = entries[0]
    if len(entries) == 1:
        return DeviceMatch(device_name, default, f"{model.upper()} in the name: {default.model}")
    others = ", ".join(p.model for p in entries[1:])
    return DeviceMatch(device_name, default, f"{model.upper()} in the name, no variant said ({others} named "
                                             f"none of their words): taken as {default.model}")


def lookup(device_name: str | None) -> DevicePeak | None:
    """The peak table entry for a device name, or None (a CPU, or a GPU we have no figures for)."""
    return match(device_name).peak


def peak_tflops(device_name: str | None, dtype: str) -> float | None:
    p = lookup(device_name)
    return p.tflops.get(dtype) if p else None


def smem_tbps(device_name: str | None) -> float | None:
    """Shared-memory bandwidth of the named GPU in TB/s (SMs x bytes/clk/SM x boost clock), the roof of a kernel
    bound by shared memory; None when the GPU, its SM count or its clock is unknown."""
    p = lookup(device_name)
    return p.smem_tbps if p else None


def fp32_tflops(device_name: str | None) -> float | None:
    """FP32 non-tensor (FMA pipe) peak of the named GPU, TFLOP/s: the rate an FMA path runs at where a tensor core
    would serve (compare with :func:`peak_tflops` for ``fp32``, the TF32 tensor peak)."""
    p = lookup(device_name)
    return p.fp32_tflops if p else None


def l2_bytes(device_name: str | None) -> int | None:
    """L2 cache size of the named GPU in bytes (None: unknown)."""
    p = lookup(device_name)
    return p.l2_bytes if p else None
