"""Which phase a long evaluation in this process is in, for a display on a terminal.

Contract: `phase(name)` tells the current listener (if any) that `name` started; `listening(fn)`
installs `fn` for the duration of a `with` block (one listener per process; the CLI's eval and
lint-task use it to show "compile", "reference", "verify", "timing", ... with a spinner and the
elapsed time). Without a listener `phase` does nothing, so the evaluator's callers that want no
display (pool workers, the agent's tools, `--json`, pipes) pay one attribute read.
`LABELS` turns the pipeline's phase keys into words for people.

Not guaranteed: that every phase is announced; a phase that runs inside a child without the
parent waiting on it shows as the phase the parent waits on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

LABELS = {  # short: one terminal line holds the verb, the label, a spinner and the time
    "compile": "compile (nvcc, torch binding; cached)",
    "reference": "reference (task's Model on secret inputs)",
    "load": "load the candidate",
    "verify": "verify on fresh inputs",
    "compare": "verify on fresh inputs",
    "timing": "timing",
    "shape_probe": "shape probe",
    "baseline_eager": "baselines (eager, torch.compile)",
    "controls": "negative controls",
}

_listener: Callable[[str], None] | None = None


def phase(name: str) -> None:
    if _listener is not None:
        _listener(name)


@contextmanager
def listening(fn: Callable[[str], None]) -> Iterator[None]:
    global _listener
    previous, _listener = _listener, fn
    try:
        yield
    finally:
        _listener = previous
