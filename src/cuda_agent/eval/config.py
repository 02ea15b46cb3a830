"""Settings of one evaluation, with the defaults of design.md section 2.

Contract: plain data, no behaviour. Every field has a default a user can rely
on; the CLI exposes the common ones. Phases: "compile" (static checks and
build), "verify" (+ correctness), "profile" (+ timing and reward; the default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Phase = Literal["compile", "verify", "profile"]
PHASES: tuple[Phase, ...] = ("compile", "verify", "profile")


@dataclass
class EvalConfig:
    phase: Phase = "profile"
    # correctness
    n_correctness: int = 5  # input sets, each from a fresh secret seed
    # timing
    n_warmup: int = 5
    n_timed: int = 50  # timed calls per round (median taken)
    max_cv: float = 0.05  # re-measure while the round's spread is above this
    # the spread max_cv bounds: "p10p90" ((p90 - p10) / (2.563 median), the default: not moved by a few
    # outlier calls, which cost short kernels whole extra rounds without moving the median; on the H200
    # (2026-12-04) it took diag_matmul's evaluations from 1-3 rounds to 1 and the defences' cost from
    # +21 % to +9 %) or "cv" (std / mean, the rule before; timing.time_calls). The cache keys name it.
    round_spread: Literal["cv", "p10p90"] = "p10p90"
    max_rounds: int = 3
    n_timing_sets: int = 2  # input sets rotated through during timing, outputs re-checked
    # time budgets, seconds, per phase
    compile_timeout: float = 300.0
    load_timeout: float = 120.0
    correctness_timeout: float = 120.0
    timing_timeout: float = 300.0
    baseline_timeout: float = 600.0
    # caches
    use_cache: bool = True  # build cache and baseline cache
    reuse_results: bool = True  # return the stored result of an identical candidate (same evaluator, GPU, torch)
    # "cuda" evaluates on the GPU. "cpu" runs the same parent/child pipeline on
    # the CPU with host-clock timing: it exists to test the harness where no GPU
    # is (CI); its times say nothing about kernels.
    device: str = "cuda"
    compile_baseline: bool = True  # time torch.compile of the reference as well as eager
    # The baselines reported (eval.timing.baseline_set): eager and torch.compile default always (the paper's and the
    # reward's); "max-autotune" and "cuda-graph" add torch.compile(mode="max-autotune-no-cudagraphs") and eager
    # replayed from a CUDA graph, timed like eager (events), cached, reported with a speedup "vs best", never rewarded.
    baselines: tuple[str, ...] = ("eager", "compile")
    # build
    arch: str | None = None  # e.g. "9.0"; None: TORCH_CUDA_ARCH_LIST, else the GPU's, else 9.0
    jobs: int = 0  # parallel compiler processes; 0 = number of CPUs
    # runtime defences (runtime_checks, timing, speed_of_light, sandbox)
    runtime_guards: bool = True  # ATen op log and thread census around the candidate's forward
    fresh_timing_inputs: bool = True  # a new input set per timed call (timing.time_calls)
    n_checked_timed: int = 3  # random timed calls whose outputs are checked
    side_stream_guard: bool = True  # re-time with a device sync when host time >> event time
    bandwidth: float | None = None  # bytes/s for the speed-of-light flag; None: known per GPU, else measured
    sandbox: str = "auto"  # "auto": user+net+pid namespaces and rlimits when the probe works; "off"
    sandbox_max_file_bytes: int = 8 << 30  # RLIMIT_FSIZE of the candidate child
    sandbox_max_procs: int = 4096  # RLIMIT_NPROC of the candidate child (not enforced for uid 0)
    # the evaluator's clock (trusted_time): the time that counts is the one the parent's clock confirms;
    # its tolerances come from the bursts' own spread (trusted_time.TOL_FLOOR..TOL_CAP), not from here
    trusted_clock: bool = True  # off only to measure what it costs (benchmarks: the defences' cost)
    # bursts as CUDA graphs where the task allows (trusted_time); False: the Python loop everywhere (coarser
    # for short kernels, never less safe). A switch for a GPU or driver where graph capture misbehaves.
    clock_graphs: bool = True
    # Flush L2 before each call of a burst, as the event timing does (trusted_time: "like with like"). Off
    # until a GPU session has measured it: on the H100 (2026-12-05) the bursts, whose calls read inputs the
    # draws had just written (partly still in L2), put an honest memory-bound kernel 3-6 % faster against
    # torch.compile than the events did, and that disagreement is what a lie can hide in.
    clock_flush: bool = False
    # Time the baselines' and the loop's bursts afresh in every evaluation (right after the candidate's process
    # is killed) instead of once per task and GPU. Off until measured: on two H100s (2026-12-05) one task's
    # cached torch.compile net differed by 6.7 % (0.0459 vs 0.0489 ms) while each measurement's looks agreed
    # within 1-3 %, so a cached baseline's drift moves every candidate's verdict on that machine.
    clock_fresh_baselines: bool = False
    # "rank1": digest each burst output as v^T X w (child_burst), reading the output once, instead of a dense
    # 2 x n weight GEMV that also reads W (H100, 2026-12-05: the draws and dense digests cost 0.168 ms a call
    # beside a 0.046 ms kernel, so the clock's net was a small difference of large numbers). Off until measured.
    clock_digest: str = "dense"
    # "fast": a burst's draws (the task's get_inputs) take their float normals and uniforms from a counter-based
    # hash (child.hashed), bound by memory, instead of torch's Philox and accurate Box-Muller, bound by arithmetic;
    # with clock_digest="hash" (signs from the same hash, one read of the output in its own dtype) the loop
    # is about its memory traffic. On the H200 (2026-12-06) the loop cost about 3x its traffic (relu 2^23:
    # 0.090 ms a call beside a 0.02 ms kernel; silu_mul_bf16 0.69 ms beside 0.09 ms), and that is what the
    # clock's spread between evaluations scales with. Off until a GPU has measured it (clock-placement).
    clock_draws: str = "torch"
    # Flush L2 between each burst call and its digest, on every side (the loop too), so that every digest
    # reads its output from memory. Off until measured: on the H100 (2026-12-05) diag_matmul's net came out
    # 7.6x below its event time, under its speed-of-light floor, while the baselines' matched theirs: a
    # call's digest read the output it had just written from L2, the loop's digest a stored one from DRAM,
    # so a memory-bound call with a large output was credited that read.
    clock_cold_digest: bool = False
    # False only for the red team's runtime lane: static REJECT findings and the post-build symbol check are
    # recorded, not applied, so that the run-time defences (above all the evaluator's clock) are seen alone
    static_gate: bool = True
    shape_probe: bool = True  # one more call with the batch-like dim doubled (catches hardcoded shapes)
    sanitize: bool = False  # compute-sanitizer memcheck + racecheck over one call (slow; `eval --sanitize`)
    sanitize_timeout: float = 900.0  # per check: load + one call under the sanitizer
    # After the evaluation, start the next one's two children (eval.channel.children), so that their start-up
    # (2-3 s on an H200) overlaps the caller's idle time. For long-lived callers: the agent's
    # tools, pool workers; a one-shot `cuda-agent eval` would start children it never uses.
    spare_children: bool = False
    # Timed sections (candidate and baseline timing and bursts) hold an exclusive lock per physical
    # GPU across all processes (eval.timing.gpu_lock); past this wait the evaluation times anyway, with a warning.
    gpu_lock_wait_s: float = 900.0
    # Re-run an evaluation whose timing stayed unstable (EvalResult.unstable) this many times and keep
    # the steadiest; bench and the agent's tools set 1, a one-shot `cuda-agent eval` shows it as is.
    retry_unstable: int = 0


# The CPU lane's quick settings: its times mean nothing (a host-only extension), so few timed calls, one
# round and no torch.compile baseline. RL's CPU scoring, the tests and the RL smoke script all start here.
CPU_QUICK: dict[str, bool | int] = {"compile_baseline": False, "n_timed": 10, "n_warmup": 3, "max_rounds": 1}


def cpu_lane(**overrides) -> EvalConfig:
    """An EvalConfig for the CPU lane with CPU_QUICK's settings, then `overrides`."""
    return EvalConfig(**{"device": "cpu", **CPU_QUICK, **overrides})


