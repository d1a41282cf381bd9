"""The catalog of causes profctl names (:data:`CATALOG`) and one cause found in a kernel (:class:`Cause`): data, read
by the detectors (profctl.analysis.cause_rules), the ranking (profctl.analysis.causes), the renderers and
docs/diagnosis.md ("Causes"), which tests/unit/test_causes.py keeps in step with it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from profctl.analysis.source import short_path
from profctl.analysis.time_model import HIDE, ROOF, WAIT, WORK


@dataclass(frozen=True)
class CauseDef:
    """One entry of the catalog."""

    id: str
    title: str
    detects: str       # what in the report gives it away
    fix: str           # what to change
    saving: str        # how the saving is predicted
    attention: str = ""  # what it means in an attention kernel, where that is more specific
    ncu_rules: tuple[str, ...] = ()  # ncu guided-analysis rules that estimate the same thing
    #: what its fix changes in the model of the kernel's time (profctl.analysis.time_model): work removed from
    #: units (WORK), a wait removed (WAIT), latency hidden by more warps or blocks (HIDE), or nothing: the
    #: verdict of a kernel at a roof (ROOF)
    effect: str = WORK
    #: the units whose work the fix reduces, and the fraction of it left (0: all of it, or not known): the fixed
    #: kernel's unit terms are taken over the others at their present work (a fix for late loads does not make the
    #: tensor pipe faster). Detectors that know the fraction (the excess sectors of an uncoalesced load) give it on
    #: the Cause.
    relieves: dict[str, float] = field(default_factory=dict)
    #: the grid: SM-clocked units' work sits on the SMs that have blocks until it is fixed
    spreads: bool = False
    #: against B, units whose work the fix may also bring down to B's (A fixed does B's work there): an FP32
    #: matmul moved to the tensor cores also drops its register-tile spills and operand reads
    pair_relieves: tuple[str, ...] = ()


_C = CauseDef
CATALOG: dict[str, CauseDef] = {c.id: c for c in (
    _C("uncoalesced-global", "uncoalesced global memory accesses",
       "a load or store whose warp touches more L2 sectors than an ideally coalesced access would "
       "(ncu's per-instruction theoretical sectors against the ideal), in a kernel whose time goes to memory",
       "make neighbouring threads touch neighbouring addresses: index with the thread's fastest-moving id on the "
       "contiguous dimension, stage a transpose through shared memory, load wider vectors; in Triton, make the "
       "block's contiguous axis the tensor's stride-1 axis",
       "time x memory-bound share x (excess sectors / all global sectors): the excess traffic goes away",
       "strided Q/K/V/O layouts (bshd read as bhsd without a contiguous head dim) make every tile load uncoalesced",
       ("UncoalescedGlobalAccess", "MemoryCacheAccessPattern"), effect=WORK,
       relieves={"l1": 0.0, "l2": 0.0, "dram": 0.0}),
    _C("smem-bank-conflict", "shared-memory bank conflicts",
       "shared-memory instructions taking more wavefronts than their ideal (n-way bank conflicts), in a kernel "
       "limited by the shared-memory pipe or waiting on it (MIO throttle, short scoreboard)",
       "pad the shared array (a row of 33 floats for 32), swizzle the layout (XOR the column with the row), or "
       "read with ldmatrix / wider accesses",
       "time x shared-memory-bound share x (excess wavefronts / all wavefronts)",
       "the K/V tiles of an attention kernel read column-wise without a swizzle",
       ("UncoalescedSharedAccess", "SharedMemoryConflicts"), effect=WORK,
       relieves={"l1": 0.0}),
    _C("local-memory", "local memory: register spills or a per-thread array indexed at run time",
       "local-memory loads and stores (LDL/STL): spill requests when registers ran out, else a per-thread array "
       "the compiler could not keep in registers (a stack frame, a dynamic index)",
       "index the per-thread array with compile-time constants (unroll the loop), or move the table to shared "
       "memory; for spills, lower register pressure (smaller tiles, fewer live values) or raise the register "
       "budget (__launch_bounds__, -maxrregcount)",
       "time x the share of warp time at local accesses (or memory-bound share x local / all sectors)",
       "an accumulator tile too large for the registers of a warp (head dim 256 with wide tiles) spills",
       ("MemoryL1LocalMemory", "LocalMemoryUsage"), effect=WORK,
       relieves={"l1": 0.0, "l2": 0.0, "dram": 0.0, "lsu": 0.0, "issue": 0.0}),
    _C("occupancy-registers", "occupancy limited by registers",
       "a latency-bound kernel (no unit busy, few eligible warps) that holds as many warps as its register use "
       "allows, fewer than the SM could hold",
       "use fewer registers per thread: __launch_bounds__(threads, blocks), -maxrregcount, smaller tiles or fewer "
       "values live at once; in Triton fewer num_warps' worth of state or smaller BLOCK sizes",
       "latency-bound time scales with resident warps: time x (1 - 1 / min(warps allowed without the limit / "
       "warps now, headroom of the busiest unit))",
       "", ("TheoreticalOccupancy", "AchievedOccupancy"), effect=HIDE),
    _C("occupancy-shared-memory", "occupancy limited by shared memory",
       "a latency-bound kernel whose shared memory per block caps the blocks per SM below what registers and "
       "warps allow",
       "use less shared memory per block (drop an unused or oversized buffer, fewer pipeline stages, smaller "
       "tiles), or share one buffer between phases",
       "as occupancy-registers, with shared memory as the limit lifted",
       "each pipeline stage of a FlashAttention kernel holds a K and a V tile: more stages, fewer blocks per SM",
       ("TheoreticalOccupancy", "AchievedOccupancy"), effect=HIDE),
    _C("occupancy-block-size", "occupancy limited by the block size",
       "blocks so small that the SM's limit on resident blocks caps its warps (e.g. 32 blocks of 32 threads: half "
       "the warps an SM could hold), in a latency-bound kernel",
       "launch blocks of 128-256 threads (more work per block) so the warp limit, not the block limit, applies",
       "as occupancy-registers, with the block limit lifted", "", ("TheoreticalOccupancy", "AchievedOccupancy"),
       effect=HIDE),
    _C("tail-effect", "a partial last wave (tail effect)",
       "a grid just over a whole number of waves (blocks x blocks per SM x SMs): the last wave runs with most SMs "
       "idle",
       "size the grid to whole waves (blocks = SMs x blocks per SM x k), split the work into more, smaller blocks "
       "so the last wave is fuller, or use a persistent grid",
       "with blocks of equal work, time goes with whole waves: time x (1 - waves / ceil(waves))",
       "batch x heads x query blocks just over a wave: a common attention grid (e.g. 133 blocks on 132 SMs)",
       ("LaunchConfiguration", "WaveQuantization"), effect=HIDE, spreads=True),
    _C("too-few-blocks", "too few blocks for the GPU",
       "a grid smaller than one wave (fewer blocks than the SMs could run at once): SMs stay idle",
       "launch at least SMs x blocks per SM blocks (one per work tile), or split each block's loop across more "
       "blocks (split-K / split-KV, as flash-decoding does for short query lengths)",
       "the idle SMs' share: time x (1 - 1 / min(SM slots / blocks, headroom of the device-wide units))",
       "decode (one query row) with few heads and no KV split leaves most SMs idle", ("LaunchConfiguration",),
       effect=HIDE, spreads=True),
    _C("wasted-work", "work the result does not need",
       "more tensor-core FLOPs counted (ncu's sm__ops_path_tensor_op_*, else the MMA instructions weighed by the "
       "shapes their SASS names) than the result needs: the useful FLOPs of the attention shape (its NVTX range or "
       "--shape, masks included) or, in a pair, B's for the same result: fully masked blocks computed, "
       "recomputation, padding",
       "skip what the result does not use: loop only over the KV blocks a causal or windowed mask leaves visible "
       "(split the loop into unmasked blocks and the diagonal ones), do not recompute what a pass already has, pad "
       "less",
       "the work scales every unit the loop feeds: time x (1 - useful / counted) where the kernel's time goes "
       "with its work, through the model (the binding unit after the change)",
       "a causal forward that loops over every KV block and masks the upper half does twice the matrix work",
       ("HighPipeUtilization",), effect=WORK),
    _C("warp-divergence", "warp divergence",
       "instructions executed by fewer than 32 threads of their warp (lanes of one warp taking different paths), "
       "on the lines that take the kernel's time",
       "make the branch uniform per warp: decide by warp, not by lane (threadIdx.x / 32), or regroup the work so "
       "the lanes of a warp take the same path",
       "the idle lanes' share of the time at those lines: time x share x (1 - threads per instruction / 32)",
       "", ("ThreadDivergence", "BranchDivergence"), effect=WORK,
       relieves={"issue": 0.0, "fma": 0.0, "alu": 0.0}),
    _C("no-tensor-cores", "matrix work on the FMA pipe instead of the tensor cores",
       "a kernel busy on the FP32 FMA pipe with its tensor pipe idle, whose hot lines form a matrix product "
       "(a dot, a matmul, an accumulation of the product of two loaded operands over k) -- not any FFMA: a "
       "polynomial or an elementwise chain has no matrix to move; a library kernel without lines by its name and "
       "its shared-memory operand tiles",
       "use the tensor cores: tl.dot with input_precision='tf32' or bf16/fp16 operands in Triton; cuBLAS, CUTLASS, "
       "WMMA or mma in CUDA",
       "the FMA-bound time x (1 - FP32 FMA rate / tensor rate of the dtype)",
       "an fp32 attention (or the fp32 'math' path) computing Q K^T and P V with FFMAs",
       ("HighPipeUtilization", "FPInstructions"), effect=WORK, pair_relieves=("l1", "l2", "lsu"),
       relieves={"fma": 0.0, "issue": 0.0}),
    _C("legacy-mma", "warp-level mma.sync on a GPU with warpgroup MMA",
       "tensor work issued as Ampere's warp-level mma.sync (HMMA) on a Hopper or newer GPU whose warpgroup MMA "
       "(wgmma, fed by TMA) is faster, with no wgmma in the kernel",
       "use a wgmma kernel: FlashAttention-3 or cuDNN's SDPA on Hopper (FlashAttention-4 on Blackwell), Triton's "
       "Hopper path, CUTLASS 3 / CuTe",
       "the same matrix work at a wgmma kernel's tensor efficiency (the other kernel's in a pair, else 70 % of the "
       "pipe): time x (1 - tensor busy x mma.sync rate / (wgmma rate x that efficiency))",
       "PyTorch's SDPA flash backend (FlashAttention-2) and its memory-efficient backend (CUTLASS sm80 kernels) run "
       "mma.sync (HMMA.16816) on Hopper, forward and backward; cuDNN and FA3 run wgmma fed by TMA",
       ("HighPipeUtilization",), effect=WORK,
       relieves={"tensor": 0.0, "issue": 0.0, "l1": 0.0, "lsu": 0.0}),
    _C("mma-not-overlapped", "warpgroup MMA not overlapped with other work",
       "warps waiting on their own asynchronous wgmma results (WARPGROUP.DEPBAR / warpgroup arrive) for a large "
       "share of the time, with the tensor pipe well below its peak",
       "let two warpgroups take turns, ordered (ping-pong: one's softmax under the other's MMA, as FlashAttention-3 "
       "and cuDNN do, with a producer warp on TMA); overlap inside one warpgroup, or between blocks that are not "
       "ordered, was measured not to pay: the softmax's own latency then binds",
       "the time to reach B's tensor-pipe efficiency for the same matrix work (else a ping-pong kernel's): what the "
       "ordered overlap gives, not what removing the wait alone would",
       "the softmax of one KV tile does not run under the Q K^T of the next", ("CPIStall",), effect=WAIT),
    _C("mma-serialized", "warpgroup MMAs serialized by the compiler",
       "the SASS splits each chain of wgmma k-slices with a full wait (WARPGROUP.DEPBAR.LE gsb0, 0x0 between two "
       "wgmma into one accumulator): ptxas made every wgmma synchronous (its C7514 'wgmma.mma_async instructions are "
       "serialized', printed only with ptxas -v), so the overlap the program asked for does not happen",
       "keep other instructions off a running wgmma's registers: wait for a group before anything reads, moves or "
       "rewrites its accumulator or register operand (an accumulator carried by a loop while its wgmma runs is "
       "copied at the back edge); where the kernel spills, lower its register pressure first (ptxas serializes "
       "for want of registers too, C7512); confirm with ptxas -v on the kernel's PTX (Triton: the compiled "
       "kernel's asm['ptx']) that C7514 and C7512 are gone",
       "time x the warp-time share at the waits the compiler added (those inside a chain) / the warps a scheduler "
       "holds (its other warps cover part of a warp's wait); the overlap the program meant is not counted",
       "a softmax meant to run under the next tile's Q K^T (or the previous P V) waits for each k-slice instead",
       effect=WAIT),
    _C("loads-not-pipelined", "loads not pipelined with compute",
       "warps waiting for their loads (long scoreboard, or an async-copy barrier) in the main loop while neither "
       "the memory system nor any pipe is busy: loads are issued just before their use",
       "prefetch the next tile while computing this one: more pipeline stages (Triton num_stages=2-4), cp.async "
       "or TMA double buffering, loads issued a loop iteration earlier",
       "time x min(the load-wait share, 1 - the busiest unit's utilisation)",
       "num_stages=1 in an attention forward: each K/V tile is loaded, then waited for, then used; in a "
       "warp-specialized one (a producer warp on TMA), a ring too shallow for the producer to stay ahead: the "
       "consumers wait on the ready barriers",
       ("CPIStall",), effect=WAIT),
    _C("sfu-bound", "special-function unit (exp) at its limit",
       "the XU pipe is the busiest unit, near its peak, and MUFU (exp2, rcp, rsqrt) is most of its instructions "
       "(where conversions fill it: xu-conversions)",
       "issue fewer MUFU instructions: fold log2(e) into the scale and use exp2, skip exps of masked elements, or "
       "emulate part of the exps with a polynomial on the FMA pipe (FlashAttention-4's trick)",
       "moving part of the exps to the FMA pipe until both pipes are equally busy: time x (1 - the balanced "
       "load / the XU load)",
       "the softmax's exp: at head dim 64 (and on Blackwell at 128) attention hits the SFU roof before the tensor "
       "roof", ("HighPipeUtilization",), effect=WORK,
       relieves={"xu": 0.0}),
    _C("xu-conversions", "conversions and rounding on the XU pipe",
       "the XU pipe is the busiest unit and most of its instructions are not MUFU exps but conversions (F2I, I2F, "
       "F2F), rounding (FRND) or bit ops (POPC, FLO): an exp emulated with a polynomial still needs its floor and "
       "its exponent conversion there, and dtype conversions share the pipe with the exps",
       "issue fewer conversions: keep values in one precision across the loop, convert packed pairs (F2FP), build "
       "2^n with integer shifts of the exponent bits rather than F2I/I2F, and do not emulate exps whose floor and "
       "conversion cost as much XU time as the MUFU.EX2 they replace",
       "time x (1 - the XU's busy share without the conversions, or the next unit's floor)",
       "FlashAttention-4's exp polynomial pays off only where the FMA pipe has room and the XU is busy with MUFU.EX2: "
       "its Cody-Waite range reduction adds FRND/F2I work on the same pipe", ("HighPipeUtilization",), effect=WORK,
       relieves={"xu": 0.0, "issue": 0.0}),
    _C("register-shuffle", "bytes and lanes moved between registers around the MMAs",
       "byte permutes, selects, lane shuffles and byte-unpacking logic ops (PRMT, SEL, SHFL, LOP3) are a large share "
       "of the instructions of a kernel that issues MMAs: no arithmetic, only the layout of one MMA's result made "
       "into the next MMA's register operand (an 8-bit P, a score tile crossing threads)",
       "keep the operand in the layout the MMA reads: convert where the value is made and used in the same loop "
       "iteration (an 8-bit tensor carried by a loop is kept a byte a register and repacked around every use), and "
       "permute the other operand's rows (K's or V's keys within each group of 16) so that the accumulator's "
       "registers already are the operand (FlashAttention-3's FP8 layout)",
       "their share of the instructions beyond a kernel's usual share, of the time (every warp's own chain: time x "
       "excess share), or in a warp-specialized ping-pong of the issue slots (time x issue-slot busy share x excess "
       "share)",
       "FP8 attention: the fp32 scores become the e4m3 operand of P V; with K's keys permuted no thread needs "
       "another's values, and P is converted in the iteration that multiplies it", (), effect=WORK,
       relieves={"issue": 0.0}),
    _C("dram-bound", "DRAM bandwidth at its limit",
       "DRAM throughput near its peak (or, against another kernel, more DRAM bytes for the same work)",
       "move fewer bytes: fuse passes (one pass over each row instead of several), keep reused data on chip, "
       "lower precision; at the roof nothing else helps",
       "alone: what is left to the DRAM roof; against another kernel: time x memory-bound share x (1 - its bytes / "
       "these bytes)", "a softmax in several passes over an S x S score matrix: FlashAttention's point",
       ("SOLBottleneck", "DRAMThroughput"), effect=WORK,
       relieves={"dram": 0.0, "l2": 0.0}),
    _C("compute-bound", "a compute pipe at its limit",
       "a pipe (tensor, FMA, ALU) near its peak: never said of a pipe that is not at its roof (against another "
       "kernel, more work for the same result is wasted-work)",
       "do less work on that pipe (wasted-work says what the result does not need), or move it to a faster one "
       "(a lower precision); at the roof little is left",
       "what is left to the pipe's peak", "a causal attention at the tensor roof has only its masked blocks to drop",
       ("HighPipeUtilization", "SOLBottleneck"), effect=ROOF),
    _C("l2-thrashing", "reused data falls out of L2 (thrashing)",
       "the same loads as another kernel but many more L2 misses and DRAM bytes; alone, a DRAM-bound kernel with a "
       "low L2 hit rate only with evidence that it re-reads its data (DRAM bytes beyond what its shape must move, "
       "or matrix work whose operands many blocks read again): a kernel that streams every byte once is at the "
       "DRAM roof, not thrashing",
       "reorder the work so reuse happens close in time: tile the loops, swizzle the block order (grouped "
       "launch order so blocks sharing K/V run together), or keep the reused part in shared memory",
       "time x memory-bound share x (1 - the other kernel's DRAM bytes / these)",
       "blocks of different heads interleaved so each head's K/V is evicted between its readers",
       ("MemoryCacheAccessPattern",), effect=WORK,
       relieves={"dram": 0.0, "l2": 0.0}),
    _C("atomic-contention", "atomics contending on the same addresses",
       "atomic or reduction instructions (ATOM, RED) taking a large share of the warps' time: many threads update "
       "the same address and the L2 serializes them",
       "reduce within the warp (shuffles) and the block (shared memory) first, then one atomic per block; or give "
       "each block its own partial result",
       "time x the share at the atomic lines x (1 - 1/32) (one atomic per warp instead of per thread)",
       "", (), effect=WAIT,
       relieves={"l2": 0.0, "lsu": 0.0}),
    _C("barrier-sync", "block-wide barriers",
       "warps waiting at __syncthreads (BAR.SYNC) for a large share of the time: many barriers per unit of work, "
       "as in a shared-memory reduction tree (not an mbarrier wait, SYNCS: a load's or a warp-specialized "
       "pipeline's handoff; nor the warps a warp-specialized launch parks at its partition barrier)",
       "synchronize less: reduce within a warp with shuffles (no barrier), one barrier per phase, or named "
       "barriers for the warps that need them",
       "time x the share waiting at block barriers (and, against another kernel, the shared-memory queueing between "
       "them)", "the block-wide barriers that guard K/V tiles in shared memory: producer/consumer warps with "
       "mbarriers (warp specialization, as FlashAttention-3 and cuDNN) replace them", ("CPIStall",), effect=WAIT,
       relieves={"l1": 0.0, "lsu": 0.0}),
    _C("launch-bound", "launch-bound: kernels too small for their launch cost",
       "(nsys, bench) kernels of a few microseconds with the GPU idle between them: launches, not the kernels, "
       "take the time",
       "fuse the small kernels (torch.compile, a fused kernel), capture a CUDA graph, or batch more work per launch",
       "the idle time between kernels", "decode steps of small models: the attention kernel runs a few us", (),
       effect=WAIT),
    _C("latency-bound", "latency-bound with no single fault found",
       "no unit is busy and no specific fault above fits: warps mostly wait (the stall reasons say on what)",
       "more independent work per thread (unroll, several elements per thread), more resident warps, or less "
       "work on the critical path; the stall table below says what the warps wait for",
       "not predicted", "", (), effect=HIDE),
)}


class Evidence(str):
    """One piece of a cause's evidence: the sentence (it is a ``str``, so it prints and joins as one), and as data
    the metric it rests on (ncu's name where there is one), its value and unit, and what it was judged by (a
    threshold and how it compares, or B's value in a pair). The table, Markdown, JSON, MCP answers and the notebook
    display render from the same items (issue 51)."""

    metric: str | None
    value: float | None
    unit: str
    threshold: float | None
    judged: str

    def __new__(cls, sentence: str, metric: str | None = None, value: float | None = None, unit: str = "",
                threshold: float | None = None, judged: str = "") -> Evidence:
        obj = super().__new__(cls, sentence)
        obj.metric, obj.value, obj.unit, obj.threshold, obj.judged = metric, value, unit, threshold, judged
        return obj

    def to_dict(self) -> dict[str, Any]:
        return {"sentence": str(self), "metric": self.metric, "value": self.value, "unit": self.unit or None,
                "threshold": self.threshold, "judged": self.judged or None}


def evidence_item(x: str) -> dict[str, Any]:
    """An evidence entry as data: its fields where it is an :class:`Evidence`, else the sentence alone."""
    if isinstance(x, Evidence):
        return x.to_dict()
    return {"sentence": str(x), "metric": None, "value": None, "unit": None, "threshold": None, "judged": None}


@dataclass
class Cause:
    """One cause in one kernel (or of a gap between two): where, how much it would save, and why we think so."""

    id: str
    lines: list[tuple[str, int]] = field(default_factory=list)  # (file, line), most important first
    saving_us: float = 0.0      # predicted time saved by fixing it
    evidence: list[str] = field(default_factory=list)
    fix: str = ""               # the catalog's fix, made specific where the evidence allows
    ncu_us: float | None = None  # ncu's own estimate for the same thing, in us of this kernel
    ncu_rule: str | None = None
    note: str = ""              # a caveat (advice withheld, lines unknown, ...)
    kernel_us: float | None = None  # the kernel's time the saving is out of
    #: against another kernel: the saving is already the difference of the two kernels' time in the mechanism
    differential: bool = False
    #: the units whose work the fix reduces, and the fraction of it left (0: all of it, or unknown): what the floor
    #: of the fixed kernel is taken over (profctl.analysis.floor.Floor.after); None: the catalog's default
    relieves: dict[str, float] | None = None
    #: the fraction of the kernel's time the detector's own model gives the fault, before the model of the
    #: kernel's time (profctl.analysis.time_model) sets it against the units and the other faults; None: the
    #: saving over the time
    share: float | None = None
    #: how much of it there is, in the detector's own measure (excess sectors over all, a stall share ...): what
    #: tells a fault both kernels of a pair share (the same degree) from one only A has
    degree: float | None = None
    #: set by the model: the kernel's predicted time with this fault alone fixed, what then binds, and what the
    #: detector's own model said before the units and the other faults were taken into account
    floor_after_us: float | None = None
    then_binds: str | None = None
    uncapped_us: float | None = None
    #: set by the model: what fixing it adds once every other named fault is fixed (its part in the joint fix)
    with_others_us: float | None = None
    #: how often this cause's predictions on this GPU came true on the user's own changes (profctl.predictions)
    track: str | None = None

    @property
    def fixed_us(self) -> float | None:
        """The predicted time of the kernel once this cause is fixed."""
        return None if self.kernel_us is None else max(self.kernel_us - self.saving_us, 0.0)

    @property
    def definition(self) -> CauseDef:
        return CATALOG[self.id]

    @property
    def title(self) -> str:
        return self.definition.title

    def where(self) -> str:
        """``file.cu:42, file.cu:44`` (short paths), or a word when the cause has no line."""
        if not self.lines:
            return "(no line: the launch or the kernel as a whole)"
        return ", ".join(f"{short_path(f)}:{n}" for f, n in self.lines[:3])

    def to_dict(self) -> dict[str, Any]:
        """The JSON of `profctl explain -f json`'s ``causes``: id, title, lines, saving_us, evidence, fix (and
        ncu's estimate, the catalog's model, a note)."""
        return {"id": self.id, "title": self.title,
                "lines": [{"file": f, "line": n} for f, n in self.lines],
                "saving_us": round(self.saving_us, 3), "evidence": [str(x) for x in self.evidence],
                "evidence_items": [evidence_item(x) for x in self.evidence], "fix": self.fix,
                "ncu_saving_us": None if self.ncu_us is None else round(self.ncu_us, 3), "ncu_rule": self.ncu_rule,
                "model": self.definition.saving, "attention": self.definition.attention or None,
                "note": self.note or None,
                "fixed_us": None if self.fixed_us is None else round(self.fixed_us, 3),
                "floor_after_us": None if self.floor_after_us is None else round(self.floor_after_us, 3),
                "uncapped_saving_us": None if self.uncapped_us is None else round(self.uncapped_us, 3),
                "relieves": sorted(unit_relief(self)), "track_record": self.track,
                "effect": self.definition.effect, "then_binds": self.then_binds,
                "with_others_us": None if self.with_others_us is None else round(self.with_others_us, 3)}


#: the catalog's default relief per cause (its ``relieves`` field)
RELIEVES: dict[str, dict[str, float]] = {c.id: dict(c.relieves) for c in CATALOG.values() if c.relieves}


def unit_relief(c: Cause) -> dict[str, float]:
    """The units fixing `c` relieves (its own where the detector gave them, else the catalog's)."""
    return dict(c.relieves) if c.relieves is not None else dict(RELIEVES.get(c.id, {}))


__all__ = ["CATALOG", "RELIEVES", "Cause", "CauseDef", "Evidence", "evidence_item", "unit_relief"]
