"""Run named GPU measurements (benchmarks/manifest.py) and pack what they write into one archive.

Usage, from the repository root (on the GPU machine, as one device call per measurement or per few):
  python -m benchmarks NAME [NAME ...] [--limit-s S]   run them in order
  python -m benchmarks --list                           the names, their budgets and what each measures
  python -m benchmarks NAME ... --dry-run               the commands, and whether what they need is here

Every step runs with its own time limit (its process group killed at the limit, the timeout recorded),
so a hung one does not lose the others; `--limit-s` also bounds all of them together (each then gets at
most what is left). What comes back from the device call is in $OUT (default ./out), 3 files:
  measurements.tar.gz  NAME/STEP/ per step: every file it wrote into its $OUT, output.log (all it printed),
                       result.json (command, exit code, timed out or not, seconds, its figures: the headline
                       lines and every JSON object it printed); summary.json (all steps) and env.json (GPU,
                       driver, torch, Python, commit) at the top. Rewritten after every step, so a call cut
                       off by the device's own limit still returns what finished.
  measurements.txt     the table (also printed last)
  measurements.json    summary.json again, readable without unpacking
The names match what the device tool brings back (letters, digits, '.', '_', '-'; at most 8 files).
Exit 0 when every step ran to exit 0; 1 when one failed, timed out or could not start; 2 on a usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # run as `python benchmarks/runner.py`: make `benchmarks` importable as a package
    sys.path.insert(0, str(ROOT))

from benchmarks.manifest import BY_NAME, LIMIT_S, MEASUREMENTS, Step  # noqa: E402

ARCHIVE, TABLE, SUMMARY = "measurements.tar.gz", "measurements.txt", "measurements.json"
QUIET = re.compile(r"^W\d{4} |warnings\.warn|No CUDA runtime")  # noise not echoed (kept in output.log)
MEMBER_MAX = 12 << 20  # a file larger than this is left out of the archive (named in summary.json)
ARCHIVE_MAX = 15 << 20  # the device tool returns files of at most 16 MiB
KILL_GRACE_S = 10.0


def command(step: Step, out: Path) -> list[str]:
    return [a.replace("{py}", sys.executable).replace("{out}", str(out)) for a in step.argv]


def step_env(step: Step, out: Path, extra_path: str = "") -> dict[str, str]:
    paths = [str(ROOT / "src"), *([extra_path] if extra_path else []), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "PYTHONUNBUFFERED": "1", "OUT": str(out), **step.env}


def run_step(argv: list[str], env: dict[str, str], timeout_s: float, log: Path, echo=print) -> dict:
    """Run one command in its own process group, its output to `log` (and echoed, less the noise), killed
    at `timeout_s`. Returns rc (None when it could not start), timed_out, seconds, and the lines printed."""
    t0 = time.monotonic()
    lines: list[str] = []
    with open(log, "w", encoding="utf-8", errors="replace") as f:
        try:
            p = subprocess.Popen(
                argv,
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                start_new_session=True,
            )
        except OSError as e:
            f.write(f"could not start: {e}\n")
            echo(f"  could not start: {e}")
            return {"rc": None, "timed_out": False, "seconds": 0.0, "lines": [f"could not start: {e}"]}

        done = threading.Event()  # set once the step is over: what a leftover daemon prints is dropped

        def read() -> None:
            assert p.stdout is not None
            with contextlib.suppress(ValueError):  # the log closed under a late line
                for line in p.stdout:
                    if done.is_set():
                        break
                    f.write(line)
                    f.flush()
                    lines.append(line.rstrip("\n"))
                    if not QUIET.search(line):
                        echo("  " + line.rstrip("\n")[:400])

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        timed_out = False
        try:
            p.wait(timeout=max(timeout_s, 0.0))
        except subprocess.TimeoutExpired:
            timed_out = True
            for sig, grace in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 5.0)):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(p.pid, sig)
                try:
                    p.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
        # a process that left the group (a daemon) may hold the pipe open: read what came, then go on
        reader.join(timeout=5.0)
        done.set()
        seconds = time.monotonic() - t0
        if timed_out:
            f.write(f"\n[runner] killed after {timeout_s:.0f} s (its limit)\n")
    return {"rc": p.returncode, "timed_out": timed_out, "seconds": round(seconds, 1), "lines": lines}


def figures(lines: list[str], headline: str) -> tuple[list[str], list[object]]:
    """The headline lines (or the last two lines when none match) and the JSON objects printed."""
    pat = re.compile(headline) if headline else None
    heads = [ln.rstrip()[:300] for ln in lines if pat and pat.search(ln) and not QUIET.search(ln)]
    if not heads:
        heads = [ln.rstrip()[:300] for ln in lines if ln.strip() and not QUIET.search(ln)][-2:]
    objs: list[object] = []
    for ln in lines:
        if ln.startswith("{") and len(objs) < 5000:
            with contextlib.suppress(ValueError):
                objs.append(json.loads(ln))
    return heads[-40:], objs


def environment(extra_path: str = "") -> dict:
    """GPU, driver, torch, Python and commit of the machine the measurements ran on."""
    env: dict[str, object] = {
        "python": sys.version.split()[0],
        "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }
    probes = {
        "gpu": ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm", "--format=csv,noheader"],
        "torch": [
            sys.executable,
            "-c",
            "import torch; print(torch.__version__, 'cuda', torch.version.cuda, "
            "torch.cuda.get_device_name() if torch.cuda.is_available() else 'no CUDA device')",
        ],
        # the parent-death signal (sandbox.env.die_with_parent): without it a killed worker's children live on
        "orphan_guard": [
            sys.executable,
            "-c",
            "from cuda_agent.sandbox.env import _setpriv; print(_setpriv() or 'none (no setpriv --pdeathsig)')",
        ],
        "commit": ["git", "-C", str(ROOT), "rev-parse", "HEAD"],
        "dirty": ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
        # the files that ran, as git would commit them (a scratch index; the real one is untouched): the
        # device's copy keeps the .git of the session's start, so `commit` there can be older than the
        # tree; `git log --format='%h %T' | grep TREE` here names the commit whose files these are
        "tree": [
            "sh",
            "-c",
            'i=$(mktemp) && cp .git/index "$i" 2>/dev/null; export GIT_INDEX_FILE="$i"; '
            'git add -A >/dev/null 2>&1 && git write-tree; r=$?; rm -f "$i"; exit $r',
        ],
    }
    for key, argv in probes.items():
        try:
            p = subprocess.run(
                argv,
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=60,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [extra_path, str(ROOT / "src")]))},
            )
            env[key] = (
                p.stdout.strip()
                if p.returncode == 0
                else f"unknown ({(p.stderr.strip() or 'exit %d' % p.returncode)[:200]})"
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            env[key] = f"unknown ({type(e).__name__})"
    if env.get("commit", "").startswith("unknown") and os.environ.get("CUDA_AGENT_COMMIT"):
        env["commit"] = os.environ["CUDA_AGENT_COMMIT"]  # a copied working tree has no .git: the caller may say
    env["dirty"] = bool(env["dirty"]) and not str(env["dirty"]).startswith("unknown")
    return env


def install_wheels(wheels: Path, site: Path) -> str:
    """Carried wheels (scripts/device-wheels.sh) installed beside the image's packages; '' when none."""
    whl = sorted(wheels.glob("*.whl")) if wheels.is_dir() else []
    if not whl:
        return ""
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--no-compile",
            "--no-cache-dir",
            "--upgrade",
            "--target",
            str(site),
            *map(str, whl),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(f"wheels: {len(whl)} from {wheels} into {site}: exit {p.returncode}", flush=True)
    return str(site) if p.returncode == 0 else ""


