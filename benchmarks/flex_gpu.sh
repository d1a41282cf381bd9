#!/usr/bin/env bash
# Issue 41 on the GPU machine (H200; torch 2.11 + triton 3.6): FlexAttention against FA4, cuDNN, SDPA flash,
# profctl's Triton and eager over full, causal, sliding-window and document masks, and profctl explain on flex's
# generated kernel against cuDNN. Run from the root of the tree (carry [".gpu"]):
#
#   source .gpu/on-gpu.sh && python3 -m pip install -q --no-deps --no-build-isolation -e . && \
#     bash benchmarks/flex_gpu.sh facts table explain
#
# FA4 and flex-fa4 need FlashAttention-4's CUDA-13 library (shared/device/prepare-fa4.sh: .gpu-fa4/cu13.tar.xz, 61
# MiB). With this tree (~24 MB) it no longer fits one call's 64 MiB, so it goes in two halves, each call right after
# the other on the still-warm machine (2026-11-27):
#   split -b 33000000 .gpu-fa4/cu13.tar.xz /tmp/cu13.part. && mkdir -p .gpu-fa4a .gpu-fa4b &&
#     mv /tmp/cu13.part.aa .gpu-fa4a/ && mv /tmp/cu13.part.ab .gpu-fa4b/    (both git-excluded, .git/info/exclude)
#   call 1, carry [".gpu"]:      source .gpu/on-gpu.sh && pip install -e . ...; ... (any GPU work)
#   call 2, carry [".gpu-fa4a"]: mkdir -p /tmp/fa4parts && cp .gpu-fa4a/cu13.part.aa /tmp/fa4parts/
#   call 3, carry [".gpu-fa4b"]: cat /tmp/fa4parts/cu13.part.aa .gpu-fa4b/cu13.part.ab | tar xJf - -C /tmp/gpu-site &&
#     touch /tmp/gpu-site/.fa4 && source /tmp/gpu-site/on-gpu.sh && BACKENDS=flex,fa4,flex-fa4,... bash benchmarks/flex_gpu.sh table
#
# Steps (in the order named; each cut to what is left of BUDGET seconds, default 560):
#   facts    torch, triton, FA4 and whether Flex's FLASH backend is there, into $OUT/flex_facts.txt
#   table    ONE profctl bench command: the sweep below -> $OUT/flex_rows.json, $OUT/flex_table.md
#            (benchmarks/flex_table.py), the run's manifest and log. DIMS / SEQS / PASSES narrow it: the whole sweep
#            is 2 head dims x 3 lengths x 8 masks x 2 passes, ~48 flex compiles of 3-20 s each, which may not fit
#            one call: DIMS=128 in one call and DIMS=64 in the next, then flex_table.py on both JSON files.
#   explain  profctl ncu --recipe explain on flex and cuDNN, causal s4096 d128, then profctl explain on flex's
#            kernel --vs cudnn; the report (the test fixture to keep), explain's Markdown and JSON, and flex's
#            generated Triton code from the run directory (inductor/) -> $OUT/flex_explain.tgz
set -u
T0=$(date +%s)
BUDGET=${BUDGET:-560}
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
for env in "${GPU_ENV:-}" .gpu/on-gpu.sh ../.gpu/on-gpu.sh; do
  if [ -n "$env" ] && [ -f "$env" ]; then source "$env" >/dev/null 2>&1; break; fi
done
export PYTHONUNBUFFERED=1
P="python3 -m profctl"
lim() { local left=$(( BUDGET - ($(date +%s) - T0) - 10 )); [ $left -lt $1 ] && echo $(( left > 5 ? left : 5 )) || echo $1; }
at() { echo "== $1 ($(( $(date +%s) - T0 ))s in)"; }
R=/tmp/flex_runs

