"""Bridge from the pipeline (and `cuda-agent check`) to the static rules.

Contract: `static_findings` returns the findings of the static rules for the
agent-written sources (workspace form) or for one single-file solution, led by
the shape checks of `checks/solution_form.py` (what is not a solution at all: empty,
binary, unparseable, no ModelNew, a task file, no kernels; the untouched template with kernels is a warning).
`workspace_findings` adds the integrity findings of staging (a modified
protected file rejects; a missing pristine copy is only noted) to the static
ones, so the evaluator and `check` judge a workspace the same way.
"""

from __future__ import annotations

from cuda_agent.eval.checks import static as static_checks
from cuda_agent.eval.checks.solution_form import form_findings
from cuda_agent.eval.judge.result import Finding, Severity
from cuda_agent.task.workspace import Staged, template_text

# staging notes that are information, not a broken rule
_INFO_NOTES = {"no-pristine-task", "imported-layout"}


def static_findings(
    sources: dict[str, str],
    precision: str,
    *,
    single_file: bool = False,
    name: str = "model_new.py",
    precision_source: str = "",
    task_dtypes: tuple[str, ...] = (),
) -> list[Finding]:
    """`name`: how a single-file solution is named in findings (its file name for `check`);
    `precision_source`: where the task's precision came from (`Task.precision_source`), for the findings;
    `task_dtypes`: the floating dtypes of the task's tensors (`Task.dtypes`), never below the task."""
    form = form_findings(
        sources, single_file=single_file, name=name, template=None if single_file else template_text("model_new.py")
    )
    if single_file:
        rules = static_checks.check_single_file(
            sources["model_new.py"],
            precision=precision,
            name=name,
            precision_source=precision_source,
            task_dtypes=task_dtypes,
        )
    else:
        rules = static_checks.check_sources(
            sources, precision=precision, precision_source=precision_source, task_dtypes=task_dtypes
        )
    if any(f.file == name for f in form):
        # the file cannot hold a solution: the static rules' syntax warning would say it again, as a warning
        rules = [f for f in rules if not (f.rule == "syntax-error" and f.file == name)]
    return form + rules


def workspace_findings(staged: Staged) -> list[Finding]:
    findings = [
        Finding(rule, msg, Severity.WARN if rule in _INFO_NOTES else Severity.REJECT, file)
        for rule, file, msg in staged.findings
    ]
    task = staged.task
    return findings + static_findings(
        staged.sources, task.precision, precision_source=task.precision_source, task_dtypes=task.dtypes
    )
