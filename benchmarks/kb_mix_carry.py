"""Copy the KernelBench task files of the throughput mix into an ignored folder (default .kb/).

KernelBench's code is never committed here: benchmarks/kb_mix/MIX.json names each task by
level, problem number and file name, and this script takes those files from a KernelBench
git repository (a bare one as the `fetch` tool leaves it, or a clone's .git) at the commit
MIX.json pins, into `DEST/KernelBench/level{N}/FILE`. DEST is then a KernelBench checkout
in miniature: `--kernelbench DEST` of benchmarks/eval_throughput.py, and
`cuda-agent baselines DEST --levels 1,2` both read it. DEST/SOURCE.json records where the
files came from.

Contract: every task of MIX.json is copied, or the script exits 1 naming the first file it
could not read (nothing is half-written: files go to DEST.tmp first, then DEST is replaced).
With `--checkout DIR` the files are copied from a plain checkout instead (no commit check:
SOURCE.json then says "unknown").

Not guaranteed: that a different commit (`--commit`) holds the same tasks at the same sizes;
the mix was made for the pinned one.

Usage: python3 benchmarks/kb_mix_carry.py --repo /work/.mirror/ScalingIntelligence+KernelBench/repo [--dest .kb] [--commit REV]
       python3 benchmarks/kb_mix_carry.py --checkout ~/KernelBench
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIX = ROOT / "benchmarks" / "kb_mix" / "MIX.json"


def task_path(task: dict) -> str:
    return f"KernelBench/level{task['level']}/{task['file']}"


def read_from_git(repo: Path, commit: str, rel: str) -> bytes:
    p = subprocess.run(["git", f"--git-dir={repo}", "show", f"{commit}:{rel}"], capture_output=True)
    if p.returncode != 0:
        raise FileNotFoundError(f"{rel} at {commit} in {repo}: {p.stderr.decode(errors='replace').strip()}")
    return p.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--repo", type=Path, help="a KernelBench git dir (bare, or a clone's .git)")
    src.add_argument("--checkout", type=Path, help="a plain KernelBench checkout (holding KernelBench/level1 ...)")
    ap.add_argument("--commit", help="revision to read from --repo (default: the one MIX.json pins)")
    ap.add_argument("--dest", type=Path, default=ROOT / ".kb")
    a = ap.parse_args()
    mix = json.loads(MIX.read_text())
    commit = a.commit or mix["kernelbench"]["commit"]
    tmp = a.dest.with_name(a.dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        for task in mix["tasks"]:
            rel = task_path(task)
            if a.repo is not None:
                data = read_from_git(a.repo, commit, rel)
            else:
                f = a.checkout / rel
                if not f.is_file():
                    raise FileNotFoundError(f"{f} not found")
                data = f.read_bytes()
            out = tmp / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
    except FileNotFoundError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"kb_mix_carry: cannot read {e}", file=sys.stderr)
        return 1
    source = {
        "repo": str(a.repo or a.checkout),
        "commit": commit if a.repo is not None else "unknown",
        "tasks": len(mix["tasks"]),
    }
    (tmp / "SOURCE.json").write_text(json.dumps(source, indent=1) + "\n")
    shutil.rmtree(a.dest, ignore_errors=True)
    tmp.rename(a.dest)
    print(f"{len(mix['tasks'])} KernelBench task files at {commit if a.repo is not None else 'a checkout'} -> {a.dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
