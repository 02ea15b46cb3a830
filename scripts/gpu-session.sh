#!/usr/bin/env bash
# DEPRECATED: the GPU measurements are named now. Run, from the repository root on the GPU machine,
#   python3 -m benchmarks NAME [NAME ...]      (python3 -m benchmarks --list names them all)
# which writes $OUT/measurements.tar.gz (every step's files, output and result.json), $OUT/measurements.txt
# (the table, printed last) and $OUT/measurements.json. docs/measurements.md has what each lettered mode of
# this script measured, for which issue, at which commit, and which name replaces it.
# This wrapper maps the modes that still have a one-call equivalent to their names and runs them:
#   X1 -> clock-probe forgery-quick examples-quick     X2 -> forgery      X4 -> clock-opt-ins
#   X3 -> clock-leak redteam defences-cost (570 s in all, as X3's parts shared its call)
#   X7 -> examples     X8 -> clock-cold-ab     O -> defences-cost     Q -> defence-trace
#   P -> throughput    J -> synthesis (synthesis-filter when .synth-h200/candidates.jsonl is carried)
#   J2 -> rl-smoke
# Any other mode: see docs/measurements.md for its nearest name.
set -uo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  X1) names=(clock-probe forgery-quick examples-quick) ;;
  X2) names=(forgery) ;;
  X3) names=(clock-leak redteam defences-cost --limit-s 570) ;;
  X4) names=(clock-opt-ins) ;;
  X7) names=(examples) ;;
  X8) names=(clock-cold-ab) ;;
  O) names=(defences-cost) ;;
  Q) names=(defence-trace) ;;
  P) names=(throughput) ;;
  J) if [ -f .synth-h200/candidates.jsonl ]; then names=(synthesis-filter); else names=(synthesis); fi ;;
  J2) names=(rl-smoke) ;;
  *) echo "scripts/gpu-session.sh is deprecated: run python3 -m benchmarks NAME (--list names them);" \
       "docs/measurements.md maps mode '${1:-}' to its nearest name" >&2; exit 2 ;;
esac
echo "scripts/gpu-session.sh $1 is deprecated; running: python3 -m benchmarks ${names[*]}" >&2
exec python3 -m benchmarks "${names[@]}" "${@:2}"  # further arguments (--dry-run, --out DIR) pass through
