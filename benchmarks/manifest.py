"""The named GPU measurements: what each runs, in what time, and which lines of its output are its figures.

Each measurement fits one 10-minute device call (`LIMIT_S` for its steps together, leaving the rest of
the call to the runner's start: the environment record and the carried wheels). A step is one command,
run from the repository root with `OUT` set to the step's own folder (so two steps that write the same
file name, gpu_check.json say, keep both); its `timeout_s` is enforced by the runner, which kills the
step's whole process group. `{py}` in a command is the runner's Python, `{out}` the step's folder.
`needs` names what must have been carried into the working tree (made on a CPU machine); without it
the measurement is reported "missing", not run. `headline` is a regular expression: the output lines
it matches are the figures the runner's table shows (all output, and every file a step writes, go into
the archive).

The history (which lettered mode of the old scripts/gpu-session.sh measured what, for which issue, and
the figures) is in docs/measurements.md; `modes` here only names the old modes each one replaces.
"""

from __future__ import annotations

from dataclasses import dataclass, field

LIMIT_S = 560  # a measurement's steps together; the device call's limit is 600 s


@dataclass(frozen=True)
class Step:
    id: str  # the step's folder in the archive: NAME/ID/
    argv: tuple[str, ...]
    timeout_s: int
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Measurement:
    name: str
    what: str
    issues: str
    modes: str  # the lettered modes of the old scripts/gpu-session.sh it replaces ("" when new)
    steps: tuple[Step, ...]
    headline: str = ""
    needs: tuple[str, ...] = ()

    @property
    def budget_s(self) -> int:
        return sum(s.timeout_s for s in self.steps)

    @property
    def scripts(self) -> list[str]:
        """The repository files its steps run (benchmarks/x.py, scripts/y.sh)."""
        return [a for s in self.steps for a in s.argv if a.startswith(("benchmarks/", "scripts/", "tests/"))]


def gpu_check(*flags: str) -> tuple[str, ...]:
    """scripts/gpu_check.py (examples, faults, red team, the defences' cost) with these flags."""
    return ("{py}", "scripts/gpu_check.py", *flags)


SKIP_ALL = ("--skip-faults", "--skip-redteam", "--skip-examples", "--skip-pytest")
GPU_CHECK_TABLE = r"^(hacks rejected|controls accepted|faults contained|examples keep|passed \d|failed: |defences|trusted clock|GPU held|timing rounds|  of them|  \S+: alone )"
BASELINE_ROWS = r"^(bench exit|\S+ \| [a-z_]+ \| )"  # benchmarks/baselines_all.py's last table
CLOCK_AB = (("none", ""), ("cold", "cold"), ("flush-cold", "flush,cold"))
# fresh: every evaluation times its own baselines and loop in its own reference process (a cached set is one
# process's); flush: L2 flushed before each burst call, as the events do (the 20 us pairs of 2026-12-06 fell
# into two clusters of nets, ~10 and ~12.3 us, uncorrelated between neighbouring runs: a per-process factor
# such as where the buffers sit, not a drift in time, is the first suspect)
# the loop before the lighter one (dense digests, torch's draws), the default on a GPU since 2026-12-07 (the lighter
# loop: counter-based draws and sign digests, eval/child/hashed.py), and each with every evaluation's own baselines
# and loop (rank-1 and the flush were measured: docs/throughput.md Call 10)
CLOCK_SPREAD = (("dense", "dense,torch"), ("light", ""), ("fresh", "dense,torch,fresh"), ("light-fresh", "fresh"))
X4_OPT_INS = (("none", ""), ("flush", "flush"), ("fresh", "fresh"), ("rank1", "rank1"), ("all", "flush,fresh,rank1"))


def _examples_under(clock: str, runs: int, *names: str) -> tuple[str, ...]:
    """gpu_check on these examples alone (and the release's single file), `runs` times each, under the
    clock's opt-ins `clock` (comma-separated; "" the default clock)."""
    return gpu_check(
        "--skip-faults",
        "--skip-redteam",
        "--skip-pytest",
        "--example-runs",
        str(runs),
        "--only",
        *names,
        "--clock",
        clock,
    )


def _relu_forgers(clock: str, factors: tuple[str, ...], out: str) -> tuple[str, ...]:
    return (
        "{py}",
        "benchmarks/forgery_redteam.py",
        "--tasks",
        "relu_scale",
        "--honest",
        "3",
        "--runs",
        "1",
        "--factors",
        *factors,
        "--no-static",
        "--shared",
        "0",
        "--clock",
        clock,
        "--out",
        "{out}/" + out,
    )