step_facts() {
  python3 - > "$OUT/flex_facts.txt" 2>&1 <<'PY'
import inspect, torch, triton
print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)
print("gpu", torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))
from torch.nn.attention import flex_attention as fa
print("flex BACKEND option:", "BACKEND" in inspect.getsource(fa))
try:
    import flash_attn.cute as c
    print("flash_attn.cute", getattr(c, "__version__", "?"), "varlen", hasattr(c, "flash_attn_varlen_func"))
except Exception as e:
    print("flash_attn.cute: not importable:", type(e).__name__, e)
try:
    import flashinfer
    print("flashinfer", flashinfer.__version__)
except Exception as e:
    print("flashinfer: not importable:", type(e).__name__, e)
PY
  cat "$OUT/flex_facts.txt"
}

step_table() {
  local dims=${DIMS:-64,128} seqs=${SEQS:-4096,8192,16384} passes=${PASSES:-fwd,fwd+bwd}
  local backends=${BACKENDS:-flex,fa4,sdpa-cudnn,sdpa-flash,triton,eager}
  ( time timeout -s INT "$(lim 540)" $P bench -b "$backends" --batch 1 --heads 16 -s "$seqs" -d "$dims" --dtype bf16 \
      --causal false,true --window none,1024 --docs none,4 --pass "$passes" --warmup 2 --iters 10 --baseline eager \
      --reports $R -f json -o "$OUT/flex_rows.json" > /tmp/flex_table.log 2>&1 ) 2>&1 | tail -3
  tail -25 /tmp/flex_table.log
  cp /tmp/flex_table.log "$OUT/flex_table.log"
  # cut short (SIGINT at the step's limit), the run keeps its finished rows: take them from the run directory
  local run; run=$(ls -td $R/*/ 2>/dev/null | head -1)
  [ -s "$OUT/flex_rows.json" ] || { [ -n "$run" ] && cp "$run/bench.json" "$OUT/flex_rows.json"; }
  [ -n "$run" ] && cp "$run/manifest.json" "$OUT/flex_manifest.json"
  python3 benchmarks/flex_table.py "$OUT/flex_rows.json" > "$OUT/flex_table.md" && head -40 "$OUT/flex_table.md"
}

step_explain() {
  local D=$OUT/flex_explain; mkdir -p "$D"
  ( time timeout -s INT "$(lim 300)" $P ncu --recipe explain -b flex,sdpa-cudnn -s 4096 --heads 32 -d 128 --causal \
      --clock-control none --reports $R -f markdown > "$D/ncu.md" 2>&1 ) 2>&1 | tail -3
  tail -5 "$D/ncu.md"
  local run; run=$(ls -td $R/*/ | head -1)
  # flex's kernel: Inductor names its template kernel triton_tem_fused_*; the list says what ncu saw
  $P report "$run" -f csv 2>/dev/null | head -20 > "$D/kernels.csv"
  local k=${FLEX_KERNEL:-triton_tem_fused}
  $P explain latest --reports $R --kernel "$k" --vs cudnn -f markdown -o "$D/explain_flex_vs_cudnn.md" 2>&1 | tail -2
  $P explain latest --reports $R --kernel "$k" --vs cudnn -f json -o "$D/explain_flex_vs_cudnn.json" > /dev/null 2>&1
  $P report latest --reports $R --view source --kernel "$k" -f markdown -o "$D/source_flex.md" 2>&1 | tail -1
  head -30 "$D/explain_flex_vs_cudnn.md"
  find "$run" -name "*.ncu-rep*" -exec cp {} "$D/" \;
  local ind; ind=$(find "$run" -maxdepth 3 -type d -name inductor | head -1)
  echo "generated code: ${ind:-none}" | tee -a "$D/index.txt"
  [ -n "$ind" ] && tar czf "$D/inductor.tgz" -C "$(dirname "$ind")" inductor
  [ -n "$ind" ] && grep -rln "causal_mask\|mask_mod\|score_mod" "$ind" | head -5 >> "$D/index.txt"
  tar czf "$OUT/flex_explain.tgz" -C "$OUT" flex_explain && rm -rf "$D"
}

for s in "$@"; do
  at "$s"
  "step_$s"
done
at done
