#!/usr/bin/env bash
# Your own program under each profiler (examples/my_program.py), as the GPU sessions record it; sourced by
# benchmarks/gpu_session*.sh, which set P (the profctl command). Output on stdout.
programs() {
  $P nsys --reports runs -f markdown --limit 8 -- python3 examples/my_program.py --steps 3 --seqlen 2048
  $P nsys --reports runs -f markdown --range myapp@attention -- python3 examples/my_program.py --steps 3 --seqlen 2048
  $P ncu --reports runs --clock-control none --range myapp@attention -f markdown -- \
    python3 examples/my_program.py --steps 2 --seqlen 2048
  $P ncu --reports runs --clock-control none --kernel _scale_add --launch-count 1 -f markdown -- \
    python3 examples/my_program.py --steps 2
  $P torch --reports runs -f markdown --limit 10 --range mlp -- python3 examples/my_program.py --steps 3 --seqlen 2048
}