def pack(stage: Path, out: Path) -> list[str]:
    """The staging folder as $OUT/measurements.tar.gz (written beside, then renamed); returns what was left out."""
    left: list[str] = []
    files = sorted(p for p in stage.rglob("*") if p.is_file() or p.is_symlink())
    for limit in (MEMBER_MAX, 1 << 20, 64 << 10):
        left = []
        tmp = out / (ARCHIVE + ".part")
        with tarfile.open(tmp, "w:gz") as tar:
            for p in files:
                rel = p.relative_to(stage).as_posix()
                try:
                    if p.is_symlink() or p.stat().st_size > limit and p.name not in ("summary.json", "result.json"):
                        left.append(f"{rel} ({'a link' if p.is_symlink() else f'{p.stat().st_size} bytes'})")
                        continue
                    tar.add(p, arcname=rel, recursive=False)
                except OSError as e:  # gone or unreadable (a process the step left behind)
                    left.append(f"{rel} ({type(e).__name__})")
        if tmp.stat().st_size <= ARCHIVE_MAX:
            break
    tmp.replace(out / ARCHIVE)
    return left


def table(records: list[dict]) -> str:
    """One row per measurement, its figures (headline lines) under it."""
    rows = [f"{'measurement':18} {'status':9} {'seconds':>14}  steps (exit code, s)"]
    for r in records:
        steps = "; ".join(f"{s['step']} {s['outcome']}" for s in r["steps"]) or r.get("note", "")
        rows.append(f"{r['name']:18} {r['status']:9} {r['seconds']:>6.0f} / {r['budget_s']:<5}  {steps}")
        for s in r["steps"]:
            for h in s.get("headline", []):
                rows.append(f"    {s['step'] + ': ' if len(r['steps']) > 1 else ''}{h}")
    ok = sum(r["status"] == "ok" for r in records)
    rows.append(f"{ok}/{len(records)} measurements ok")
    return "\n".join(rows)


