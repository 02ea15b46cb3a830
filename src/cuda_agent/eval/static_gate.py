"""Bridge from the pipeline (and `cuda-agent check`) to the static rules.

Contract: `static_findings` returns the findings of the static rules for the
agent-written sources (workspace form) or for one single-file solution.
`workspace_findings` adds the integrity findings of staging (a modified
protected file rejects; a missing pristine copy is only noted) to the static
ones, so the evaluator and `check` judge a workspace the same way.
"""

from __future__ import annotations

from cuda_agent.eval import static_checks
from cuda_agent.eval.result import Finding, Severity
from cuda_agent.task.workspace import Staged

# staging notes that are information, not a broken rule
_INFO_NOTES = {"no-pristine-task"}


def static_findings(sources: dict[str, str], precision: str, *, single_file: bool = False) -> list[Finding]:
    if single_file:
        return static_checks.check_single_file(sources["model_new.py"], precision=precision, name="model_new.py")
    return static_checks.check_sources(sources, precision=precision)


def workspace_findings(staged: Staged) -> list[Finding]:
    findings = [
        Finding(rule, msg, Severity.WARN if rule in _INFO_NOTES else Severity.REJECT, file)
        for rule, file, msg in staged.findings
    ]
    return findings + static_findings(staged.sources, staged.task.precision)
