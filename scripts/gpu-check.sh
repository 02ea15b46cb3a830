#!/usr/bin/env bash
# Run on a CUDA machine from the repository root: builds, checks and times the
# bundled examples and the faulty fixtures, runs the gpu-marked tests, prints a
# table last. Results go to $OUT (or ./out).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name())'
exec python3 scripts/gpu_check.py "$@"
