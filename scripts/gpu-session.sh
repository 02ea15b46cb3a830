#!/usr/bin/env bash
# The open issues' GPU figures in parts that each fit one 10-minute device call
# (the device tool's limit), run from the repository root on the GPU machine:
#   A: faults (classic + hostile), red-team controls and hacks       (issue 3)  ~7 min
#   B: examples (+ single-file), pytest -m gpu, defence overhead x3  (issues 2, 3) ~6 min
#   C: bench of the examples + report, pool throughput               (issue 5)  ~8 min
#   D: edit -> result turnaround and the two-process spread          (issue 2)  ~6 min
#   F: the timing hold's GPU tests, then E's turnaround on all five examples, the one missed
#      by E's time limit first                                      (issue 2) ~9 min
#   E: D without the naive chain and with 5 s idle before each edit (the agent's turn, when
#      the spare children warm up), then defence overhead x3 and pytest -m gpu ~8 min
#   G: red-team controls and hacks (hijacks too) and the examples, no faults (issue 12) ~7 min
#   H: faults, the defences' cost with and without the trusted clock, pytest -m gpu (issues 12, 13) ~8 min
#   I: six evaluations at once against one alone; single-file build times vs load_inline (issue 13) ~9 min
#   J: the synthesis filter on 200 candidates (issue 14) ~10 min; J2: the RL smoke (issue 15) ~4 min
#   S: the single-file split build on the GPU: diag_matmul's example and single-file rows, then the
#      edit benchmark (issue 13 part 3)                                               ~8 min
#   K: issue 16's throughput: the mix's baselines (4 tasks per GPU), then serial vs the pool at 3
#      evaluations per GPU (carry .kb, made here by benchmarks/kb_mix_carry.py; K2 alone may do:
#      K1 only precomputes)                                                 ~10 min each
#   L: the defences' cost with the Time request's split (inputs, calls, guard, save) and the phases
#      with and without them, then K2 with a 400 s deadline (carry .kb and .bench-cache/eval.sqlite
#      from an earlier K2's $OUT so the baselines are cached)                    ~9.5 min
#   M: what fresh timing inputs cost per timed call (benchmarks/fresh_inputs_cost.py), seed_all's GPU
#      test, then the red team (no examples) and the defences' cost over 5 evaluations    ~8 min
#   N: the timing GPU tests, the red team (no examples), the defences' cost x3            ~5 min
#   K3: K2 with a 380 s deadline (right after N, while the machine is warm)              ~7 min
#   P: a clean serial-vs-pool comparison in one call: the mix's baselines alone first (170 s; 27 tasks
#      took 121.5 s on a fresh H200), then the measurement with every baseline cached (400 s); the
#      benchmark says "NOT COMPARABLE" if any evaluation still missed the cache       ~9.8 min
#   Q: where an evaluation's seconds go with and without the defences (benchmarks/defence_trace.py),
#      then the defences' cost over 5 evaluations in gpu_check (no red team)                ~5 min
#   O: the defences' cost with spare children only, over 8 evaluations per side        ~3 min
#   V: the round criterion A/B: the trace with the defences on and off, each with rounds bounded by
#      the CV and by the p10-p90 spread (and the parent's own time, profiled), then the defences'
#      cost (spares, N=8) under p10p90                                                      ~6 min
#   R: the timing GPU tests and the red team (no examples, no overhead)                   ~5 min
#   W: issue 13's spread (diag_matmul alone, then 6 at once; target <= 2 %), then R       ~7 min
#   X1: the evaluator's clock v5 (issue 28): the graph-burst probe, the forgery red team (quick), the
#       examples (gpu_check, no faults, no red team)                                    ~9 min
#   X2: the forgery red team in full (8 factors x native/switch x 3 runs, honest x3, 3 sharing) ~9.5 min
#   X3: the leak per kernel size, the red team (gpu_check, no examples), the defences' cost (O) ~9.5 min
#   X4: the clock's bias against the events, A/B over its opt-ins (EvalConfig.clock_flush, clock_fresh_baselines,
#       clock_digest="rank1"; none, each alone, all three): honest x3 and forgers at 0.95/0.9 on relu_scale ~8 min
#   X5: linear_relu the same way under none and all three, then the leak per kernel size under all three ~9 min
#   X7: issue 28's honest controls: each example 3 times alone, then 3 at once sharing the GPU   ~8 min
#   X8: the cold-digest A/B (EvalConfig.clock_cold_digest, alone and with the flush): diag_matmul,
#       matmul_sum_scale and embedding_bag_sum twice each, then relu_scale honest x3 + forgers 0.9  ~9 min
# pytest -m gpu needs the openai wheels and J's RL smoke TRL's: make .whl with scripts/device-wheels.sh
# (registry access needed) and carry it.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1 \
    && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
