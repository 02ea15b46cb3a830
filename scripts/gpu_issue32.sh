#!/usr/bin/env bash
# Issue 32 on a GPU (H200), in about 5-10 minutes: each example also evaluated with --baselines all; the expert profile (ncu counters, compiler report,
# roofline verdicts) on a memory-bound example (gelu_chain) and a GEMM (linear_bias_relu), three
# profiles each after one evaluation (the first measures the GPU's ceilings), the seconds each adds,
# and ncu's raw CSV saved under $OUT/issue32/ (default ./out; the H100 run's are tests/fixtures/ncu/h100_*.csv).
# Run from the repository root: bash scripts/gpu_issue32.sh   (sets PYTHONPATH=src itself)
# Without a GPU it still runs: counters "not available: no CUDA GPU", the compiler's report, a table.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
timeout 1500 python3 scripts/gpu_issue32.py "$@"
echo "gpu_issue32: exit $?"
