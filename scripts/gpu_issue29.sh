#!/usr/bin/env bash
# Issue 29 on one GPU, in one device call (under 9.5 minutes): 2 PPO steps of `cuda-agent rl train` with
# the transformers rollout (rl.hf_rollout) generating on the GPU, the project's agent loop, and the
# evaluation pool on the same GPU (Ray resource eval_gpu: 1, leased as GPU 0) scoring real CUDA kernels.
# The policy is the tiny model of cuda_agent.rl.tiny taught a fixed answer that writes a correct
# relu(x) * 2 kernel (scripts/gpu_issue29.py says how); two of the four tasks are relu(x) * 3, so the
# rewards the trainer uses differ task by task (a milestone vs -1).
#
#   On this machine first:  bash scripts/device-wheels.sh --rl .carry-rl     (about 56 MiB)
#   Device call (carry [".carry-rl"]):  bash scripts/gpu_issue29.sh
#   Dry run without a GPU:  bash scripts/gpu_issue29.sh --cpu    (the CPU backend; uses the verl installed here)
#
# Prints a progress line per stage, the environment, then the summary table: seconds per step, the rollout
# phase (generation and evaluations overlap in it) with summed per-trajectory generation and evaluation
# seconds, and the update phases. Writes to $OUT (default ./out), at most 3 files:
#   issue29.tar          everything, appended stage by stage (progress, env, prepare and train logs, the
#                        configs, rollout dumps, kept candidates' result.json, each episode.json), so a cut-off run keeps its start
#   issue29-summary.txt  the table
#   issue29.json         the same as JSON
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=cuda
[ "${1:-}" = "--cpu" ] && MODE=cpu
OUT=${OUT:-./out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
W=$(mktemp -d /tmp/issue29.XXXXXX)
TAR="$OUT/issue29.tar"
rm -f "$TAR"
LIMIT=${ISSUE29_LIMIT_S:-560}  # the whole call; each stage gets what is left
log() { echo "[issue29 $(date +%T) +${SECONDS}s] $*" | tee -a "$W/progress.txt"; }
pack() { (cd "$W" && tar -rf "$TAR" "$@" 2>/dev/null) || true; }
left() { local l=$((LIMIT - SECONDS)); [ "$l" -lt 10 ] && l=10; echo "$l"; }

# RAY_DEDUP_LOGS=0: Ray folds similar lines of different workers into one, and the summary reads every rollout line
export PYTHONUNBUFFERED=1 RAY_ADDRESS=local RAY_memory_monitor_refresh_ms=0 RAY_DEDUP_LOGS=0 CUDA_AGENT_CACHE="$W/cache"
export PYTHONPATH="$PWD/src"
log "mode $MODE, work $W"

# 1. the carried wheels (Ray without jars, verl, ...): installed beside the image's packages, in front of them
if [ "$MODE" = cuda ]; then
  if ls .carry-rl/*.whl > /dev/null 2>&1; then
    timeout 120 python3 -m pip install -q --no-index --no-deps --target /tmp/site .carry-rl/*.whl > "$W/install.txt" 2>&1
    log "wheels installed into /tmp/site: exit $? ($(ls .carry-rl/*.whl | wc -l) wheels)"
    export PYTHONPATH="/tmp/site:$PYTHONPATH" PATH="/tmp/site/bin:$PATH"
  else
    log "no .carry-rl/ here: carry it (scripts/device-wheels.sh --rl .carry-rl); trying the installed packages"
  fi
  CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
  # the evaluation GPU is the training GPU; the compile farm builds for its architecture (same cache keys)
  export CUDA_AGENT_EVAL_GPUS=0 TORCH_CUDA_ARCH_LIST="${CAP:-9.0}"
fi

# 2. what is here: versions, and the imports verl's trainer needs (a failing one is named here, not in a traceback later)
timeout 90 python3 - > "$W/env.txt" 2>&1 <<'EOF'
import importlib, importlib.metadata as md, platform
print("python", platform.python_version())
for name in ("torch", "transformers", "tokenizers", "ray", "verl", "tensordict", "hydra-core", "datasets", "pyarrow",
             "accelerate", "peft", "TransferQueue", "fastapi", "pydantic"):
    try:
        print(f"{name} {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name} MISSING")
import torch
print("cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-")
for mod in ("ray", "verl.trainer.main_ppo", "verl.experimental.agent_loop", "transfer_queue", "cuda_agent.rl.verl_plugins",
            "cuda_agent.rl.hf_rollout", "cuda_agent.rl.verl_loop"):
    try:
        importlib.import_module(mod)
        print("import ok", mod)
    except Exception as e:  # noqa: BLE001 - reported, the run goes on to show what else works
        print("import FAILED", mod, type(e).__name__, str(e).splitlines()[0] if str(e) else "")
EOF
log "environment: exit $?"; cat "$W/env.txt"; pack progress.txt env.txt

# 3. tasks, dataset, the taught policy, the config
timeout "$(left)" python3 scripts/gpu_issue29.py prepare --work "$W" --device "$MODE" > "$W/prepare.log" 2>&1
rc=$?
log "prepare: exit $rc"; tail -3 "$W/prepare.log"; pack progress.txt prepare.log ppo.yaml ppo.agent_loops.yaml

# 4. two PPO steps (Ray started by verl; the eval pool's Ray tasks on the same node)
if [ "$rc" = 0 ]; then
  (cd "$W" && timeout -k 15 "$(left)" python3 -m cuda_agent.cli.main rl train --stage ppo --config "$W/ppo.yaml" \
     > "$W/train.log" 2>&1)
  log "rl train: exit $?"
  grep -E "hf rollout 0: |step:[0-9]+ " "$W/train.log" | cut -c1-300 | tail -6
  python3 -m ray.scripts.scripts stop --force > /dev/null 2>&1 || true  # a cut-off run leaves Ray's processes
fi
pack progress.txt train.log rollouts $(cd "$W" && ls -d work/*/best/result.json work/*/episode.json 2>/dev/null)

# 5. the summary
timeout 60 python3 scripts/gpu_issue29.py summary --work "$W" --json "$OUT/issue29.json" | tee "$OUT/issue29-summary.txt"
log "done"; pack progress.txt
ls -la "$OUT"