quiet() { grep -v "^W[0-9]\{4\} \|warnings.warn\|No CUDA runtime"; }
case "${1:-}" in
  A) timeout 570 bash scripts/gpu-check.sh --skip-examples --skip-pytest --jobs 8 2>&1 | quiet | tail -90 ;;
  B) timeout 570 bash scripts/gpu-check.sh --skip-faults --skip-redteam --overhead 3 2>&1 | quiet | tail -40 ;;
  C) timeout 280 python3 -m cuda_agent bench examples --solutions examples -o "$OUT/runs/ex" 2>&1 | tail -3
     python3 -m cuda_agent report "$OUT/runs/ex" 2>&1 | tail -14
     timeout 280 python3 benchmarks/pool_throughput.py --variants 2 --only diag_matmul gelu_chain row_softmax_wide 2>&1 | quiet | tail -12 ;;
  D) timeout 570 python3 benchmarks/eval_turnaround.py --naive 1 --edits 3 2>&1 | quiet | tail -40 ;;
  E) timeout 330 python3 benchmarks/eval_turnaround.py --naive 0 --edits 3 --think 5 2>&1 | quiet | tail -12
     timeout 200 bash scripts/gpu-check.sh --skip-faults --skip-redteam --skip-examples --overhead 3 2>&1 | quiet | tail -14 ;;
  F) timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_timing_hold.py 2>&1 | tail -4
     timeout 520 python3 benchmarks/eval_turnaround.py --naive 0 --edits 3 --think 5 \
       --only row_softmax_wide diag_matmul matmul_sum_scale gelu_chain linear_bias_relu 2>&1 | quiet | tail -16 ;;
  G) timeout 560 bash scripts/gpu-check.sh --skip-faults --skip-pytest --jobs 8 2>&1 | quiet | tail -100 ;;
  H) timeout 560 bash scripts/gpu-check.sh --skip-redteam --skip-examples --overhead 3 --jobs 8 2>&1 | quiet | tail -40 ;;
  I) timeout 300 python3 benchmarks/concurrent_timing.py --n 6 2>&1 | quiet | tail -12
     timeout 260 python3 benchmarks/inline_compile.py --edits 3 2>&1 | quiet | tail -12 ;;
  # J: the whole call goes to the filter when .synth-h200/candidates.jsonl is carried (200 candidates
  # composed on the GPU machine's torch by an earlier J; the RL smoke is then J2)
  J) if [ -f .synth-h200/candidates.jsonl ]; then
       timeout 585 python3 benchmarks/synth_gpu.py -n 200 --candidates .synth-h200/candidates.jsonl --deadline-s 545 --jobs-per-gpu 10 \
         --work /tmp/synth 2>&1 | quiet | tail -25
     else
       timeout 585 python3 benchmarks/synth_gpu.py -n 200 --deadline-s 500 --work /tmp/synth 2>&1 | quiet | tail -25
     fi
     (cd /tmp/synth && tar czf "$OUT/synth.tgz" candidates.jsonl tasks.* 2>/dev/null) ;;
  J2) timeout 230 python3 scripts/rl_gpu_smoke.py --out "$OUT/rl-smoke" 2>&1 | quiet | tail -20 ;;
  S) timeout 200 bash scripts/gpu-check.sh --skip-faults --skip-redteam --skip-pytest --only diag_matmul 2>&1 | quiet | tail -8
     timeout 370 python3 benchmarks/inline_compile.py --edits 3 2>&1 | quiet | tail -13 ;;
  K1) timeout 590 python3 benchmarks/eval_throughput.py --kernelbench .kb --only-baselines --deadline-s 560 2>&1 | quiet | tee "$OUT/k1.log" | tail -30 ;;
  K2) timeout 590 python3 benchmarks/eval_throughput.py --kernelbench .kb --precompute-baselines --export-cache --deadline-s 560 2>&1 | quiet | tee "$OUT/k2.log" | tail -40 ;;
  L) timeout 150 bash scripts/gpu-check.sh --skip-faults --skip-redteam --skip-examples --skip-pytest --overhead 3 2>&1 | quiet \
       | grep -E "^overhead|defences|trusted clock|held alone|^phases" | cut -c1-400 | tail -24
     timeout 420 python3 benchmarks/eval_throughput.py --kernelbench .kb --precompute-baselines --export-cache --deadline-s 400 2>&1 \
       | quiet | tee "$OUT/k.log" | tail -34 ;;
  M) timeout 60 python3 benchmarks/fresh_inputs_cost.py 2>&1 | quiet | tee "$OUT/fresh.txt" | tail -6
     timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_seed_all.py 2>&1 | tail -2
     timeout 480 bash scripts/gpu-check.sh --skip-faults --skip-pytest --skip-examples --jobs 12 --overhead 5 2>&1 | quiet \
       | tee "$OUT/m.log" | grep -vE "^overhead (on|off|no_clock)" | cut -c1-200 | tail -60 ;;
  N) timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_seed_all.py tests/test_timing_hold.py 2>&1 | tail -2
     timeout 420 bash scripts/gpu-check.sh --skip-faults --skip-pytest --skip-examples --jobs 12 --overhead 3 2>&1 | quiet \
       | tee "$OUT/n.log" | grep -vE "^overhead (on|off|no_clock)" | cut -c1-200 | tail -45 ;;
  Q) timeout 200 python3 benchmarks/defence_trace.py --n 4 --gap 3 --timeline 2>&1 | quiet | tee "$OUT/trace.txt" | tail -48
     timeout 330 bash scripts/gpu-check.sh --skip-faults --skip-redteam --skip-pytest --skip-examples --overhead 5 2>&1 | quiet \
       | tee "$OUT/q.log" | grep -vE "^overhead (on|off|no_clock)" | cut -c1-220 | tail -12 ;;
  O) timeout 300 bash scripts/gpu-check.sh --skip-faults --skip-redteam --skip-pytest --skip-examples --overhead 8 \
       --overhead-spares-only 2>&1 | quiet | tee "$OUT/o.log" | grep -vE "^overhead (on|off)" | cut -c1-220 | tail -10 ;;
  V) timeout 200 python3 benchmarks/defence_trace.py --n 5 --gap 3 --modes on,off,on-p10p90,off-p10p90 --profile 2>&1 \
       | quiet | tee "$OUT/trace.txt" | cut -c1-200 | tail -60
     timeout 240 bash scripts/gpu-check.sh --skip-faults --skip-redteam --skip-pytest --skip-examples --overhead 8 \
       --overhead-spares-only --overhead-spread p10p90 2>&1 | quiet | tee "$OUT/v.log" | grep -vE "^overhead (on|off)" \
       | cut -c1-220 | tail -10 ;;
  W) timeout 150 python3 benchmarks/concurrent_timing.py --n 6 2>&1 | quiet | tee "$OUT/w.log" | tail -12
     ;&
  R) timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_seed_all.py tests/test_timing_hold.py 2>&1 | tail -2
     timeout 500 bash scripts/gpu-check.sh --skip-faults --skip-pytest --skip-examples --jobs 12 2>&1 | quiet \
       | tee "$OUT/r.log" | cut -c1-200 | tail -30 ;;
  K3) timeout 420 python3 benchmarks/eval_throughput.py --kernelbench .kb --precompute-baselines --export-cache --deadline-s 380 2>&1 \
       | quiet | tee "$OUT/k.log" | tail -34 ;;
  P) timeout 180 python3 benchmarks/eval_throughput.py --kernelbench .kb --only-baselines --deadline-s 170 2>&1 | quiet \
       | tee "$OUT/p1.log" | tail -4
     timeout 405 python3 benchmarks/eval_throughput.py --kernelbench .kb --export-cache --deadline-s 395 2>&1 \
       | quiet | tee "$OUT/k.log" | tail -34 ;;
  X1) timeout 150 python3 benchmarks/clock_probe.py --out "$OUT/probe.json" 2>&1 | quiet | grep -v '^{' | tail -12
      timeout 200 python3 benchmarks/forgery_redteam.py --quick --shared 0 --out "$OUT/forgery_quick.json" 2>&1 | quiet | grep -v '^{' | tail -16
      timeout 190 bash scripts/gpu-check.sh --skip-faults --skip-redteam --skip-pytest 2>&1 | quiet | tail -16 ;;
  X2) timeout 570 python3 benchmarks/forgery_redteam.py --runs 3 --out "$OUT/forgery.json" 2>&1 | quiet | grep -v '^{' | tail -45 ;;
  X3) timeout 240 python3 benchmarks/clock_leak.py --out "$OUT/leak.json" 2>&1 | quiet | grep -v '^{' | tail -8
      timeout 220 bash scripts/gpu-check.sh --skip-examples --skip-faults --skip-pytest --jobs 8 2>&1 | quiet | tail -30
      timeout 100 bash "$0" O ;;
  X4) for c in "" flush fresh rank1 flush,fresh,rank1; do
        echo "== clock opt-ins: ${c:-none}"
        timeout 95 python3 benchmarks/forgery_redteam.py --tasks relu_scale --honest 3 --runs 1 --factors 0.95 0.9 \
          --no-static --shared 0 --clock "$c" --out "$OUT/x4-relu-$(echo "${c:-none}" | tr , -).json" 2>&1 | quiet | grep -v '^{' | tail -9
      done ;;
  X5) for c in "" flush,fresh,rank1; do
        echo "== linear_relu, clock opt-ins: ${c:-none}"
        timeout 100 python3 benchmarks/forgery_redteam.py --tasks linear_relu --honest 3 --runs 1 --factors 0.95 0.9 \
          --no-static --shared 0 --clock "$c" --out "$OUT/x5-lin-$(echo "${c:-none}" | tr , -).json" 2>&1 | quiet | grep -v '^{' | tail -7
      done
      timeout 330 python3 benchmarks/clock_leak.py --clock flush,fresh,rank1 --out "$OUT/x5-leak.json" 2>&1 | quiet | grep -v '^{' | tail -8 ;;
  X7) timeout 560 bash scripts/gpu-check.sh --skip-faults --skip-redteam --skip-pytest --example-runs 3 --example-shared 3 \
        2>&1 | quiet | grep '^\[' | tail -60 ;;
  X8) for c in "" cold flush,cold; do
        echo "== examples, clock opt-ins: ${c:-none}"
        timeout 100 python3 scripts/gpu_check.py --skip-faults --skip-redteam --skip-pytest --example-runs 2 \
          --only diag_matmul matmul_sum_scale embedding_bag_sum --clock "$c" 2>&1 | quiet | grep '^\[' | cut -c1-300
        cp "$OUT/gpu_check.json" "$OUT/x8-examples-$(echo "${c:-none}" | tr , -).json" 2>/dev/null
      done
      for c in "" cold flush,cold; do
        echo "== relu_scale, clock opt-ins: ${c:-none}"
        timeout 70 python3 benchmarks/forgery_redteam.py --tasks relu_scale --honest 3 --runs 1 --factors 0.9 \
          --no-static --shared 0 --clock "$c" --out "$OUT/x8-relu-$(echo "${c:-none}" | tr , -).json" 2>&1 | quiet | grep -v '^{' | tail -5
      done ;;
  *) echo "usage: scripts/gpu-session.sh A|B|C|D|E|F|G|H|I|J|J2|S|K1|K2|L|M|N|O|Q|R|V|K3|P|X1|X2|X3|X4|X5|X7|X8" >&2; exit 2 ;;
esac
