#!/usr/bin/env bash
# Download, on a machine with registry access, the wheels the GPU machine lacks (it has no registry)
# into the ignored .whl/ folder, which a device call then carries (carry: [".whl"]):
#   - openai and what it needs, for `pytest -m gpu` (the agent's GPU episode test);
#   - TRL's GRPO stack, for scripts/rl_gpu_smoke.py (docs/training.md, stage 3).
# With --rl DIR instead: verl 0.9.1, Ray (repacked without its Java jars) and what they need that the GPU
# image lacks, for scripts/gpu_issue29.sh, into DIR (carry it; under 60 MiB, checked): scripts/rl_carry.py.
# Wheels for CPython 3.12 on x86_64 Linux, the GPU machine's Python. `python3 -m benchmarks` (benchmarks/runner.py)
# and rl_gpu_smoke.py unpack them where packages already installed there win.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--rl" ]; then
  exec python3 scripts/rl_carry.py "${2:?usage: scripts/device-wheels.sh --rl DIR}"
fi
get() {
  python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    -d .whl "$@"
}
get "openai==3.57.0"  # the version the tests ran with on the CPU machine
get --no-deps trl==1.16.0 accelerate==1.16.0 datasets==4.8.4 dill==0.4.1 multiprocess==0.70.19 \
  xxhash==3.6.0 fsspec==2026.2.0 psutil==7.2.2
ls .whl | sed 's/^/  /'
du -sh .whl
