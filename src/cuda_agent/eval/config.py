"""Settings of one evaluation, with the defaults of design.md section 2.

Contract: plain data; the one behaviour is `clock_loop`, which resolves the clock's "auto" burst loop
for this machine. Every field has a default a user can rely on; the CLI exposes the common ones.
Phases: "compile" (static checks and build), "verify" (+ correctness), "profile" (+ timing and reward;
the default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cuda_agent.eval.channel.messages import DIGESTS, DRAWS

Phase = Literal["compile", "verify", "profile"]
PHASES: tuple[Phase, ...] = ("compile", "verify", "profile")


def light_loop_unavailable() -> str | None:
    """None when this machine can build the clock's lighter loop (shared.lightloop), else why not."""
    from cuda_agent.eval.shared.lightloop import unavailable  # imports torch: only where a GPU default is resolved

    return unavailable()


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
    # The burst loop's digest and draws (child.hashed; resolved by `clock_loop`). "auto", the default: on a GPU
    # the lighter loop, sign digests ("hash": +-out_i, signs from a keyed hash, one read of the output in its own
    # dtype) and counter-based draws ("fast": the task's float normals and uniforms from that hash, bound by
    # memory, not arithmetic), where this machine can build them (shared.lightloop), else "dense" and "torch";
    # on the CPU lane "dense" and "torch" (its host clock says nothing of kernels, and the hash in torch's
    # integer ops costs about 0.8 ms a draw). Why the lighter loop: the clock's spread between evaluations
    # scales with the loop that is taken out of every burst. On one H100 (2026-12-07, 202e74f) it took relu
    # 2^23's loop from 0.096 to 0.042 ms a call, the spread of one kernel's net between processes from 1.5 %
    # to 1.0 %, and the ~20 us honest/forger pairs' standard error from 7.3 % to 3.0 % (docs/throughput.md
    # "Call 11"). "dense" (a 2 x n standard-normal weight GEMV per output) and "torch" (torch's Philox and
    # accurate Box-Muller) are the loop before it; "rank1" (v^T X w of the output viewed as a matrix) did not
    # narrow the spread on the H100 (2026-12-05) and stays an opt-in.
    clock_digest: str = "auto"
    clock_draws: str = "auto"
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

    def clock_loop(self, probe: bool = True) -> tuple[str, str]:
        """The burst loop's (digest, draws) in force: "auto" resolved (see clock_digest), the rest as given;
        an unknown name is a ValueError that names it. `probe=False` takes the machine to be able to build
        the lighter loop (no torch import, no NVRTC: for starting the children before anything else)."""
        for field, value, allowed in (
            ("clock_digest", self.clock_digest, DIGESTS),
            ("clock_draws", self.clock_draws, DRAWS),
        ):
            if value not in (*allowed, "auto"):
                raise ValueError(f"{field}={value!r}: choose from auto, {', '.join(allowed)}")
        light = (
            self.device == "cuda"
            and "auto" in (self.clock_digest, self.clock_draws)
            and (not probe or light_loop_unavailable() is None)
        )
        digest = ("hash" if light else "dense") if self.clock_digest == "auto" else self.clock_digest
        draws = ("fast" if light else "torch") if self.clock_draws == "auto" else self.clock_draws
        return digest, draws


# The CPU lane's quick settings: its times mean nothing (a host-only extension), so few timed calls, one
# round and no torch.compile baseline. RL's CPU scoring, the tests and the RL smoke script all start here.
CPU_QUICK: dict[str, bool | int] = {"compile_baseline": False, "n_timed": 10, "n_warmup": 3, "max_rounds": 1}


def cpu_lane(**overrides) -> EvalConfig:
    """An EvalConfig for the CPU lane with CPU_QUICK's settings, then `overrides`."""
    return EvalConfig(**{"device": "cpu", **CPU_QUICK, **overrides})


# The evaluator's clock's settings by short name, as the benchmarks' and gpu_check's `--clock` take them: opt-ins
# (flush, fresh, cold), a digest (dense, rank1, hash) and draws (torch, fast); a digest or draws not named stay "auto".
CLOCK_OPT_INS = ("flush", "fresh", "cold", *DIGESTS, *DRAWS)


def clock_opt_ins(names: str) -> dict[str, bool | str]:
    """EvalConfig's fields for the clock's settings named comma-separated ("" for the defaults): flush ->
    clock_flush, fresh -> clock_fresh_baselines, cold -> clock_cold_digest, dense / rank1 / hash ->
    clock_digest, torch / fast -> clock_draws ("dense,torch": the loop before the lighter one). A name not
    among CLOCK_OPT_INS, or two digests or two draws, is a ValueError that names it."""
    opts = {o for o in names.split(",") if o}
    if bad := opts - set(CLOCK_OPT_INS):
        raise ValueError(f"unknown --clock name(s) {', '.join(sorted(bad))}; choose from {', '.join(CLOCK_OPT_INS)}")
    digest, draws = sorted(opts & set(DIGESTS)), sorted(opts & set(DRAWS))
    if len(digest) > 1 or len(draws) > 1:
        raise ValueError(
            f"--clock takes one digest ({', '.join(DIGESTS)}) and one draws ({', '.join(DRAWS)}): got {names}"
        )
    return {
        "clock_flush": "flush" in opts,
        "clock_fresh_baselines": "fresh" in opts,
        "clock_digest": digest[0] if digest else "auto",
        "clock_cold_digest": "cold" in opts,
        "clock_draws": draws[0] if draws else "auto",
    }
