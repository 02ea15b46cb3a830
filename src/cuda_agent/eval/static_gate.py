"""Bridge from the pipeline to the static rules (`static_checks`).

Contract: `static_findings` returns the findings of the static rules for the
agent-written sources (workspace form) or for one single-file solution.
"""

from __future__ import annotations

from cuda_agent.eval import static_checks
from cuda_agent.eval.result import Finding


def static_findings(sources: dict[str, str], precision: str, *, single_file: bool = False) -> list[Finding]:
    if single_file:
        return static_checks.check_single_file(sources["model_new.py"], precision=precision, name="model_new.py")
    return static_checks.check_sources(sources, precision=precision)