def run(
    names: list[str],
    out: Path,
    stage: Path,
    limit_s: float | None = None,
    wheels: Path | None = None,
    probe_env: bool = True,
) -> int:
    t_start = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    stage.mkdir(parents=True, exist_ok=True)
    site = install_wheels(wheels, Path(tempfile.gettempdir()) / "cuda-agent-site") if wheels else ""
    env = environment(site) if probe_env else {"python": sys.version.split()[0], "probed": False}
    env["names"], env["wheels"] = names, site or None
    (stage / "env.json").write_text(json.dumps(env, indent=1))
    print(
        "environment: " + "; ".join(f"{k} {v}" for k, v in env.items() if k in ("gpu", "torch", "commit")), flush=True
    )
    records: list[dict] = []
    left_out: list[str] = []

    def save() -> None:
        nonlocal left_out
        summary = {"env": env, "measurements": records, "left_out_of_archive": left_out}
        (stage / "summary.json").write_text(json.dumps(summary, indent=1))
        text = table(records)
        (stage / "table.txt").write_text(text + "\n")
        left_out = pack(stage, out)
        summary["left_out_of_archive"] = left_out
        (out / SUMMARY).write_text(json.dumps(summary, indent=1))
        (out / TABLE).write_text(text + "\n")

    for name in names:
        m = BY_NAME[name]
        rec: dict = {
            "name": name,
            "what": m.what,
            "issues": m.issues,
            "budget_s": m.budget_s,
            "steps": [],
            "status": "ok",
            "seconds": 0.0,
        }
        records.append(rec)
        missing = [n for n in m.needs if not (ROOT / n).exists()]
        if missing:
            rec["status"], rec["note"] = "missing", "not run: carry " + ", ".join(missing)
            print(f"== {name}: not run, {rec['note']}", flush=True)
            save()
            continue
        print(f"== {name} ({m.budget_s} s): {m.what}", flush=True)
        for step in m.steps:
            left = None if limit_s is None else limit_s - (time.monotonic() - t_start)
            timeout = step.timeout_s if left is None else min(step.timeout_s, max(left, 0.0))
            folder = stage / name / step.id
            folder.mkdir(parents=True, exist_ok=True)
            argv = command(step, folder)
            print(f"-- {name}/{step.id} (limit {timeout:.0f} s): {shlex.join(argv)}", flush=True)
            if timeout < 1:
                got = {"rc": None, "timed_out": True, "seconds": 0.0, "lines": ["not started: --limit-s spent"]}
            else:
                got = run_step(argv, step_env(step, folder, site), timeout, folder / "output.log")
            heads, objs = figures(got["lines"], m.headline)
            outcome = "timeout" if got["timed_out"] else "no start" if got["rc"] is None else f"exit {got['rc']}"
            s = {
                "step": step.id,
                "argv": argv,
                "timeout_s": round(timeout, 1),
                "rc": got["rc"],
                "timed_out": got["timed_out"],
                "seconds": got["seconds"],
                "outcome": f"{outcome}, {got['seconds']:.0f} s",
                "headline": heads,
                "files": sorted(
                    p.relative_to(folder).as_posix()
                    for p in folder.rglob("*")
                    if p.is_file() and p.name not in ("output.log", "result.json")
                ),
            }
            (folder / "result.json").write_text(
                json.dumps({**s, "name": name, "json_lines": objs, "tail": got["lines"][-60:]}, indent=1)
            )
            rec["steps"].append(s)
            rec["seconds"] = round(rec["seconds"] + got["seconds"], 1)
            if got["timed_out"]:
                rec["status"] = "timeout"
            elif got["rc"] != 0 and rec["status"] == "ok":
                rec["status"] = "failed"
            save()
    if not records:
        save()
    text = table(records)
    print("\n" + "=" * 100 + "\n" + text, flush=True)
    if left_out:
        print("left out of the archive (too large): " + ", ".join(left_out))
    print(f"archive: {out / ARCHIVE}; table: {out / TABLE}")
    return 0 if all(r["status"] == "ok" for r in records) else 1


