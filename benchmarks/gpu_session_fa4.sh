#!/usr/bin/env bash
# The second call on the same warm machine (carry [".gpu-fa4"]): Triton against SDPA flash, cuDNN and FA4
# through profctl bench; ncu on the Triton kernel; the model tables (MFU, GPT presets, decode against context,
# memory with a 24 GB cap). Output under $OUT.
set -u
source /tmp/gpu-site/on-gpu.sh >/dev/null 2>&1
export PROFCTL_NSYS=$NSYS PROFCTL_NCU=$NCU
P="python3 -m profctl"
echo "== triton vs flash vs cudnn vs fa4"
$P bench -b triton,sdpa-flash,sdpa-cudnn,fa4 --heads 32 -s 4096 --head-dim 128,64 --causal false,true --pass fwd \
  --warmup 5 --iters 30 --baseline none --reports runs -q -f json -o "$OUT/attn_fwd.json" 2>&1 | tail -2
$P bench -b triton,sdpa-flash,sdpa-cudnn --heads 32 -s 4096 --head-dim 128,64 --causal false,true --pass bwd \
  --warmup 5 --iters 30 --baseline none --reports runs -q -f json -o "$OUT/attn_bwd.json" 2>&1 | tail -2
$P report "$OUT/attn_fwd.json" "$OUT/attn_bwd.json" --pivot tflops -f markdown
echo "== ncu on the Triton kernel"
$P ncu -b triton -s 4096 --heads 32 --recipe tensor-core --clock-control none --reports runs -f markdown \
  > "$OUT/ncu_triton.md" 2>&1; grep -A12 "## Diagnosis" "$OUT/ncu_triton.md" | head -16
echo "== models"
M="$P bench --reports runs -q --baseline eager"
$M --model llama-7b --layers 4 --mode train --batch 1,2 -s 4096 -b sdpa-cudnn,sdpa-flash,triton,eager \
  --iters 8 --warmup 2 -f json -o "$OUT/llama_train.json" 2>&1 | tail -1
$M --model gpt-sm,gpt-md,gpt-lg --mode train,prefill --batch 8 -s 1024 -b sdpa-flash,sdpa-cudnn,eager \
  --iters 5 --warmup 2 -f json -o "$OUT/gpt.json" 2>&1 | tail -1
$M --model llama-7b --layers 4 --mode decode --batch 1 -s 512,4096,32768 -b sdpa-cudnn,sdpa-flash,triton,fa4,eager \
  --iters 10 --warmup 3 -f json -o "$OUT/decode.json" 2>&1 | tail -1
$M --model llama-7b --layers 4 --mode train --batch 1 -s 4096,16384 -b sdpa-flash,eager --memory-limit 24 \
  --iters 3 --warmup 1 -f json -o "$OUT/mem24.json" 2>&1 | tail -1
for f in llama_train gpt decode mem24; do $P report "$OUT/$f.json" -f markdown > "$OUT/$f.md" 2>&1; done
head -40 "$OUT/llama_train.md"
echo "fa4 session done"
