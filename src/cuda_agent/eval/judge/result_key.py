"""The key of the evaluator's result cache: everything that decides a verdict.

Contract: `result_key(...)` returns one string that changes whenever any input that can change
an `EvalResult` changes:
- the evaluator's own code and templates (`evaluator_fingerprint`, from the pipeline);
- the pristine task (its hash) and the candidate's agent-written files (the candidate hash);
- the findings the parent made before running anything: staging (a protected file of this
  workspace that differs from the pristine copy) and the static checks. Two workspaces with the
  same agent files but different protected files therefore never share a verdict: the tampered
  one's "rejected / protected-file-modified" is not served to the clean one (issue 17), and a
  clean verdict is not served to a tampered one;
- the GPU name, the torch version, the phase (with the sanitizer lane);
- the toolchain (compiler versions, include and library dirs: installing a header changes a
  compile verdict) and a build arch requested through the environment;
- every `EvalConfig` field that can change a verdict or a number (counts, tolerances of the
  timing protocol, budgets, defences, sandbox, device, arch). Fields that only say how to
  run (cache switches, spare children, compiler parallelism) are left out.

Not guaranteed: that nothing outside these inputs matters. The driver, clocks and other load on
the GPU change times; a cached time is the time measured when it was stored (`--fresh` re-measures).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os

from cuda_agent.eval import gpu as gpu_mod
from cuda_agent.eval.build.toolchain import toolchain_id
from cuda_agent.eval.config import EvalConfig
from cuda_agent.eval.judge.result import Finding

# EvalConfig fields that cannot change a result (how to run, not what to measure)
NOT_DECIDING = frozenset(
    {"phase", "use_cache", "reuse_results", "spare_children", "jobs", "gpu_lock_wait_s", "retry_unstable"}
)


def result_key(
    *,
    evaluator: str,
    task_hash: str,
    candidate_hash: str,
    findings: list[Finding],
    gpu: str | None,
    torch_version: str | None,
    cfg: EvalConfig,
) -> str:
    lane = cfg.phase + ("+sanitize" if cfg.sanitize else "")
    settings = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in NOT_DECIDING}
    decided_by = {
        "findings": sorted((f.rule, f.severity.value, f.file or "", f.line or 0, f.message) for f in findings),
        "config": settings,
        "toolchain": toolchain_id(),
        "arch_env": gpu_mod.arch_from_env(),
        "test_hijack": os.environ.get("CUDA_AGENT_TEST_HIJACK"),  # the red team's switch changes what the child does
    }
    digest = hashlib.sha256(json.dumps(decided_by, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return f"result/{evaluator}/{task_hash}/{candidate_hash}/{gpu}/{torch_version}/{lane}/{digest}"
