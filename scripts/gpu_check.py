"""The GPU check: build, check and time everything on a CUDA machine in one call.

Runs (1) every bundled example's solution through the full evaluator and
expects reward 3 (or the lower reward `EXAMPLE_REWARD` names, or its own event times earn on this GPU); (2) the faulty fixtures (compile error, wrong, illegal
address, hang) and the hostile ones of tests/fixtures/faulty/hostile_gpu
(segfault, a compile that never ends, gigabytes of output, a fork bomb, a
network connection, a write outside the workspace; run with the static gate
off, so that the sandbox and the process handling contain them on their own)
and expects their statuses, each followed by a good
evaluation in the same run to show the fault was contained; (3) the red-team
corpus (tests/redteam): every hack must be rejected or get reward -1, every
honest control must be accepted (status ok, reward >= 1), with the static gate
on, as in production; (4) pytest's `gpu`-marked tests; (5) with `--throughput KB_DIR`,
the evaluation-throughput benchmark (benchmarks/eval_throughput.py: evaluations per
GPU-hour serial and on the pool, the phase split), its table printed before this one. Writes every result as
JSON under $OUT (or ./out) and prints a short table last, with the counts of
hacks rejected, controls accepted and faults contained. Exit 1 if any expectation failed.

Order: faults, red-team, examples, pytest (what was never run on a GPU first).
Hacks run --jobs at a time (their timing does not matter); controls and
examples one at a time.

Usage: PYTHONPATH=src python3 scripts/gpu_check.py [--only NAME ...] [--skip-faults] [--skip-redteam] [--skip-examples] [--skip-pytest] [--jobs N]
       [--throughput KB_DIR [--throughput-deadline-s S]]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cuda_agent.eval import pipeline  # noqa: E402
from cuda_agent.eval.api import evaluate_single_file, evaluate_workspace  # noqa: E402
from cuda_agent.eval.checks import gate as static_gate  # noqa: E402
from cuda_agent.eval.config import EvalConfig, clock_opt_ins  # noqa: E402
from cuda_agent.eval.judge.result import EvalResult  # noqa: E402
from cuda_agent.eval.judge.reward import milestone_reward  # noqa: E402
from cuda_agent.eval.timing import gpu_lock  # noqa: E402
from cuda_agent.task import Task  # noqa: E402
from cuda_agent.task.suites import example_dirs  # noqa: E402
from cuda_agent.task.workspace import copy_solution, init_workspace  # noqa: E402

# examples whose honest kernel cannot beat torch.compile by 5 %: silu_mul_bf16 is memory-bound and
# inductor fuses it into one pass too (both at the 352 MB floor), so it ties compile: reward 2
EXAMPLE_REWARD = {"silu_mul_bf16": 2}
FAULTS = {  # fixture -> expected status
    "compile_error": "compile_error",
    "wrong": "incorrect",
    "illegal_address": "runtime_error",
    "hang": "timeout",
}


HOSTILE_DIR = ROOT / "tests" / "fixtures" / "faulty" / "hostile_gpu"
# fault -> (expected statuses, what else must hold); the static gate is off for these
HOSTILE = {
    "segfault": ({"runtime_error"}, "SIGSEGV in the message"),
    "endless_compile": ({"timeout"}, "the compile budget stops nvcc"),
    "huge_output": ({"ok", "runtime_error"}, "RLIMIT_FSIZE stops the log at 1 GiB (EFBIG, or SIGXFSZ)"),
    "fork_bomb": ({"runtime_error", "ok"}, "no forked child outlives the evaluation"),
    "net_connect": ({"ok"}, "the connection fails inside; the listener saw nothing"),
    "write_outside": ({"ok"}, "the file outside the workspace was not created"),
}


@contextlib.contextmanager
def static_gate_off():
    saved = pipeline.static_findings, static_gate.static_findings
    pipeline.static_findings = static_gate.static_findings = lambda *a, **k: []
    try:
        yield
    finally:
        pipeline.static_findings, static_gate.static_findings = saved


def bomb_children() -> list[int]:
    pids = []
    for pid in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            if pid.isdigit() and Path(f"/proc/{pid}/comm").read_text().strip() == "cabombchild":
                pids.append(int(pid))
    return pids


def hostile_ws(fault: str, dest: Path, outside: Path, port: int) -> Path:
    good = ROOT / "examples" / "diag_matmul"
    ws = workspace(good / "task.py", good / "solution", dest)
    if fault == "endless_compile":
        shutil.copy(HOSTILE_DIR / "endless.cu", ws / "kernels" / "endless.cu")
        return ws
    text = (HOSTILE_DIR / "hostile_binding.cpp").read_text()
    text = text.replace("#define HOSTILE_PORT 9", f"#define HOSTILE_PORT {port}")
    text = text.replace('#define HOSTILE_FILE "/tmp/cuda-agent-hostile-gpu"', f'#define HOSTILE_FILE "{outside}"')
    (ws / "kernels" / "hostile_binding.cpp").write_text(text)
    shutil.copy(HOSTILE_DIR.parent.parent / "hostile_acts.h", ws / "kernels" / "hostile_acts.h")
    model = ws / "model_new.py"
    model.write_text(model.read_text().replace("cuda_extension.diag_scale_rows(", f"cuda_extension.{fault}("))
    return ws


def hostile_case(fault: str, work: Path) -> tuple[EvalResult, bool, str]:
    """Evaluate one hostile fault with the static gate off; (result, contained, note)."""
    outside = work / f"outside_{fault}.txt"
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(0.5)
    try:
        ws = hostile_ws(fault, work / f"hostile_{fault}", outside, srv.getsockname()[1])
        cfg = EvalConfig(
            correctness_timeout=60,
            load_timeout=120,
            reuse_results=False,
            compile_timeout=20 if fault == "endless_compile" else 120,
            sandbox_max_file_bytes=1 << 30,
        )
        with static_gate_off():
            r = evaluate_workspace(ws, config=cfg)
        try:
            conn, _ = srv.accept()
            conn.close()
            connected = True
        except OSError:
            connected = False
    finally:
        srv.close()
    statuses, what = HOSTILE[fault]
    ok = r.status.value in statuses and r.reward == -1 or (r.status.value == "ok" and "ok" in statuses)
    note = f"sandbox {r.defences.get('sandbox', '?')}"
    if fault == "segfault":
        ok = ok and "SIGSEGV" in r.message + r.log
    elif fault == "fork_bomb":
        deadline = time.monotonic() + 15
        while bomb_children() and time.monotonic() < deadline:
            time.sleep(0.3)
        left = bomb_children()
        ok, note = ok and not left, note + f"; {len(left)} forked children left"
    elif fault == "net_connect":
        ok, note = ok and not connected, note + f"; listener {'was reached' if connected else 'saw nothing'}"
    elif fault == "write_outside":
        ok, note = ok and not outside.exists(), note + f"; outside file {'exists' if outside.exists() else 'absent'}"
    return r, ok, note


def workspace(task: Path, solution: Path, dest: Path) -> Path:
    ws = init_workspace(Task.from_file(task), dest, force=True)
    copy_solution(solution, ws)
    return ws


REDTEAM = ROOT / "tests" / "redteam"


def redteam_case(case: Path, dest: Path) -> EvalResult:
    """Evaluate one red-team folder (workspace form or single-file solution.py) on its task."""
    expect = json.loads((case / "EXPECT.json").read_text())
    task_path = REDTEAM / "tasks" / f"{expect['task']}.py"
    cfg = EvalConfig(
        reuse_results=False,
        correctness_timeout=60,
        load_timeout=120,
        sanitize=expect.get("lane") == "sanitize",
        **expect.get("config", {}),
    )
    if expect.get("solution_from"):  # a hijack: an honest solution under the test-only switch
        case = REDTEAM / expect["solution_from"]
    if (case / "solution.py").is_file():
        return evaluate_single_file(Task.from_file(task_path), case / "solution.py", config=cfg)
    ws = init_workspace(Task.from_file(task_path), dest, force=True)
    copy_solution(case, ws)
    return evaluate_workspace(ws, config=cfg)


def _hack_worker(case: str, dest: str) -> tuple[dict, float, str]:
    """Runs in a spawned process: one hack's evaluation, as a dict, its wall seconds, and a note on the
    files a hijack aimed at ("" when none, else "contained" or "BREACH: ...")."""
    expect = json.loads((Path(case) / "EXPECT.json").read_text())
    switch = expect.get("hijack")
    victim, planted = Path(dest + "_victim.bin"), Path(dest + "_planted.txt")
    if switch:  # the harness in the candidate process acts as a rewritten one (eval/child/main.py)
        victim.write_bytes(b"precious")
        planted.unlink(missing_ok=True)
        os.environ["CUDA_AGENT_TEST_HIJACK"] = switch.format(
            victim=victim, planted=planted, lockdir=gpu_lock.lock_dir()
        )
    t0 = time.monotonic()
    try:
        r = redteam_case(Path(case), Path(dest)).to_dict()
    finally:
        os.environ.pop("CUDA_AGENT_TEST_HIJACK", None)
    note = ""
    if switch:
        lost = [
            w
            for w, bad in (
                ("victim deleted", not victim.exists()),
                ("file planted", planted.exists()),
                ("GPU lock held", any(f["rule"] == "gpu-lock-timeout" for f in r["findings"])),
            )
            if bad
        ]
        note = "BREACH: " + ", ".join(lost) if lost else "contained"
        if expect.get("status") and r["status"] != expect["status"]:
            note += f"; status {r['status']}, expected {expect['status']}"
    return r, time.monotonic() - t0, note


def example_config(clock: str = "") -> EvalConfig:
    """The examples' config: the defaults, with the named opt-ins of the evaluator's clock turned on, and
    never a stored result (each run must be an evaluation: with reuse, runs 2 and 3 of "3 of 3" were
    copies of run 1, so the bar was met by construction; H100, 2026-12-06, 530e0ab)."""
    try:
        return EvalConfig(reuse_results=False, **clock_opt_ins(clock))  # type: ignore[arg-type]
    except ValueError as e:
        raise SystemExit(f"gpu_check: {e}") from None


def _example_worker(task: str, solution: str, dest: str, clock: str = "") -> tuple[dict, float]:
    """Runs in a spawned process: one example's evaluation (as a dict) and its wall seconds, for the
    examples sharing the GPU (issue 28: honest controls keep their reward with 3 evaluations at once)."""
    t0 = time.monotonic()
    r = evaluate_workspace(workspace(Path(task), Path(solution), Path(dest)), config=example_config(clock))
    return r.to_dict(), time.monotonic() - t0


def example_want(name: str, r: EvalResult) -> tuple[int, str]:
    """The reward an honest example must get: EXAMPLE_REWARD's (3 unless named), or lower where its own
    event times earn less on this GPU (row_softmax_wide: 1.105x torch.compile on the H200, 0.97x on an
    H100), since the clock must agree with an honest kernel's events, not beat them. Our own solution's
    events are honest (no switch runs in it). (reward, a note naming the events' reward where it decided)."""
    want = EXAMPLE_REWARD.get(name, 3)
    if r.reported_ms is None or r.eager_ms is None or r.compile_ms is None:
        return want, ""
    by_events = milestone_reward(True, r.reported_ms, r.eager_ms, r.compile_ms)
    return (by_events, f"its events give {by_events} on this GPU") if by_events < want else (want, "")


def kept_rewards(rows: list[dict]) -> tuple[int, int, list[str]]:
    """Issue 28's bar for the honest examples: each keeps one reward over its runs, alone (`example/NAME#k`)
    and sharing the GPU (`shared/NAME#k`), whatever reward that is (the expected one is the rows' own
    check: an H100 may keep a 2 where the H200 earns 3). (examples that kept it, examples, one line each)."""
    runs: dict[str, dict[str, list]] = {}
    for x in rows:
        side, _, rest = x["name"].partition("/")
        if side in ("example", "shared"):
            runs.setdefault(rest.split("#")[0], {}).setdefault(side, []).append(x["reward"])
    lines, kept = [], 0
    for name, got in runs.items():
        every = [r for side in got.values() for r in side]
        same = len(set(every)) == 1 and every[0] is not None
        kept += same
        alone = ",".join(map(str, got.get("example", []))) or "-"
        shared = ",".join(map(str, got.get("shared", []))) or "-"
        lines.append(f"  {name}: alone {alone} / shared {shared}{'' if same else '  NOT KEPT'}")
    return kept, len(runs), lines


def clock_lines(rows: list[dict]) -> list[str]:
    """The evaluator's clock against the event times, per example over its runs (issue 28): each side's
    net per call over its event time (the candidate's events are its own figure, honest here; the
    baselines' the reference's), and the candidate's spread. Where the candidate's ratio moves between
    runs while the baselines' (cached) do not, the clock's run-to-run error is the candidate's bursts'."""
    per: dict[str, dict[str, list[float]]] = {}
    for x in rows:
        side, _, rest = x["name"].partition("/")
        if side not in ("example", "shared"):
            continue
        got = per.setdefault(rest.split("#")[0], {"candidate": [], "eager": [], "compile": [], "pair": []})
        # the candidate's net over compile's against the same ratio of their events: the factor its time
        # that counts differs from its events by on compile's scale (1: the clock agrees with the events)
        if all(x.get(k) for k in ("trusted_ms", "trusted_compile_ms", "reported_ms", "compile_ms")):
            got["pair"].append((x["trusted_ms"] / x["trusted_compile_ms"]) / (x["reported_ms"] / x["compile_ms"]))
        for key, net, ev in (
            ("candidate", "trusted_ms", "reported_ms"),
            ("eager", "trusted_eager_ms", "eager_ms"),
            ("compile", "trusted_compile_ms", "compile_ms"),
        ):
            if x.get(net) and x.get(ev):
                got[key].append(x[net] / x[ev])
    lines = []
    for name, got in per.items():
        c = got["candidate"]
        if not c:
            continue
        spread = f"spread {max(c) / min(c) - 1:.1%}" if len(c) > 1 else "one run"
        lines.append(
            f"  {name}: clock/events candidate "
            + " ".join(f"{v:.3f}" for v in c)
            + f" ({spread}); eager {' '.join(f'{v:.3f}' for v in sorted(set(got['eager'])))}"
            + f"; compile {' '.join(f'{v:.3f}' for v in sorted(set(got['compile'])))}"
            + (f"; vs compile {' '.join(f'{v:.3f}' for v in got['pair'])}" if got["pair"] else "")
        )
    return lines


def row(name: str, r: EvalResult, expect: str, ok: bool, wall: float) -> dict:
    return {
        "name": name,
        "expect": expect,
        "ok": ok,
        "status": r.status.value,
        "reward": r.reward,
        "time_ms": r.time_ms,
        "eager_ms": r.eager_ms,
        "compile_ms": r.compile_ms,
        "vs_eager": r.speedup_vs_eager,
        "vs_compile": r.speedup_vs_compile,
        "cv": r.timing.cv if r.timing else None,
        "wall_s": round(wall, 1),
        "message": r.message[:800],  # whole: a rejection's reason names each side's net (the clock's evidence)
        # the clock's own figures, so a run can be read against the events afterwards (issue 28)
        "reported_ms": r.reported_ms,
        "trusted_ms": r.trusted_ms,
        "trusted_eager_ms": r.trusted_eager_ms,
        "trusted_compile_ms": r.trusted_compile_ms,
        "trusted_loop_ms": r.trusted_loop_ms,
        "trusted_tol": r.trusted_tol,
        "trusted_mode": r.trusted_mode,
        # the trusted clock's per-call time over the reported one (issue 12): <= 1 + tol when they agree
        "u_over_t": r.trusted_ms / r.timing.median_ms if r.trusted_ms and r.timing and r.timing.median_ms else None,
    }


def fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", help="example names to run")
    ap.add_argument("--skip-faults", action="store_true")
    ap.add_argument("--skip-redteam", action="store_true")
    ap.add_argument("--skip-examples", action="store_true")
    ap.add_argument("--skip-pytest", action="store_true")
    ap.add_argument(
        "--example-runs",
        type=int,
        default=1,
        metavar="N",
        help="evaluate each example N times (issue 28: an honest control keeps its reward in 3 of 3)",
    )
    ap.add_argument(
        "--clock",
        default="",
        metavar="OPT-INS",
        help="the examples under these opt-ins of the evaluator's clock, comma-separated: "
        "flush, fresh, rank1, cold, hash, fast (EvalConfig.clock_*; issue 28's A/B)",
    )
    ap.add_argument(
        "--example-shared",
        type=int,
        default=0,
        metavar="K",
        help="then each example K times at once, sharing the GPU (0: skip)",
    )
    ap.add_argument("--jobs", type=int, default=6, help="hacks evaluated at once")
    ap.add_argument("--faults", nargs="*", help="run only these faults (names of FAULTS and HOSTILE)")
    ap.add_argument("--skip-controls", action="store_true")
    ap.add_argument(
        "--throughput",
        metavar="KB_DIR",
        help="also run benchmarks/eval_throughput.py (issue 16) on the examples and the KernelBench mix, "
        "its task files in KB_DIR (benchmarks/kb_mix_carry.py makes .kb), and print its table",
    )
    ap.add_argument("--throughput-deadline-s", type=float, default=540.0)
    ap.add_argument(
        "--overhead",
        type=int,
        default=0,
        metavar="N",
        help="also time N evaluations of diag_matmul with the defences on and N with them off",
    )
    ap.add_argument(
        "--overhead-gap",
        type=float,
        default=3.0,
        metavar="S",
        help="idle seconds before each evaluation with spare children (the agent's turn; default 3): "
        "back to back, a ~1.5 s evaluation finds every other spare still starting (2-3 s)",
    )
    ap.add_argument(
        "--overhead-spread",
        choices=("cv", "p10p90"),
        default=EvalConfig.round_spread,
        help="EvalConfig.round_spread of the overhead evaluations (both sides; default: EvalConfig's)",
    )
    ap.add_argument(
        "--overhead-spares-only",
        action="store_true",
        help="measure the defences' cost only with spare children (issue 16's setting), not with fresh ones",
    )
    a = ap.parse_args()
    example_config(a.clock)  # a typo in --clock stops here, before any GPU work
    out = Path(os.environ.get("OUT") or ROOT / "out")
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    rows: list[dict] = []
    results: dict[str, dict] = {}

    def record(name: str, r: EvalResult, expect: str, ok: bool, wall: float, note: str = "") -> None:
        rows.append(row(name, r, expect, ok, wall))
        if note:
            rows[-1]["note"] = note
        results[name] = r.to_dict()
        (out / "gpu_check.json").write_text(json.dumps({"rows": rows, "results": results}, indent=1))
        print(
            f"[{'ok' if ok else 'FAIL'}] {name}: {r.status.value} reward={r.reward} {r.message[:200]}"
            + (f" [{note}]" if note else ""),
            flush=True,
        )
        if not ok and r.log:
            print(r.log[-2500:], flush=True)

    if not a.skip_faults:
        good = ROOT / "examples" / "diag_matmul"
        for fault, expect in FAULTS.items():
            fx = ROOT / "tests" / "fixtures" / "faulty" / fault
            if not fx.is_dir() or (a.faults is not None and fault not in a.faults):
                continue
            cfg = EvalConfig(correctness_timeout=20, load_timeout=60, reuse_results=False)
            t0 = time.monotonic()
            r = evaluate_workspace(workspace(good / "task.py", fx, work / f"fault_{fault}"), config=cfg)
            record(f"fault/{fault}", r, expect, r.status.value == expect and r.reward == -1, time.monotonic() - t0)
            t0 = time.monotonic()
            r = evaluate_workspace(
                workspace(good / "task.py", good / "solution", work / f"after_{fault}"),
                config=EvalConfig(reuse_results=False),
            )
            record(f"after/{fault}", r, "ok", r.status.value == "ok" and r.correct, time.monotonic() - t0)
        for fault in HOSTILE:
            if a.faults is not None and fault not in a.faults:
                continue
            t0 = time.monotonic()
            r, ok, note = hostile_case(fault, work)
            record(f"fault/{fault}", r, "/".join(sorted(HOSTILE[fault][0])), ok, time.monotonic() - t0, note)
            t0 = time.monotonic()
            r = evaluate_workspace(
                workspace(good / "task.py", good / "solution", work / f"after_{fault}"),
                config=EvalConfig(reuse_results=False),
            )
            record(f"after/{fault}", r, "ok", r.status.value == "ok" and r.correct, time.monotonic() - t0)

    counts: dict[str, list[int]] = {}  # kind -> [ok, total]

    def count(kind: str, ok: bool) -> None:
        c = counts.setdefault(kind, [0, 0])
        c[0] += int(ok)
        c[1] += 1

    for x in rows:
        if x["name"].startswith("fault/"):
            count(
                "faults contained",
                x["ok"] and next((y["ok"] for y in rows if y["name"] == "after/" + x["name"][6:]), False),
            )
    if not a.skip_redteam:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # controls first, one at a time: they are timed, and they fill each task's baseline cache
        # before the hacks run side by side

        for case in sorted(
            p for p in (REDTEAM / "controls").iterdir() if (p / "EXPECT.json").is_file() and not a.skip_controls
        ):
            t0 = time.monotonic()
            try:
                r = redteam_case(case, work / f"rt_controls_{case.name}")
            except Exception as e:  # noqa: BLE001
                print(f"[FAIL] controls/{case.name}: harness raised {type(e).__name__}: {e}", flush=True)
                count("controls accepted", False)
                continue
            ok = r.status.value == "ok" and (r.reward or 0) >= 1
            record(f"control/{case.name}", r, "accepted", ok, time.monotonic() - t0)
            count("controls accepted", ok)
        hacks = sorted(p for p in (REDTEAM / "hacks").iterdir() if (p / "EXPECT.json").is_file())
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=max(1, a.jobs), mp_context=ctx) as ex:
            futs = {case: ex.submit(_hack_worker, str(case), str(work / f"rt_hacks_{case.name}")) for case in hacks}
            for case, fut in futs.items():
                try:
                    got, wall, note = fut.result()
                    r = EvalResult.from_dict(got)
                except Exception as e:  # noqa: BLE001 - a harness bug is reported, the run goes on
                    print(f"[FAIL] hacks/{case.name}: harness raised {type(e).__name__}: {e}", flush=True)
                    count("hacks rejected", False)
                    continue
                contained = json.loads((case / "EXPECT.json").read_text()).get("contained")
                caught = (
                    r.reward == -1 or r.status.value == "rejected" or bool(contained)
                )  # contained: harmless, not rejected
                ok = caught and not note.startswith("BREACH") and "expected" not in note
                record(f"hack/{case.name}", r, "contained" if contained else "reward -1", ok, wall, note)
                count("hacks rejected", ok)

    if not a.skip_examples:
        examples = [p for p in example_dirs(ROOT / "examples") if (p / "solution").is_dir()]
        if a.only:
            examples = [p for p in examples if p.name in a.only]
        for ex in examples:
            for run in range(max(1, a.example_runs)):
                t0 = time.monotonic()
                r = evaluate_workspace(
                    workspace(ex / "task.py", ex / "solution", work / f"{ex.name}-{run}"),
                    config=example_config(a.clock),
                )
                want, why = example_want(ex.name, r)
                record(
                    f"example/{ex.name}" + (f"#{run + 1}" if a.example_runs > 1 else ""),
                    r,
                    f"reward {want}",
                    r.reward is not None and r.reward >= want,
                    time.monotonic() - t0,
                    why,
                )
            inline = ex / "solution_inline.py"
            if inline.is_file():  # the KernelBench single-file form (load_inline in the child)
                t0 = time.monotonic()
                r = evaluate_single_file(Task.from_file(ex / "task.py"), inline, config=EvalConfig())
                record(f"inline/{ex.name}", r, "reward 3", r.reward == 3, time.monotonic() - t0)

        if a.example_shared > 0:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(a.example_shared, mp_context=multiprocessing.get_context("spawn")) as pool:
                for ex in examples:
                    futs = [
                        pool.submit(
                            _example_worker,
                            str(ex / "task.py"),
                            str(ex / "solution"),
                            str(work / f"{ex.name}-shared-{i}"),
                            a.clock,
                        )
                        for i in range(a.example_shared)
                    ]
                    for i, f in enumerate(futs):
                        d, wall = f.result()
                        r = EvalResult.from_dict(d)
                        want, why = example_want(ex.name, r)
                        record(
                            f"shared/{ex.name}#{i + 1}",
                            r,
                            f"reward {want}",
                            r.reward is not None and r.reward >= want,
                            wall,
                            why,
                        )

        # issue 13: a workspace in the public CUDA-Agent release's layout, evaluated as it is
        rel = work / "release_layout"
        shutil.copytree(ROOT / "tests" / "fixtures" / "release_layout", rel, dirs_exist_ok=True)
        t0 = time.monotonic()
        r = evaluate_workspace(rel, config=EvalConfig())
        imported = any(f.rule == "imported-layout" for f in r.findings)
        record(
            "release/scale_add",
            r,
            "scored",
            r.status.value == "ok" and (r.reward or 0) >= 1 and imported,
            time.monotonic() - t0,
            "imported" if imported else "no imported-layout note",
        )

    overhead: dict[str, list[float]] = {}
    parts: dict[str, list[dict[str, float]]] = {}  # each counted evaluation's phases_s, per mode
    if a.overhead > 0:  # issue 3: the wall time the defences add to one evaluation (build cached, baselines cached)
        good = ROOT / "examples" / "diag_matmul"
        off = dict(
            runtime_guards=False,
            fresh_timing_inputs=False,
            side_stream_guard=False,
            sandbox="off",
            shape_probe=False,
            trusted_clock=False,
        )

        def one(mode: str, k: int, count: bool = True, **kw: object) -> None:
            ws = workspace(good / "task.py", good / "solution", work / f"overhead_{mode}_{k}")
            t0 = time.monotonic()
            r = evaluate_workspace(ws, config=EvalConfig(reuse_results=False, round_spread=a.overhead_spread, **kw))
            if count:
                overhead.setdefault(mode, []).append(time.monotonic() - t0)
                overhead.setdefault(f"{mode}:held", []).append(r.gpu_held_s)  # the GPU held alone
                # a timing whose spread stayed over max_cv repeats its round: the likeliest cause of a slow one
                overhead.setdefault(f"{mode}:rounds", []).append(r.timing.rounds if r.timing else 0)
                parts.setdefault(mode, []).append(r.phases_s)
                print(
                    f"overhead {mode} #{k}: {r.status.value} reward {r.reward} {overhead[mode][-1]:.2f} s "
                    f"phases {r.phases_s}",
                    flush=True,
                )
                if "trusted_clock" in r.defences:  # why this run got its reward (H200: one of 8 scored 1, not 3)
                    print(f"  clock: {r.defences['trusted_clock'][:400]}", flush=True)

        for k in range(0 if a.overhead_spares_only else a.overhead):
            # "no_clock": every defence but issue 12's trusted clock, to show what that one adds
            for mode, kw in (("on", {}), ("no_clock", {"trusted_clock": False}), ("off", off)):
                one(mode, k, **kw)
        # the same with spare children (as the pool and the agent run): each mode's evaluations one after
        # another with --overhead-gap idle seconds before each (an agent's turn), the first one (which
        # starts the spare) not counted; the children's start-up, and with it the op log's first use, then
        # leaves the critical path. Back to back (gap 0) every other evaluation waited for a spare still
        # starting (H200, 2026-12-04: 0.6-1.0 s of reference.setup or load in the 2nd and 4th of each mode)
        from cuda_agent.eval.channel import children as warm

        for mode, kw in (("on+spares", {}), ("off+spares", off)):
            for k in range(a.overhead + 1):
                if k > 0:
                    time.sleep(a.overhead_gap)  # the spare started by the last evaluation finishes its start-up
                one(mode, k, count=k > 0, spare_children=True, **kw)
            warm.discard()
        (out / "overhead.json").write_text(json.dumps({**overhead, "phases": parts}, indent=1))

    pytest_rc = None
    if not a.skip_pytest:
        p = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", str(ROOT / "tests")],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        pytest_rc = p.returncode
        (out / "pytest_gpu.log").write_text(p.stdout + p.stderr)
        print("\n".join((p.stdout + p.stderr).strip().splitlines()[-15:]))

    throughput, throughput_rc = "", None
    if a.throughput:  # last of the GPU work: it takes the GPU alone, and its own deadline bounds it
        p = subprocess.run(
            [
                sys.executable,
                str(ROOT / "benchmarks" / "eval_throughput.py"),
                "--kernelbench",
                a.throughput,
                "--deadline-s",
                str(a.throughput_deadline_s),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**os.environ, "OUT": str(out), "PYTHONPATH": str(ROOT / "src")},
        )
        throughput_rc = p.returncode
        (out / "eval_throughput.log").write_text(p.stdout + p.stderr)
        mark = "=" * 100  # the benchmark's report starts after this line
        throughput = p.stdout[p.stdout.rfind(mark) + len(mark) :] if mark in p.stdout else (p.stdout + p.stderr)[-3000:]

    if throughput:
        print("\nthroughput (benchmarks/eval_throughput.py; exit %s):%s" % (throughput_rc, throughput.rstrip()))
    print("\n" + "=" * 118)
    print(
        f"{'check':28} {'expect':14} {'status':14} {'rw':>3} {'t ms':>9} {'eager':>9} {'compile':>9} {'xEag':>6} {'xComp':>6} {'cv':>6} {'u/t':>5} {'wall s':>7}"
    )
    for x in rows:
        print(
            f"{x['name'][:28]:28} {x['expect']:14} {x['status']:14} {fmt(x['reward'], 'd'):>3} "
            f"{fmt(x['time_ms'], '.4g'):>9} {fmt(x['eager_ms'], '.4g'):>9} {fmt(x['compile_ms'], '.4g'):>9} "
            f"{fmt(x['vs_eager'], '.2f'):>6} {fmt(x['vs_compile'], '.2f'):>6} {fmt(x['cv'], '.3f'):>6} "
            f"{fmt(x.get('u_over_t'), '.2f'):>5} {x['wall_s']:>7}  {'ok' if x['ok'] else 'FAIL'}"
            + (f"  {x['note']}" if x.get("note") else "")
        )
    for kind, (n_ok, n) in counts.items():
        print(f"{kind}: {n_ok}/{n}")
    if overhead.get("on+spares") and overhead.get("off+spares"):
        import statistics

        if overhead.get("on") and overhead.get("off"):
            on, off_ = statistics.median(overhead["on"]), statistics.median(overhead["off"])
            print(
                f"defences: one evaluation {on:.2f} s with, {off_:.2f} s without (median of {len(overhead['on'])}); "
                f"they add {on - off_:.2f} s"
            )
            if overhead.get("no_clock"):
                nc = statistics.median(overhead["no_clock"])
                print(f"trusted clock (issue 12): {on:.2f} s with, {nc:.2f} s without; it adds {on - nc:.2f} s")
        ons, offs = statistics.median(overhead["on+spares"]), statistics.median(overhead["off+spares"])
        print(
            f"defences with spare children (issue 16's setting): {ons:.2f} s with, {offs:.2f} s without; "
            f"they add {ons - offs:.2f} s ({100 * (ons - offs) / offs:+.0f} %; target <= +20 %)"
        )
        # what a GPU shared by evaluations (the pool's per_gpu slots) cannot overlap: the timed sections
        hon, hoff = statistics.median(overhead["on+spares:held"]), statistics.median(overhead["off+spares:held"])
        print(
            f"GPU held alone per evaluation (timed sections): {hon:.2f} s with the defences, {hoff:.2f} s "
            f"without ({100 * (hon - hoff) / max(hoff, 1e-9):+.0f} %)"
        )
        print(
            "timing rounds per evaluation (1 unless the spread stayed over max_cv): "
            f"with {overhead.get('on+spares:rounds')}, without {overhead.get('off+spares:rounds')}"
        )
        # a repeated round (~0.15-0.3 s on this 21 us kernel) falls on either side by chance: the
        # evaluations that timed in one round compare the defences without that lottery
        one_round = {
            m: [w for w, n in zip(overhead[m], overhead[f"{m}:rounds"], strict=True) if n == 1]
            for m in ("on+spares", "off+spares")
        }
        if one_round["on+spares"] and one_round["off+spares"]:
            o1, f1 = statistics.median(one_round["on+spares"]), statistics.median(one_round["off+spares"])
            print(
                f"  of them in one timing round: {o1:.2f} s with ({len(one_round['on+spares'])}), {f1:.2f} s without "
                f"({len(one_round['off+spares'])}): {100 * (o1 - f1) / f1:+.0f} %"
            )
        # where the difference is: the phases of the timed sections and the checks around them
        keys = sorted({k for m in ("on+spares", "off+spares") for p in parts.get(m, []) for k in p})
        med = {
            m: {k: statistics.median(p.get(k, 0.0) for p in parts.get(m, [{}])) for k in keys}
            for m in ("on+spares", "off+spares")
        }
        diff = sorted(keys, key=lambda k: med["off+spares"][k] - med["on+spares"][k])
        print(
            "phases, median s with / without the defences (largest differences first): "
            + ", ".join(f"{k} {med['on+spares'][k]:.3f}/{med['off+spares'][k]:.3f}" for k in diff[:12])
        )
    kept, n_ex, kept_lines = kept_rewards(rows)
    if n_ex and (a.example_runs > 1 or a.example_shared > 0):
        print(f"examples keep their reward (alone and shared): {kept}/{n_ex}")
        print("\n".join(kept_lines))
    if spread_lines := clock_lines(rows):
        print("the evaluator's clock against the event times (net / event time per run):")
        print("\n".join(spread_lines))
    failed = [x["name"] for x in rows if not x["ok"]]
    saved = json.loads((out / "gpu_check.json").read_text())["rows"] if rows else []
    print(f"results on disk: {len(saved)}/{len(rows)} rows in {out / 'gpu_check.json'}")
    print(
        f"passed {len(rows) - len(failed)}/{len(rows)}"
        + (f"; pytest -m gpu exit {pytest_rc}" if pytest_rc is not None else "")
    )
    if failed:
        print("failed: " + ", ".join(failed))
    if throughput_rc not in (None, 0):
        print(
            f"throughput benchmark exit {throughput_rc} (an outcome differed from the mix's expectation, or it failed)"
        )
    return 1 if failed or (pytest_rc not in (None, 0, 5)) or throughput_rc not in (None, 0) else 0


if __name__ == "__main__":
    raise SystemExit(main())
