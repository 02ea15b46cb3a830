"""Time a task's baselines ahead of any candidate, into the evaluator's own cache.

Why: on a fresh machine the first evaluation of each task spent 25-38 s timing eager PyTorch and
torch.compile (issue 16); an RL step or a benchmark that meets hundreds of tasks pays that on
its critical path. `cuda-agent baselines SUITE` pays it up front, spread over the pool's GPUs.

Contract: `precompute(task, cfg)` starts one reference child (our harness and the task only, as
in an evaluation), times eager and torch.compile with the same request an evaluation sends
(`timing.timed.time_request` without outputs) and their trusted-clock bursts, under the GPU's timing
lock, and stores them under the very keys an evaluation with `cfg` looks up
(`timing.timed.baseline_key`, `timing.timed.burst_baselines`). A task already cached costs one lookup.
Returns a `BaselineRecord`; a task that fails to run is a record with `error`, never an
exception.

Not guaranteed: that a later evaluation uses these figures: it does only with the same GPU
name, torch version, precision and timing settings (all in the key), as for any cached baseline.
"""

from __future__ import annotations

import secrets
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from cuda_agent.eval import gpu as gpu_mod
from cuda_agent.eval.channel import messages as P
from cuda_agent.eval.channel.children import child_env
from cuda_agent.eval.channel.exchange import Stop, ask
from cuda_agent.eval.channel.processes import Child
from cuda_agent.eval.config import EvalConfig
from cuda_agent.eval.judge.cache import KVCache
from cuda_agent.eval.judge.result import EvalResult, Status
from cuda_agent.eval.timing import clock as tt
from cuda_agent.eval.timing import gpu_lock, timed
from cuda_agent.task.taskfile import Task
from cuda_agent.task.workspace import cache_root


@dataclass
class BaselineRecord:
    task: str
    task_hash: str
    eager_ms: float | None = None
    compile_ms: float | None = None
    burst_eager_ms: float | None = None
    burst_compile_ms: float | None = None
    burst_loop_ms: float | None = None
    clock_kind: str = ""  # "graph" or "host" (trusted_time)
    extra_ms: dict[str, float] = field(default_factory=dict)  # EvalConfig.baselines beyond eager/compile (baseline_set)
    cached: bool = False
    seconds: float = 0.0
    error: str = ""


@dataclass
class BaselinesJob:
    """One task's baselines as a pool call job (`pool.jobs.CallJob`): `gpu_fraction` of a GPU (the
    timing itself holds the GPU alone through the timed section's lock)."""

    task: Task
    config: EvalConfig
    label: str = ""
    gpu_fraction: float = 1.0

    @property
    def device(self) -> str:
        return self.config.device

    def validate(self) -> None:
        if not self.task.source:
            raise ValueError(f"{self.label}: no task source")

    def run(self) -> BaselineRecord:
        return precompute(self.task, self.config)


def precompute(task: Task, cfg: EvalConfig) -> BaselineRecord:
    import time

    import torch

    t0 = time.monotonic()
    rec = BaselineRecord(task.name, task.hash)
    gpu = gpu_mod.detect() if cfg.device == "cuda" else gpu_mod.GPU("cpu", "0.0")
    if gpu is None:
        rec.error = "no CUDA GPU is visible"
        return rec
    res = EvalResult(
        status=Status.OK,
        reward=None,
        correct=False,
        gpu=gpu.name,
        torch=torch.__version__,
        precision=task.precision,
        task_hash=task.hash,
    )
    cache = KVCache(cache_root() / "eval.sqlite")
    req = timed.time_request(cfg, [secrets.randbits(62) for _ in range(cfg.n_timing_sets)], None)
    # untimed GPU work (the reference's set-up and probe run) shares the GPU only with other untimed work
    with (
        tempfile.TemporaryDirectory(prefix="cuda-agent-baselines-") as tmp,
        gpu_lock.untimed(gpu.key, cfg.gpu_lock_wait_s),
    ):
        root = Path(tmp)
        (root / "model.py").write_text(task.source)
        child = Child(
            "reference", cwd=root, env={**child_env(task.precision), "TMPDIR": tmp}, log_path=root / "reference.log"
        )
        try:
            setup = P.Setup(str(root / "model.py"), secrets.randbits(62), task.precision, cfg.device, str(root))
            ask(child, res, setup, cfg.load_timeout, "reference", P.SetupReply)
            run = ask(
                child,
                res,
                P.Run([secrets.randbits(62)], "probe", keep=True),
                cfg.correctness_timeout,
                "reference",
                P.RunReply,
            )
            in_bytes = max(r.in_nbytes for r in run.outputs)
            built = timed.build_compiled(cfg, res, child, req, cache)  # CPU-bound: not while holding the GPU alone
            kind = timed.clock_kind(child, res, cfg, cache) if cfg.trusted_clock else None
            with timed.section(res, cfg, gpu):
                timed.baselines(cfg, res, child, req, cache, built)
                base = (
                    timed.burst_baselines(child, res, cfg, in_bytes, cache, timed.baseline_key(cfg, res, req), kind)
                    if kind is not None
                    else None
                )
                timed.extra_baselines(cfg, res, child, req, cache)  # last: a failed graph capture may spoil the child
            if base is not None:  # the nets (per call, the loop taken out) an evaluation compares with
                fit = tt.fit_loop(base.loop_small, base.loop_large)
                rec.burst_eager_ms = round(tt.net_ms(base.eager, fit), 6)
                rec.burst_compile_ms = round(tt.net_ms(base.compiled, fit), 6) if base.compiled is not None else None
                rec.burst_loop_ms = round(fit.per_call_ms, 6)
                rec.clock_kind = kind or ""
        except Stop as stop:
            rec.error = stop.result.message or "the reference failed"
        finally:
            child.close()
    rec.cached = bool(res.cache.get("baselines"))
    rec.eager_ms = res.eager_timing.median_ms if res.eager_timing else None
    rec.compile_ms = res.compile_timing.median_ms if res.compile_timing else None
    rec.extra_ms = dict(res.baselines_ms)
    rec.seconds = round(time.monotonic() - t0, 2)
    return rec