def _leak_pairs(clock: str, out: str) -> tuple[str, ...]:
    """benchmarks/clock_leak.py's 8 honest/forger (x0.9) pairs at ~20 us under the clock's opt-ins `clock`."""
    flags = ("--clock", clock) if clock else ()
    return (
        "{py}",
        "benchmarks/clock_leak.py",
        "--pairs",
        "8",
        "--sizes",
        "~20 us",
        "--factor",
        "0.9",
        *flags,
        "--out",
        "{out}/" + out,
    )


def _forgery_full(task: str) -> tuple[str, ...]:
    return ("{py}", "benchmarks/forgery_redteam.py", "--tasks", task, "--runs", "3", "--out", "{out}/forgery.json")


MEASUREMENTS: tuple[Measurement, ...] = (
    Measurement(
        "redteam",
        "the red-team corpus (tests/redteam): every hack rejected or reward -1, every honest control "
        "accepted; hacks 8 at once",
        "3, 12, 28",
        "G, M, N, R, X3",
        (Step("gpu_check", gpu_check("--skip-examples", "--skip-faults", "--skip-pytest", "--jobs", "8"), 520),),
        headline=GPU_CHECK_TABLE,
    ),
    Measurement(
        "faults",
        "the faulty and hostile fixtures (compile error, wrong, illegal address, hang, segfault, endless "
        "compile, huge output, fork bomb, network, write outside), each followed by a good evaluation",
        "3, 12",
        "A, H",
        (Step("gpu_check", gpu_check("--skip-examples", "--skip-redteam", "--skip-pytest"), 480),),
        headline=GPU_CHECK_TABLE,
    ),
    Measurement(
        "examples",
        "every example's solution 3 times alone, then 3 at once sharing the GPU, plus the single-file "
        "forms and the release layout: each keeps its reward",
        "2, 13, 28",
        "X7 (B, G: once)",
        (
            Step(
                "gpu_check",
                gpu_check(
                    "--skip-faults", "--skip-redteam", "--skip-pytest", "--example-runs", "3", "--example-shared", "3"
                ),
                560,
            ),
        ),
        headline=GPU_CHECK_TABLE,
    ),
    Measurement(
        "examples-quick",
        "every example's solution once (and the single-file forms, the release layout)",
        "2, 13, 28",
        "X1 (third part), B, S (diag_matmul)",
        # 200 s cut it after row_softmax_wide (H100, fresh machine, 0467285): each example's first run pays
        # its build and its baselines
        (Step("gpu_check", gpu_check("--skip-faults", "--skip-redteam", "--skip-pytest"), 320),),
        headline=GPU_CHECK_TABLE,
    ),
    Measurement(
        "gpu-tests",
        "pytest's gpu-marked tests (carry .whl from scripts/device-wheels.sh for the openai-bound ones)",
        "2, 3, 12",
        "B, H (pytest part), F, M, N, R (timing tests)",
        (Step("pytest", ("{py}", "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", "tests/"), 500),),
        headline=r"(passed|failed|error)",
    ),
    Measurement(
        "turnaround",
        "edit one .cu -> full result on every example (5 s idle before each edit, as an agent's turn), "
        "and the same result from two processes",
        "2",
        "D, E, F",
        (
            Step(
                "eval_turnaround",
                ("{py}", "benchmarks/eval_turnaround.py", "--naive", "0", "--edits", "3", "--think", "5"),
                520,
            ),
        ),
        headline=r"^(edit one \.cu|two processes)",
    ),
    Measurement(
        "concurrency",
        "one candidate timed alone, then 6 evaluations started together: the speedup's largest "
        "difference from the lone run (target <= 2 %)",
        "13",
        "I (first part), W (first part)",
        (Step("concurrent_timing", ("{py}", "benchmarks/concurrent_timing.py", "--n", "6"), 300),),
        headline=r"^max difference",
    ),
    Measurement(
        "single-file",
        "a KernelBench-style single-file solution: our cached, split build cold, unchanged and after "
        "3 edits of its CUDA string, against load_inline in a fresh process",
        "13",
        "I (second part), S",
        (Step("inline_compile", ("{py}", "benchmarks/inline_compile.py", "--edits", "3"), 370),),
        headline=r"^(edited CUDA|build:|kernelbench)",
    ),
    Measurement(
        "throughput",
        "evaluations per GPU-hour, serial against the pool at 3 per GPU, on the examples and the "
        "KernelBench mix: the mix's baselines first, then the measurement with every baseline cached",
        "16",
        "P (K1, K2, K3, L: earlier forms)",
        (
            Step(
                "baselines",
                (
                    "{py}",
                    "benchmarks/eval_throughput.py",
                    "--kernelbench",
                    ".kb",
                    "--only-baselines",
                    "--deadline-s",
                    "160",
                ),
                170,
            ),
            Step(
                "measure",
                (
                    "{py}",
                    "benchmarks/eval_throughput.py",
                    "--kernelbench",
                    ".kb",
                    "--export-cache",
                    "--deadline-s",
                    "380",
                ),
                390,
            ),
        ),
        headline=r"^(pool \(|timing, pool|unexpected|NOT COMPARABLE|total )",
        needs=(".kb",),
    ),
    Measurement(
        "defences-cost",
        "the wall time the defences add to one evaluation with spare children (diag_matmul, build "
        "and baselines cached), 8 evaluations per side",
        "3, 16",
        "O (E, H, L, M, N, Q, V: other settings)",
        (Step("gpu_check", gpu_check(*SKIP_ALL, "--overhead", "8", "--overhead-spares-only"), 300),),
        headline=GPU_CHECK_TABLE,
    ),
    Measurement(
        "defence-trace",
        "where an evaluation's seconds go with the defences on and off: every request to the two "
        "children timed, the median evaluation's timeline",
        "16",
        "Q, V",
        (Step("defence_trace", ("{py}", "benchmarks/defence_trace.py", "--n", "4", "--gap", "3", "--timeline"), 200),),
        headline=r"wall median",
    ),
    Measurement(
        "synthesis",
        "the synthesis filter's device stages on 200 candidates composed here (compose, then filter)",
        "14",
        "J",
        (
            Step(
                "synth_gpu",
                ("{py}", "benchmarks/synth_gpu.py", "-n", "200", "--deadline-s", "500", "--work", "{out}/synth"),
                555,
            ),
        ),
        headline=r"^(re-shaped|harness errors|CPU busy|total wall|kept|tasks)",
    ),
    Measurement(
        "synthesis-filter",
        "the filter alone on 200 candidates composed by an earlier `synthesis` on the GPU "
        "machine's torch (carry .synth-h200/candidates.jsonl from its archive)",
        "14",
        "J (with candidates carried)",
        (
            Step(
                "synth_gpu",
                (
                    "{py}",
                    "benchmarks/synth_gpu.py",
                    "-n",
                    "200",
                    "--candidates",
                    ".synth-h200/candidates.jsonl",
                    "--deadline-s",
                    "520",
                    "--jobs-per-gpu",
                    "10",
                    "--work",
                    "{out}/synth",
                ),
                555,
            ),
        ),
        headline=r"^(re-shaped|harness errors|CPU busy|total wall|kept|tasks)",
        needs=(".synth-h200/candidates.jsonl",),
    ),
    Measurement(
        "rl-step",
        "two PPO steps of `cuda-agent rl train` with the transformers rollout on the GPU and the pool "
        "scoring real kernels on the same GPU (carry .carry-rl from scripts/device-wheels.sh --rl)",
        "29",
        "",
        (Step("gpu_issue29", ("bash", "scripts/gpu_issue29.sh"), 555, env={"ISSUE29_LIMIT_S": "540"}),),
        headline=r"(step|kept|rollout s|exit)",
        needs=(".carry-rl",),
    ),
    Measurement(
        "lease-probe",
        "the leased evaluation path of RL on one GPU without verl: what Ray gives a CPU task, what a leased "
        "task sees in-process and in a fresh process, two real evaluations through RayPool(gpu_resource) "
        "(carry .carry-rl)",
        "29",
        "",
        (Step("gpu_lease_probe", ("bash", "scripts/gpu_lease_probe.sh"), 150),),
        headline=r"(verdict|relu_x\d|CUDA_VISIBLE|view_fixed|detect)",
        needs=(".carry-rl",),
    ),
    Measurement(
        "rl-smoke",
        "the RL smoke: the environment's episodes and TRL's trainer on the GPU (carry .whl for TRL)",
        "15",
        "J2",
        (Step("rl_gpu_smoke", ("{py}", "scripts/rl_gpu_smoke.py", "--out", "{out}"), 230),),
        headline=r"^(RESULT|FAIL)",
    ),
    Measurement(
        "clock-leak",
        "the evaluator's clock's leak per kernel size: what a forger gains at each size, the honest "
        "claim against the clock",
        "28",
        "X3 (first part), X5 (under the opt-ins)",
        (Step("clock_leak", ("{py}", "benchmarks/clock_leak.py", "--out", "{out}/leak.json"), 240),),
        headline=r"^\s*\d|^size",
    ),
    Measurement(
        "clock-leak-pairs",
        "the lie's effect at ~20 us told from the clock's noise: 8 honest and 8 forger (x0.9) evaluations "
        "of relu_scale, alternating; the difference of the means in standard errors",
        "28",
        "",
        (Step("clock_leak", _leak_pairs("", "leak_pairs.json"), 240),),
        headline=r"^size|^~",
    ),
    # The full red team is two calls since both tasks in one ran past 534 s (H100, 0467285): relu_scale
    # took about 400 s of it, linear_relu about 330 s. Each call judges its task's forgers against that
    # task's honest runs of the same call.
    Measurement(
        "forgery",
        "the forgery red team in full on the memory-bound workspace task (relu_scale): 8 factors x "
        "native/switch x 3 runs, the honest kernel 3 times and 3 sharing the GPU; the bar holds or fails",
        "28",
        "X2 (first task)",
        (Step("forgery_redteam", _forgery_full("relu_scale"), 560),),
        headline=r"^(BAR |  )",
    ),
    Measurement(
        "forgery-gemm",
        "the forgery red team in full on the single-file cuBLAS GEMM (linear_relu), as `forgery`",
        "28",
        "X2 (second task)",
        (Step("forgery_redteam", _forgery_full("linear_relu"), 560),),
        headline=r"^(BAR |  )",
    ),
    Measurement(
        "forgery-quick",
        "the forgery red team's factors 0.9, 0.8, 0.5 once, no sharing",
        "28",
        "X1 (second part)",
        (
            Step(
                "forgery_redteam",
                (
                    "{py}",
                    "benchmarks/forgery_redteam.py",
                    "--quick",
                    "--shared",
                    "0",
                    "--out",
                    "{out}/forgery_quick.json",
                ),
                200,
            ),
        ),
        headline=r"^(BAR |  )",
    ),
    Measurement(
        "clock-light",
        "the lighter loop (counter-based draws, sign digests: --clock hash,fast) against issue 28's bars: "
        "row_softmax_wide and silu_mul_bf16 3 times each (and the release's scale_add), then 8 honest and "
        "8 forger (x0.9) relu_scale evaluations at ~20 us, alternating",
        "28",
        "",
        (
            Step("examples-light", _examples_under("hash,fast", 3, "row_softmax_wide", "silu_mul_bf16"), 130),
            Step("clock_leak", _leak_pairs("hash,fast", "leak_pairs_light.json"), 240),
        ),
        headline=r"^(examples keep|  \S+: alone |  \S+: clock/events|passed \d|failed: |size|~)",
    ),
    Measurement(
        "clock-probe",
        "the graph-burst probe of the evaluator's clock per size: per-call wall time, spread, the "
        "events against the graph, the host loop",
        "28",
        "X1 (first part)",
        (Step("clock_probe", ("{py}", "benchmarks/clock_probe.py", "--out", "{out}/probe.json"), 150),),
        headline=r"^\s+\d+ ",
    ),
    Measurement(
        "clock-cold-ab",
        "the cold-digest A/B (EvalConfig.clock_cold_digest, alone and with the flush): diag_matmul, "
        "matmul_sum_scale and embedding_bag_sum twice each, then relu_scale honest x3 and forgers at 0.9",
        "28",
        "X8",
        tuple(
            Step(
                f"examples-{label}",
                _examples_under(clock, 2, "diag_matmul", "matmul_sum_scale", "embedding_bag_sum"),
                100,
            )
            for label, clock in CLOCK_AB
        )
        + tuple(Step(f"relu-{label}", _relu_forgers(clock, ("0.9",), "relu.json"), 70) for label, clock in CLOCK_AB),
        headline=r"^(BAR |passed \d|failed: )",
    ),
    Measurement(
        "clock-opt-ins",
        "the clock's bias against the events over its opt-ins (none, flush, fresh, rank1, all "
        "three): relu_scale honest x3 and forgers at 0.95 and 0.9",
        "28",
        "X4",
        tuple(
            Step(f"relu-{label}", _relu_forgers(clock, ("0.95", "0.9"), "relu.json"), 95) for label, clock in X4_OPT_INS
        ),
        headline=r"^BAR ",
    ),
    Measurement(
        "clock-placement",
        "is the clock's spread between evaluations where a burst's buffers sit? relu at 2^23 floats, 6 "
        "processes x 3 allocations, dense and rank-1 digests, the flush, and the lighter loop (counter-based "
        "draws, sign digest): the net's spread within an allocation, between allocations of one process, "
        "and between processes; the SM clock during each look; the loop's parts (draw, digest, flush) timed alone",
        "28",
        "",
        (
            Step(
                "clock_placement",
                ("{py}", "benchmarks/clock_placement.py", "--procs", "6", "--out", "{out}/placement.json"),
                300,
            ),
        ),
        headline=r"^(variant|dense|rank1|hash)",
    ),
    Measurement(
        "light-launch",
        "the host's cost of the lighter loop's launches: torch's kernel wrapper against the loop's own "
        "launcher (one draw, one sign digest, one relu_scale-like loop call), and that both digest alike",
        "28",
        "",
        (Step("light_launch", ("{py}", "benchmarks/light_launch.py", "--out", "{out}/launch.json"), 90),),
        headline=r"^(launcher|own |torch |one loop call|digests agree)",
    ),
    Measurement(
        "clock-spread",
        "the clock against the events where it spread most (H200, 2026-12-06): row_softmax_wide and "
        "silu_mul_bf16 3 times each, and the release's 4 us scale_add: the loop before the lighter one "
        "(--clock dense,torch), the lighter loop (the default), each with fresh baselines",
        "28",
        "",
        tuple(
            Step(
                f"examples-{label}",
                _examples_under(clock, 3, "row_softmax_wide", "silu_mul_bf16"),
                130,
            )
            for label, clock in CLOCK_SPREAD
        ),
        headline=r"^(examples keep|  \S+: alone |  \S+: clock/events|passed \d|failed: )",
    ),
    Measurement(
        "precision",
        "a bf16 task undeclared and declared (PRECISION) scores alike; the int64-indexed gather-sum",
        "34",
        "",
        (Step("gpu_issue34", ("bash", "scripts/gpu_issue34.sh"), 300),),
        headline=r"^undeclared bf16",
    ),
    Measurement(
        "expert-profile",
        "the expert profile (ncu counters, the compiler's report, roofline verdicts) on gelu_chain "
        "and linear_bias_relu, and those two with --baselines all",
        "32",
        "",
        (Step("gpu_issue32", ("bash", "scripts/gpu_issue32.sh"), 555),),
        headline=r"(verdict|exit)",
    ),
    Measurement(
        "expert-profile-each",
        "the expert profile's seconds per call on every bundled example (one evaluation, then two "
        "profiles each; the first measures the GPU's ceilings)",
        "32",
        "",
        (Step("gpu_issue32", ("bash", "scripts/gpu_issue32.sh", "--each"), 480),),
        headline=r"(verdict|exit)",
    ),
    Measurement(
        "baselines-examples",
        "every example's solution against each baseline (eager, compile, max-autotune, cuda-graph) and "
        "the best, through `cuda-agent bench --baselines all`, then its report",
        "32",
        "",
        (Step("baselines_all", ("{py}", "benchmarks/baselines_all.py", "examples", "--out", "{out}"), 400),),
        headline=BASELINE_ROWS,
    ),
    Measurement(
        "baselines-kb",
        "the throughput mix's 22 KernelBench level-1/2 solutions against each baseline and the best, "
        "as `baselines-examples` (resumable store: a cut run keeps its finished tasks)",
        "32",
        "",
        (
            Step(
                "baselines_all",
                ("{py}", "benchmarks/baselines_all.py", "kb", "--kernelbench", ".kb", "--out", "{out}"),
                555,
            ),
        ),
        headline=BASELINE_ROWS,
        needs=(".kb",),
    ),
    Measurement(
        "ray-pool",
        "`cuda-agent bench --ray` against the local pool over the throughput mix: evaluations per GPU-hour "
        "of each, and every outcome that differs (carry .kb and .carry-rl, whose Ray wheel is installed first)",
        "29",
        "",
        (Step("ray_pool", ("{py}", "benchmarks/ray_pool.py", "--out", "{out}"), 555),),
        headline=r"^(ray |ray is NOT|baselines:|bench |pool |local |outcomes that differ|  L\d)",
        needs=(".kb", ".carry-rl"),
    ),
)

BY_NAME = {m.name: m for m in MEASUREMENTS}