def listing() -> str:
    rows = [f"{'name':18} {'budget':>6}  {'issues':10} replaces (old scripts/gpu-session.sh modes)"]
    for m in MEASUREMENTS:
        rows.append(f"{m.name:18} {m.budget_s:>5}s  {m.issues:10} {m.modes or '-'}")
        rows.append(f"{'':20}{m.what}" + (f" [needs {', '.join(m.needs)}]" if m.needs else ""))
    return "\n".join(rows)


def dry_run(names: list[str], limit_s: float | None) -> int:
    """The commands each named measurement would run, and whether its scripts and carried inputs are here."""
    bad = 0
    total = 0
    for name in names:
        m = BY_NAME[name]
        total += m.budget_s
        absent = [s for s in m.scripts if not (ROOT / s).exists()]
        missing = [n for n in m.needs if not (ROOT / n).exists()]
        bad += bool(absent)
        print(
            f"{name} ({m.budget_s} s; issues {m.issues}; replaces {m.modes or '-'})"
            + (f"  MISSING SCRIPT {', '.join(absent)}" if absent else "")
            + (f"  not here (carry it): {', '.join(missing)}" if missing else "")
        )
        for step in m.steps:
            print(
                f"  {step.id} ({step.timeout_s} s): "
                + "".join(f"{k}={v} " for k, v in step.env.items())
                + shlex.join(command(step, Path("$OUT") / name / step.id))
            )
    print(
        f"total {total} s"
        + (f" (bounded by --limit-s {limit_s:.0f})" if limit_s else "")
        + (
            "; more than one device call holds (600 s): pass --limit-s or run fewer"
            if total > 590 and not limit_s
            else ""
        )
    )
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Run named GPU measurements; docs/measurements.md has their history.",
        epilog=listing(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("names", nargs="*", metavar="NAME", help="measurements to run, in this order")
    ap.add_argument("--list", action="store_true", help="list the measurements and stop")
    ap.add_argument("--dry-run", action="store_true", help="print the commands; run nothing")
    ap.add_argument("--limit-s", type=float, default=None, help="bound all the named measurements together")
    ap.add_argument("--out", type=Path, default=None, help="where the archive and the table go (default $OUT or ./out)")
    ap.add_argument("--work", type=Path, default=None, help="staging folder (default: a new temporary one)")
    ap.add_argument("--wheels", type=Path, default=ROOT / ".whl", help="carried wheels to install first, if any")
    ap.add_argument("--no-env", action="store_true", help="skip the environment record (nvidia-smi, torch, git)")
    a = ap.parse_args(argv)
    if a.list:
        print(listing())
        return 0
    unknown = [n for n in a.names if n not in BY_NAME]
    if unknown or not a.names:
        print(
            ("unknown measurement: " + ", ".join(unknown) + "\n" if unknown else "name at least one measurement\n")
            + listing(),
            file=sys.stderr,
        )
        return 2
    if a.dry_run:
        return dry_run(a.names, a.limit_s)
    total = sum(BY_NAME[n].budget_s for n in a.names)
    if total > LIMIT_S + 30 and a.limit_s is None:
        print(
            f"note: these budgets add up to {total} s, more than one 10-minute device call; "
            "pass --limit-s to bound them",
            flush=True,
        )
    out = a.out or Path(os.environ.get("OUT") or ROOT / "out")
    stage = a.work or Path(tempfile.mkdtemp(prefix="measurements-"))
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(line_buffering=True, errors="replace")  # type: ignore[union-attr]
    return run(a.names, out.resolve(), stage, a.limit_s, a.wheels, probe_env=not a.no_env)


if __name__ == "__main__":
    raise SystemExit(main())
