#!/usr/bin/env bash
# Issue 34 on a GPU, in about 3 minutes: the bundled bf16 op (examples/silu_mul_bf16: silu(a) * b on two
# 4096 x 14336 bf16 inputs) as an undeclared task (no PRECISION line) and with PRECISION = "bf16" declared,
# each with its honest bf16 kernel, 2 evaluations each; then the int64-indexed gather-sum
# (examples/embedding_bag_sum, a 1M x 128 table) once. The undeclared task must score like the declared
# one (reward 2 expected: the kernel ties torch.compile at the memory floor). Prints a table last; JSON
# to $OUT/issue34.json (default ./out), each evaluation's stderr to $OUT/issue34-logs/.
# Run from the repository root: bash scripts/gpu_issue34.sh   (sets PYTHONPATH=src itself)
# Without a GPU every evaluation ends no_gpu after the compile, and the script still prints its table.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT=${OUT:-./out}
mkdir -p "$OUT/issue34-logs"
W=$(mktemp -d /tmp/issue34.XXXXXX)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'

# the two variants of the bf16 task, made here whether or not the bundled one declares PRECISION
mkdir -p "$W/tasks/silu_mul_bf16" "$W/tasks/silu_mul_bf16_declared"
grep -v '^PRECISION *=' examples/silu_mul_bf16/task.py > "$W/tasks/silu_mul_bf16/task.py"
{ cat "$W/tasks/silu_mul_bf16/task.py"; printf '\nPRECISION = "bf16"\n'; } > "$W/tasks/silu_mul_bf16_declared/task.py"

init() {  # NAME TASK SOLUTION: a workspace built from the example's solution; keeps init's precision line
  python3 -m cuda_agent init "$2" -o "$W/$1" --solution "$3" --force | tee "$W/$1.init" || echo "init of $1 failed"
}
init undeclared "$W/tasks/silu_mul_bf16/task.py" examples/silu_mul_bf16/solution
init declared "$W/tasks/silu_mul_bf16_declared/task.py" examples/silu_mul_bf16/solution
init bag examples/embedding_bag_sum/task.py examples/embedding_bag_sum/solution

# both kernels compile at once (the build cache is by content: the declared workspace reuses the objects)
for ws in undeclared bag; do
  timeout 300 python3 -m cuda_agent eval "$W/$ws" --phase compile --json > "$W/$ws.compile.json" 2>&1 &
done
wait

ev() {  # WORKSPACE RUN: one full evaluation, afresh (the baselines stay cached after the first)
  local t0=$SECONDS
  timeout 180 python3 -m cuda_agent eval "$W/$1" --json --fresh > "$W/$1.$2.json" 2> "$OUT/issue34-logs/$1.$2.err"
  echo "$1 run $2: exit $?, $((SECONDS - t0)) s"
  echo "$((SECONDS - t0))" > "$W/$1.$2.wall"
}
ev undeclared 1; ev declared 1; ev undeclared 2; ev declared 2; ev bag 1

python3 - "$W" "$OUT" <<'EOF'
import json, pathlib, sys
w, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
rows = []
for ws, run in [("undeclared", 1), ("declared", 1), ("undeclared", 2), ("declared", 2), ("bag", 1)]:
    meta = json.loads((w / ws / ".cuda-agent" / "task.json").read_text()) if (w / ws / ".cuda-agent" / "task.json").exists() else {}
    task = (w / ws / "model.py").read_text() if (w / ws / "model.py").exists() else ""
    text = (w / f"{ws}.{run}.json").read_text() if (w / f"{ws}.{run}.json").exists() else ""
    lines = [ln for ln in text.splitlines() if ln.startswith("{")]
    r = json.loads(lines[-1]) if lines else {"status": "no result", "message": f"no JSON (stderr: issue34-logs/{ws}.{run}.err) {text[-300:]}"}
    init = [ln for ln in (w / f"{ws}.init").read_text().splitlines() if ln.startswith("precision ")] if (w / f"{ws}.init").exists() else []
    rows.append({"task": {"bag": "embedding_bag_sum"}.get(ws, f"silu_mul_bf16 ({ws})"), "run": run,
                 "declared": any(ln.startswith("PRECISION") for ln in task.splitlines()),
                 "precision": r.get("precision") or meta.get("precision"), "precision_source": meta.get("precision_source"),
                 "init_line": init[0] if init else None, "wall_s": float((w / f"{ws}.{run}.wall").read_text()),
                 "lowered_precision_findings": [f for f in r.get("findings") or [] if f.get("rule") == "lowered-precision"],
                 **{k: r.get(k) for k in ("status", "reward", "correct", "message", "time_ms", "eager_ms", "compile_ms",
                                          "speedup_vs_eager", "speedup_vs_compile", "gpu", "torch", "task_hash", "phases_s")}})
silu = [r for r in rows if r["task"].startswith("silu")]
# the issue's failure was a rejection (status, lowered-precision findings); a reward that ties compile may
# flap between 2 and 3 from run to run in either variant, so rewards are compared but not required equal
same = len({r["status"] for r in silu}) == 1 and not any(r["lowered_precision_findings"] for r in silu)
rewards = {d: sorted(r["reward"] for r in silu if r["declared"] == d and r["reward"] is not None) for d in (False, True)}
gpu = any(r["status"] not in ("no_gpu", "no result") for r in rows)
verdict = {"undeclared_scores_like_declared": same, "rewards_undeclared": rewards[False],
           "rewards_declared": rewards[True], "same_rewards": rewards[False] == rewards[True], "gpu": gpu}
(out / "issue34.json").write_text(json.dumps({"verdict": verdict, "results": rows}, indent=1))
for r in rows:
    if r["status"] not in ("ok", "no_gpu") or r["lowered_precision_findings"]:
        print(f"-- {r['task']} run {r['run']}: {r['status']}: {(r['message'] or '')[:400]}")
        for f in r["lowered_precision_findings"][:3]:
            print("   lowered-precision:", f.get("message", "")[:300])
f = lambda v, p=3: "-" if v is None else f"{v:.{p}f}" if isinstance(v, float) else str(v)
head = ("task", "run", "declared", "precision (source)", "status", "reward", "time_ms", "eager_ms", "compile_ms", "x eager", "x compile", "wall_s")
table = [head] + [(r["task"], r["run"], "yes" if r["declared"] else "no", f"{r['precision']} ({r['precision_source']})", r["status"],
                   f(r["reward"]), f(r["time_ms"]), f(r["eager_ms"]), f(r["compile_ms"]), f(r["speedup_vs_eager"], 2),
                   f(r["speedup_vs_compile"], 2), f(r["wall_s"], 0)) for r in rows]
width = [max(len(str(c[i])) for c in table) for i in range(len(head))]
for c in table:
    print("  ".join(str(v).ljust(n) for v, n in zip(c, width)))
print(f"undeclared bf16 scores like declared (same status, no lowered-precision finding): {'yes' if same else 'NO'}; "
      f"rewards undeclared {rewards[False]}, declared {rewards[True]}{'' if gpu else ' (no GPU: compile only)'}; "
      f"JSON: {out / 'issue34.json'}")
sys.exit(0 if same or not gpu else 1)
EOF
