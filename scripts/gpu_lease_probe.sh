#!/usr/bin/env bash
# The leased RL evaluation path on one GPU in under two minutes (scripts/gpu_lease_probe.py says what it
# checks): the carried wheels (.carry-rl, for Ray) installed as gpu_issue29.sh installs them, then the probe.
#   Device call (carry [".carry-rl"]):  bash scripts/gpu_lease_probe.sh     (or: python3 -m benchmarks lease-probe)
set -uo pipefail
cd "$(dirname "$0")/.."
if ls .carry-rl/*.whl > /dev/null 2>&1; then
  timeout 120 python3 -m pip install -q --no-index --no-deps --target /tmp/site .carry-rl/*.whl > /dev/null 2>&1
  echo "wheels installed into /tmp/site: exit $?"
  export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
else
  echo "no .carry-rl/ here: trying the installed Ray"
fi
CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
export PYTHONPATH="$PWD/src:${PYTHONPATH:-}" CUDA_AGENT_EVAL_GPUS=${CUDA_AGENT_EVAL_GPUS:-0} TORCH_CUDA_ARCH_LIST="${CAP:-9.0}"
export RAY_DEDUP_LOGS=0 CUDA_AGENT_CACHE=$(mktemp -d /tmp/lease-probe.XXXXXX)
python3 scripts/gpu_lease_probe.py
