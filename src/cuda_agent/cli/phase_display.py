"""A one-line live display of the phase a long command is in (eval, lint-task).

Contract: `showing_phases(verb, enabled)` is a context manager; while it is active and
enabled, every `cuda_agent.eval.progress.phase(name)` replaces one transient line on stderr
with a spinner, "<verb>: <what the phase does>" and the elapsed time, and the line is gone
when the block ends. `enabled_for(json_output)` is true only when stdout and stderr are both
terminals and no JSON was asked for, so pipes, files, `--json` and the agent's tools get no
extra bytes.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


def enabled_for(json_output: bool) -> bool:
    return not json_output and sys.stdout.isatty() and sys.stderr.isatty()


@contextmanager
def showing_phases(verb: str, enabled: bool) -> Iterator[None]:
    if not enabled:
        yield
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from cuda_agent.eval.progress import LABELS, listening

    bar = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=Console(stderr=True, force_terminal=True),
        transient=True,
    )
    with bar:
        tid = bar.add_task(f"{verb}: starting", total=None)
        with listening(lambda name: bar.update(tid, description=f"{verb}: {LABELS.get(name, name.replace('_', ' '))}")):
            yield
