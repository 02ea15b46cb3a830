"""The expert profile: per kernel of a candidate, what a kernel engineer reads first (issue 32).

Contract: `profile_workspace(workdir, settings=...)` stages and builds the workspace as the evaluator
does (the build is a cache hit after an evaluation), then, within `settings.timeout_s` in all:
1. the compiler's report (`profile/resources.py`: registers, spills, stack, static shared memory), on
   any machine with nvcc;
2. on a CUDA GPU, the GPU's ceilings (`profile/roofline.py`), measured once per GPU model by
   `profile_child ceilings` in the sandbox and cached under `$CUDA_AGENT_CACHE/profile/`;
3. the candidate's kernels under Nsight Compute (`profile/ncu.py`: `--clock-control none`, the clocks
   are never touched; one input set, warm-up outside the profiled range) in the sandbox, holding the
   GPU's timing lock exclusively (ncu replays kernels: nothing else may run beside it). A metric this
   ncu does not know makes it retry once with the core list;
4. where ncu is missing, refused (ERR_NVGPUCTRPERM), fails or runs out of time: per-kernel device
   times from torch.profiler (`profile_child kernels`), the call's event time and the task's bytes,
   and a line that says counters were not available and why.
It returns an `ExpertProfile`; `.text()` is at most `settings.max_lines` lines (40) for the agent's
context. Never raises for anything the candidate or the machine does (a missing tool, a timeout, a
crash, malformed child output): each becomes a line of the text. Never touches a reward or a cache
of results; the caller (`cuda-agent eval --expert`, `tools/profile`, the agent's profile tool) appends
the text after the evaluation's own.

Not guaranteed: a single-file (load_inline) solution is not profiled (no staged kernels/: says so);
kernels are matched to the compiler's report by their demangled base name (overloads share a line;
ncu's `<unnamed>::` and c++filt's `(anonymous namespace)::` read as one);
the profile's inputs come from a fixed public seed, and what the candidate's process writes back is
read as bounded data, not trusted. Measured vs modelled: durations, throughput shares, occupancy,
stalls and launch resources are ncu's measurements; registers/spills/smem without ncu are the
compiler's static figures; the roofline verdict compares measured rates with measured ceilings, and
without counters it is a model (the task's bytes floor over the event time), labelled so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.eval.profile import ncu as ncu_mod
from cuda_agent.eval.profile import roofline as roof
from cuda_agent.eval.profile.resources import ResourceReport, Resources, compile_report, demangle, short_name

CHILD = ["-m", "cuda_agent.eval.child.profiling"]  # the tests swap in a stand-in program
MAX_ROWS = 200  # kernels read back from the child
_PKG_PARENT = str(Path(__file__).resolve().parents[3])  # the child imports the same cuda_agent as this process


@dataclass
class ProfileSettings:
    timeout_s: float = 120.0  # the whole profile: build, compiler report, ceilings, ncu or events
    calls: int = 1  # candidate calls profiled
    max_kernels: int = 5  # kernels shown (longest first); the rest summed in one line
    max_lines: int = 40
    sandbox: str = "auto"  # as EvalConfig.sandbox
    gpu_lock_wait_s: float = 300.0
    use_ncu: bool = True


@dataclass
class KernelView:
    name: str
    launches: int = 1
    duration_ns: float | None = None
    dram_pct: float | None = None
    sm_pct: float | None = None
    occupancy_pct: float | None = None
    theoretical_pct: float | None = None
    registers: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    smem_static: int | None = None
    smem_dynamic: int | None = None
    grid: int | None = None
    block: int | None = None
    stalls: list[tuple[str, float]] = field(default_factory=list)
    verdict: str = ""
    source: str = ""  # "ncu", "events", "compiler"


@dataclass
class ExpertProfile:
    counters: str = ""  # "ncu" or "not available: <why>"
    kernels: list[KernelView] = field(default_factory=list)
    ceilings: roof.Ceilings | None = None
    ceilings_note: str = ""
    call_ms: float | None = None
    call_verdict: str = ""
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    raw_ncu: str = ""  # ncu's last output (bounded), for a capture to keep; not shown in the text
    phases_s: dict[str, float] = field(default_factory=dict)  # compiler, build, ceilings, ncu, events

    def text(self, max_lines: int = 40, max_kernels: int = 5) -> str:
        return render(self, max_lines, max_kernels)


def _fmt_bytes(n: int | float | None) -> str:
    if n is None:
        return "?"
    return f"{n / 1024:.3g} KiB" if n >= 1024 else f"{int(n)} B"


def _pct(v: float | None) -> str:
    return "?" if v is None else f"{v:.0f} %"


def _kernel_lines(k: KernelView, i: int, n: int, share: float | None) -> list[str]:
    t = "" if k.duration_ns is None else f"  {k.duration_ns / 1e3:.4g} us"
    sh = "" if share is None else f" ({100 * share:.0f} % of the kernels' time)"
    runs = f"  x{k.launches}" if k.launches else ""
    lines = [f"kernel {i}/{n}: {short_name(k.name)}{runs}{t}{sh}  [{k.source}]"]
    if k.dram_pct is not None or k.sm_pct is not None:
        occ = (
            f"; occupancy {_pct(k.occupancy_pct)} achieved / {_pct(k.theoretical_pct)} theoretical"
            if k.occupancy_pct is not None
            else ""
        )
        lines.append(f"  DRAM {_pct(k.dram_pct)} of peak, SM {_pct(k.sm_pct)} of peak{occ}")
    res = []
    if k.registers is not None:
        res.append(f"registers {k.registers}/thread")
    if k.spill_stores is not None:
        res.append(
            "no spills"
            if not (k.spill_stores or k.spill_loads)
            else f"SPILLS {k.spill_stores} B stored / {k.spill_loads} B loaded per thread"
        )
    if k.smem_static is not None or k.smem_dynamic is not None:
        dyn = f" + {_fmt_bytes(k.smem_dynamic)} dynamic" if k.smem_dynamic is not None else ""
        res.append(f"smem {_fmt_bytes(k.smem_static)} static{dyn}/block")
    if k.grid is not None and k.block is not None:
        res.append(f"{k.grid} blocks x {k.block} threads")
    if res:
        lines.append("  " + ", ".join(res))
    if k.stalls:
        lines.append(
            "  top stalls (cycles per issued instruction): " + ", ".join(f"{r} {v:.3g}" for r, v in k.stalls[:3])
        )
    if k.verdict:
        lines.append(f"  verdict: {k.verdict}")
    return lines


def render(p: ExpertProfile, max_lines: int = 40, max_kernels: int = 5) -> str:
    lines = [f"expert profile ({p.seconds:.1f} s; a diagnostic for you, never part of the reward):"]
    lines.append(f"counters: {p.counters}")
    if p.ceilings is not None:
        c = p.ceilings
        gemm = ", ".join(f"{k} {v / 1e12:.3g}" for k, v in c.gemm_flops_per_s.items())
        lines.append(
            f"ceilings ({c.gpu}, measured {c.measured_at or '?'}{p.ceilings_note}): copy "
            f"{c.copy_bytes_per_s / 1e12:.3g} TB/s; GEMM TFLOP/s {gemm}"
        )
    elif p.ceilings_note:
        lines.append(f"ceilings: {p.ceilings_note}")
    if p.call_ms is not None:
        lines.append(
            f"one call: {p.call_ms:.4g} ms (events, median of 5, L2 not flushed: the evaluator's time above counts)"
        )
    if p.call_verdict:
        lines.append(f"roofline: {p.call_verdict}")
    ks = sorted(p.kernels, key=lambda k: -((k.duration_ns or 0) * k.launches))
    total = sum((k.duration_ns or 0) * k.launches for k in ks) or None
    shown = ks[:max_kernels]
    for i, k in enumerate(shown, 1):
        share = (k.duration_ns or 0) * k.launches / total if total and k.duration_ns is not None else None
        lines += _kernel_lines(k, i, len(ks), share)
    if len(ks) > len(shown):
        rest = sum((k.duration_ns or 0) * k.launches for k in ks[len(shown) :])
        lines.append(
            f"({len(ks) - len(shown)} more kernels, {100 * rest / total if total else 0:.0f} % of the time, not shown)"
        )
    if not ks:
        lines.append("no kernel figures")
    lines += [f"note: {n}" for n in p.notes]
    if len(lines) > max_lines:
        cut = len(lines) - max_lines + 1
        lines = lines[: max_lines - 1] + [f"({cut} more lines cut)"]
    return "\n".join(lines)


# ---- assembling the views (pure: tested on the CPU with saved outputs) --------------------------------------------


def _join_key(name: str) -> str:
    """The name a kernel is matched by across tools. ncu spells an anonymous namespace `<unnamed>::`, c++filt
    (the compiler's report) `(anonymous namespace)::`: without this the H100 capture's gelu_chain_vec4
    lost its spill figures."""
    return short_name(name.replace("(anonymous namespace)", "<unnamed>"), 10_000)


def _by_short(resources: ResourceReport) -> dict[str, tuple[str, Resources]]:
    names = demangle(list(resources.kernels))
    return {_join_key(names[m]): (m, r) for m, r in resources.kernels.items()}


# Tensor-pipe instructions per warp below which a kernel is not taken to use tensor cores. On the H100
# (2026-12-06) gelu_chain's elementwise kernel counted exactly one per warp (8,448 for 1056 x 256 threads,
# beside one half-precision FMA per warp: a compiler-placed instruction, no matrix math), while an MMA
# kernel issues one per tile step per warp, hundreds over a GEMM's K loop.
TENSOR_PER_WARP_MIN = 4.0


def tensor_cores_ran(count: float | None, grid: float | None, block: float | None) -> bool:
    """Whether the tensor-pipe count (per launch) is matrix work rather than a stray instruction per warp."""
    if not count:
        return False
    warps = (grid or 0) * -(-(block or 0) // 32)
    return count > TENSOR_PER_WARP_MIN * warps if warps else True


def views_from_counters(
    rows: list[ncu_mod.KernelCounters], resources: ResourceReport, ceil: roof.Ceilings | None, precision: str
) -> list[KernelView]:
    known = _by_short(resources)
    out = []
    for k in ncu_mod.merge_launches(rows):
        g = k.get
        res = known.get(_join_key(k.name), ("", Resources()))[1]
        tensor = tensor_cores_ran(g(ncu_mod.TENSOR_METRIC), g("launch__grid_size"), g("launch__block_size"))
        v = KernelView(
            k.name,
            k.launches,
            k.duration_ns,
            g("dram__throughput.avg.pct_of_peak_sustained_elapsed"),
            g("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
            g("sm__warps_active.avg.pct_of_peak_sustained_active"),
            g("sm__maximum_warps_per_active_cycle_pct"),
            _int(g("launch__registers_per_thread")) if g("launch__registers_per_thread") is not None else res.registers,
            res.spill_stores,
            res.spill_loads,
            _int(g("launch__shared_mem_per_block_static"))
            if g("launch__shared_mem_per_block_static") is not None
            else res.smem_static,
            _int(g("launch__shared_mem_per_block_dynamic")),
            _int(g("launch__grid_size")),
            _int(g("launch__block_size")),
            k.stalls(),
            source="ncu",
        )
        v.verdict = roof.verdict(
            k.duration_ns, k.dram_bytes(), k.flops(), tensor, v.sm_pct, v.dram_pct, ceil, precision
        )
        out.append(v)
    return out


def views_from_events(rows: list[dict[str, Any]], resources: ResourceReport) -> list[KernelView]:
    known = _by_short(resources)
    out, seen = [], set()
    for r in rows:
        m, res = known.get(_join_key(r["name"]), ("", Resources()))
        seen.add(m)
        out.append(
            KernelView(
                r["name"],
                r["launches"],
                r["mean_us"] * 1e3,
                registers=res.registers,
                spill_stores=res.spill_stores,
                spill_loads=res.spill_loads,
                smem_static=res.smem_static,
                source="events" + (" + compiler" if m else ""),
            )
        )
    return out + views_from_compiler(resources, skip=seen)


def views_from_compiler(resources: ResourceReport, skip: set[str] | frozenset[str] = frozenset()) -> list[KernelView]:
    names = demangle(list(resources.kernels))
    return [
        KernelView(
            names[m],
            0,
            registers=r.registers,
            spill_stores=r.spill_stores,
            spill_loads=r.spill_loads,
            smem_static=r.smem_static,
            source="compiler only: not seen running" if skip else "compiler",
        )
        for m, r in resources.kernels.items()
        if m not in skip
    ]


def _int(v: float | None) -> int | None:
    return None if v is None else int(round(v))


# ---- running things (bounded in time, never raising) ---------------------------------------------------------------


@dataclass
class Ran:
    returncode: int | None  # None: timed out (killed) or could not start
    output: str
    seconds: float
    why: str = ""  # one line when returncode is None


def run_bounded(
    argv: list[str], *, timeout_s: float, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Ran:
    """Run a command in its own process group; killed whole at the timeout. Never raises."""
    from cuda_agent.sandbox.env import kill_group

    t0 = time.monotonic()
    if timeout_s <= 0:
        return Ran(None, "", 0.0, "no time left in the profile's budget")
    try:
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as e:
        return Ran(None, "", 0.0, f"could not start {Path(argv[0]).name}: {e.strerror or e}")
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out = proc.stdout.read() if proc.stdout else b""
        return Ran(
            None, out.decode(errors="replace")[-20000:], time.monotonic() - t0, f"timed out after {timeout_s:.0f} s"
        )
    return Ran(proc.returncode, out.decode(errors="replace")[-200000:], time.monotonic() - t0)


def _read_reply(path: Path) -> dict[str, Any] | None:
    try:
        if path.stat().st_size > 1 << 20:
            return None
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def _event_rows(reply: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for r in reply.get("kernels") or []:
        if (
            isinstance(r, dict)
            and isinstance(r.get("name"), str)
            and isinstance(r.get("launches"), int)
            and isinstance(r.get("mean_us"), int | float)
            and 0 <= r["mean_us"] < 1e9
            and r["launches"] > 0
        ):
            rows.append({"name": r["name"][:400], "launches": r["launches"], "mean_us": float(r["mean_us"])})
    return rows[:MAX_ROWS]


class _Session:
    """One profile's scratch dirs, sandbox and deadline."""

    def __init__(self, tmp: Path, settings: ProfileSettings, precision: str, device: str = "cuda"):
        from cuda_agent.eval.channel.children import child_env
        from cuda_agent.sandbox.box import profile_for

        self.tmp, self.settings, self.precision = tmp, settings, precision
        self.deadline = time.monotonic() + settings.timeout_s
        self.box, self.sandbox_word = (
            profile_for(settings.sandbox, device, 8 << 30, 4096) if settings.sandbox != "off" else (None, "off")
        )
        self.env = {**child_env(precision), "PYTHONPATH": _PKG_PARENT}
        self.n = 0

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def child(
        self, mode: str, extra: list[str], prefix: list[str] | None = None, cap_s: float | None = None
    ) -> tuple[Ran, dict[str, Any] | None]:
        self.n += 1
        rw = [self.tmp / f"io{self.n}", self.tmp / f"tmp{self.n}"]
        for d in rw:
            d.mkdir()
        out = rw[0] / "reply.json"
        argv = [*(prefix or []), sys.executable, *CHILD, mode, "--out", str(out), "--precision", self.precision, *extra]
        if self.box is not None:
            argv = self.box.wrap(argv, writable=rw)
        env = {**self.env, "TMPDIR": str(rw[1]), "HOME": str(rw[1])}  # ncu keeps its lock and settings there
        budget = self.left() if cap_s is None else min(cap_s, self.left())
        ran = run_bounded(argv, timeout_s=budget, env=env, cwd=rw[1])
        return ran, _read_reply(out)


def _ceilings(s: _Session, gpu_name: str, root: Path) -> tuple[roof.Ceilings | None, str]:
    if (c := roof.load(gpu_name, root)) is not None:
        return c, ", cached"
    ran, reply = s.child("ceilings", [], cap_s=90.0)
    c = roof.from_child(gpu_name, reply) if reply and reply.get("ok") else None
    if c is None:
        why = ran.why or (
            str(reply.get("error"))[:160] if reply else f"no reply (exit {ran.returncode}{_last(ran.output)})"
        )
        return None, f"not measured ({why}); verdicts use ncu's own peaks"
    roof.store(c, root)
    return c, f", measured now in {ran.seconds:.0f} s and cached"


def profile_workspace(
    workdir: str | Path, *, task: Any = None, settings: ProfileSettings | None = None
) -> ExpertProfile:
    st = settings or ProfileSettings()
    t0 = time.monotonic()
    try:
        p = _profile(Path(workdir), task, st)
    except Exception as e:  # noqa: BLE001 - a diagnostic must never end the caller's work; it says what broke
        p = ExpertProfile(
            counters="not available: the profile itself failed",
            notes=[f"internal error of the profile (not your fault): {type(e).__name__}: {e}"[:300]],
        )
    p.seconds = time.monotonic() - t0
    return p


def _profile(workdir: Path, task: Any, st: ProfileSettings) -> ExpertProfile:
    from cuda_agent.eval import gpu as gpu_mod
    from cuda_agent.eval.build.toolchain import toolchain
    from cuda_agent.eval.build.workspace import build
    from cuda_agent.eval.channel.children import scratch_dir
    from cuda_agent.task.workspace import cache_root, stage

    p = ExpertProfile()
    with scratch_dir() as tmp_s:
        tmp = Path(tmp_s)
        staged = stage(workdir, tmp / "ws", task)
        gpu = gpu_mod.detect()
        arch = gpu.capability if gpu else (gpu_mod.arch_from_env() or "9.0")
        t = time.monotonic()
        resources = compile_report(
            staged.root,
            toolchain(arch).nvcc_cmd,
            timeout_s=min(60.0, st.timeout_s / 2),
            cache_dir=cache_root() / "profile" / "ptxas",
        )
        p.phases_s["compiler"] = round(time.monotonic() - t, 2)
        if resources.note:
            p.notes.append(f"compiler report: {resources.note}")
        if gpu is None:
            p.counters = "not available: no CUDA GPU visible here (compiler report only)"
            p.kernels = views_from_compiler(resources)
            return p
        t = time.monotonic()
        b = build(staged.root, cache_root() / "build", arch=arch, timeout=max(st.timeout_s - 10, 10))
        p.phases_s["build"] = round(time.monotonic() - t, 2)
        if not b.ok or b.so_path is None:
            p.counters = "not available: the candidate does not build (run compile)"
            p.kernels = views_from_compiler(resources)
            return p
        s = _Session(tmp, st, staged.task.precision)
        if s.box is None and st.sandbox != "off":
            p.notes.append(f"sandbox: {s.sandbox_word}")
        load = [
            "--task",
            str(staged.root / "model.py"),
            "--model-new",
            str(staged.root / "model_new.py"),
            "--so",
            str(b.so_path),
            "--calls",
            str(st.calls),
        ]
        from cuda_agent.eval.timing import gpu_lock

        with gpu_lock.exclusive(gpu.key, st.gpu_lock_wait_s) as held:
            if not held.exclusive:
                p.notes.append("ran without the GPU's timing lock (another evaluation held it too long)")
            t = time.monotonic()
            p.ceilings, p.ceilings_note = _ceilings(s, gpu.name, cache_root() / "profile")
            p.phases_s["ceilings"] = round(time.monotonic() - t, 2)
            t = time.monotonic()
            rows, why = _counters(s, load, p) if st.use_ncu else ([], "off in the settings")
            p.phases_s["ncu"] = round(time.monotonic() - t, 2)
            if rows:
                p.counters = f"ncu --clock-control none (clocks untouched), {len(rows)} launch(es) profiled"
                p.kernels = views_from_counters(rows, resources, p.ceilings, staged.task.precision)
            else:
                p.counters = f"not available: {why}; below: event times (torch.profiler) and the compiler's report"
                t = time.monotonic()
                ran, reply = s.child("kernels", load)
                p.phases_s["events"] = round(time.monotonic() - t, 2)
                if reply and reply.get("ok"):
                    p.kernels = views_from_events(_event_rows(reply), resources)
                    p.call_ms = _finite(reply.get("call_ms"))
                    p.call_verdict = roof.call_verdict(p.call_ms, _int(_finite(reply.get("bytes_moved"))), p.ceilings)
                else:
                    err = ran.why or (
                        str(reply.get("error"))[:200]
                        if reply
                        else f"exit {ran.returncode}, no reply{_last(ran.output)}"
                    )
                    p.notes.append(f"event times: the candidate did not run under the profiler ({err})")
                    p.kernels = views_from_compiler(resources)
    return p


def _last(output: str) -> str:
    """The last line a child printed (its error, where it died before writing a reply), for a note."""
    tail = [ln.strip() for ln in output.splitlines() if ln.strip()]
    return f": {tail[-1][:160]}" if tail else ""


def _finite(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and 0 <= v < 1e18 else None


def _counters(s: _Session, load: list[str], p: ExpertProfile) -> tuple[list[ncu_mod.KernelCounters], str]:
    tool = ncu_mod.find_ncu()
    if tool is None:
        return [], "ncu (Nsight Compute) is not installed here"
    why = ""
    for metrics in (ncu_mod.METRICS, ncu_mod.CORE_METRICS):
        ran, reply = s.child("run", load, prefix=ncu_mod.ncu_command(tool, [], metrics))
        p.raw_ncu = ran.output[-100_000:]
        rows = ncu_mod.parse_csv(ran.output)
        if rows:
            return rows, ""
        why = (
            f"ncu {ran.why}"
            if ran.why
            else ncu_mod.failure(ran.output, ran.returncode)
            or (
                f"the candidate failed under ncu: {str(reply.get('error'))[:160]}"
                if reply and not reply.get("ok")
                else "ncu printed no counters"
            )
        )
        if "does not know a metric" not in why:
            break
    return [], why


def expert_text(workdir: str | Path, *, task: Any = None, settings: ProfileSettings | None = None) -> str:
    st = settings or ProfileSettings()
    return profile_workspace(workdir, task=task, settings=st).text(st.max_lines, st.max_kernels)


def enabled_by_env() -> bool:
    """`CUDA_AGENT_EXPERT_PROFILE=0` turns the agent tool's expert profile off (on by default)."""
    return os.environ.get("CUDA_AGENT_EXPERT_PROFILE", "1") not in ("0", "false", "no", "")
