#!/usr/bin/env bash
# The GPU run (at most about 5 minutes on one GPU), from the repository root:
#
#   bash bench/gpu.sh                  # --device cuda: 65,536 problems, depth 1,000, 512x128, execution bench
#   bash bench/gpu.sh --device cpu     # the same pipeline at tiny sizes: the CI smoke test
#   bash bench/gpu.sh --out DIR        # where the JSON and plots go (default bench/results/gpu)
#
# 1. bench/bench_gpu.py: roundoff of the four GD constructions (torch on the device and cupy; float16,
#    bfloat16, float32, float64) against exact GD, and a large float run (512x128 on a GPU);
# 2. bench/bench_construction.py: the float forward against plain torch on the same device.
# bench/performance.py folds DIR/gpu.json and DIR/execution.json into docs/performance.md.
set -euo pipefail
device=cuda
out=bench/results/gpu
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device="${2:?--device needs cpu or cuda}"; shift 2 ;;
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    *) echo "error: unknown argument $1 (use --device cpu|cuda[:i], --out DIR)" >&2; exit 2 ;;
  esac
done
case "$device" in
  cpu|cuda|cuda:[0-9]*) ;;
  *) echo "error: --device must be cpu or cuda[:i], got $device" >&2; exit 2 ;;
esac
py="${PYTHON:-python}"
export PYTHONUNBUFFERED=1
if [ "$device" = cpu ]; then
  roundoff=(--batch 64 --layers 40 --n 8 --d 3 --big 16x4 --big-batch 8 --big-steps 3 --big-ref 4 --workers 2)
  execution=(--quick)
else
  roundoff=(--batch 65536 --layers 1000 --big 512x128 --big-batch 256 --big-steps 10 --big-ref 16 --deadline 250)
  execution=(--batches 4096,65536 --dtypes float32,float64 --repeats 5 --gemm-n 8192)
fi
"$py" bench/bench_gpu.py --device "$device" --out "$out" "${roundoff[@]}"
"$py" bench/bench_construction.py --device "$device" --json "$out/execution.json" "${execution[@]}"
echo "bench/gpu.sh: results in $out"
