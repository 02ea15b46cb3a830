"""Plain-text rendering of an `EvalResult` (for the CLI and the agent's tools).

Contract: `result_text` returns a short, stable, human-readable report: status
line, times and speedups when measured, findings, failed checks, and the tail
of the compiler or child log when something failed. No colour codes, so the
same text can go to a terminal or into an LLM context.
"""

from __future__ import annotations

from cuda_agent.eval.judge.result import NOT_SCORED, EvalResult, Status
from cuda_agent.eval.timing import baseline_set


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g} ms"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}x"


def result_text(r: EvalResult, log_chars: int = 3000) -> str:
    # a run that stopped before correctness (compile phase, no GPU, env_error) has no verdict to state
    checked = r.correct or r.status not in (Status.OK, *NOT_SCORED)
    lines = [
        f"status: {r.status.value}    reward: {'-' if r.reward is None else r.reward}    "
        f"correct: {r.correct if checked else 'not checked'}"
    ]
    if r.message:
        lines.append(f"message: {r.message}")
    if r.time_ms is not None:
        # the p10-p90 spread first: it bounds the rounds by default, and one outlier call in a thousand
        # can put the CV at hundreds of percent on a timing whose median it did not move
        robust = f"spread {r.timing.spread:.1%}, " if r.timing and r.timing.spread is not None else ""
        cv = f" ({robust}cv {r.timing.cv:.1%}, n={r.timing.n})" if r.timing else ""
        if r.timing and r.timing.hold_ms and r.timing.enqueue_ms is not None:
            # device time is what counts; the host's share is shown so a slow forward is visible
            cv += f"; host enqueue {r.timing.enqueue_ms:.3g} ms per call, not counted"
        lines.append(f"candidate:     {_ms(r.time_ms)}{cv}")
        lines.append(f"eager:         {_ms(r.eager_ms)}    speedup {_x(r.speedup_vs_eager)}")
        lines.append(f"torch.compile: {_ms(r.compile_ms)}    speedup {_x(r.speedup_vs_compile)}")
        lines += baseline_set.lines(r)  # extra baselines and "vs best" (issue 32); none with the default set
        if r.trusted_ms is not None:  # the evaluator's own clock (trusted_time): it decides
            tol = f", tolerance {r.trusted_tol:.1%}" if r.trusted_tol is not None else ""
            lines.append(
                f"evaluator's clock ({r.trusted_mode or '?'}): {_ms(r.trusted_ms)} per call vs eager "
                f"{_ms(r.trusted_eager_ms)}, torch.compile {_ms(r.trusted_compile_ms)} (calls alone, the loop's "
                f"{_ms(r.trusted_loop_ms)} taken out{tol})"
            )
        if r.reported_ms is not None and r.time_ms is not None and abs(r.reported_ms - r.time_ms) > 1e-6 * r.time_ms:
            lines.append(
                f"reported by the candidate's own process: {_ms(r.reported_ms)} (its own CUDA events, shown "
                "only: the candidate's time above is the evaluator's clock's, charged its tolerance)"
            )
        if r.unstable:
            lines.append("UNSTABLE: the timing spread stayed high; these figures and the reward may be off")
        if r.gpu_wait_s >= 1:
            lines.append(f"waited {r.gpu_wait_s:.1f} s for the GPU (another evaluation was timing)")
    if r.checks:
        worst = max((c.rel_l2_err or 0.0) for c in r.checks)
        ok = sum(c.passed for c in r.checks)
        lines.append(f"checks: {ok}/{len(r.checks)} passed, worst relative L2 error {worst:.2e}")
    for f in r.findings:
        where = f"{f.file}:{f.line}" if f.file and f.line else (f.file or "")
        lines.append(f"finding [{f.severity.value}] {f.rule} {where}: {f.message}")
    if r.gpu or r.torch:
        lines.append(f"gpu: {r.gpu or 'none'}    torch: {r.torch}    precision: {r.precision}")
    if r.status not in (Status.OK, Status.NO_GPU) and r.log.strip():  # env_error too: the log shows what is missing
        log = r.log.strip()
        if len(log) > log_chars:
            log = "[...]\n" + log[-log_chars:]
        lines.append("log:\n" + log)
    return "\n".join(lines)