# The evaluator's clock's opt-ins by short name, as the benchmarks' and gpu_check's `--clock` take them.
CLOCK_OPT_INS = ("flush", "fresh", "rank1", "cold", "hash", "fast")


def clock_opt_ins(names: str) -> dict[str, bool | str]:
    """EvalConfig's fields for the clock's opt-ins named comma-separated ("" for none): flush ->
    clock_flush, fresh -> clock_fresh_baselines, rank1 -> clock_digest="rank1", hash -> clock_digest="hash",
    cold -> clock_cold_digest, fast -> clock_draws="fast". A name not among CLOCK_OPT_INS, or both digests,
    is a ValueError that names it."""
    opts = {o for o in names.split(",") if o}
    if bad := opts - set(CLOCK_OPT_INS):
        raise ValueError(f"unknown --clock opt-in(s) {', '.join(sorted(bad))}; choose from {', '.join(CLOCK_OPT_INS)}")
    if {"rank1", "hash"} <= opts:
        raise ValueError("--clock takes one digest: rank1 or hash, not both")
    return {
        "clock_flush": "flush" in opts,
        "clock_fresh_baselines": "fresh" in opts,
        "clock_digest": "rank1" if "rank1" in opts else "hash" if "hash" in opts else "dense",
        "clock_cold_digest": "cold" in opts,
        "clock_draws": "fast" if "fast" in opts else "torch",
    }
