"""The tracing child: turns task sources into op graphs (`opgraph.trace_source`) on the meta device.

Started by `tracing` through `eval.channel.processes.Child` (`python -m
cuda_agent.synth.trace_child --fd-in A --fd-out B`), inside the evaluator's
sandbox: composed code may come from an LLM, and tracing executes it (the
module, `Model.__init__`, `get_inputs`, `forward`). One JSON command per line
in, one JSON reply per line out:
- `ready`: an empty reply, once torch is imported and one built-in task has
  been traced (tracing's first call imports some 800 modules, `torch._dynamo`
  among them, for about 3 s: paid before any task's SIGALRM budget runs, since
  an alarm inside that import left it half-initialised and every later task in
  the child failed with a circular-import error);
- `trace` {source, name, timeout_s}: `{"graph": ...}`, or `ok: false` with the
  error (the task raised, needs data on the meta device, or ran past
  `timeout_s`: SIGALRM, with `timed_out: true`: the parent restarts the child,
  whose state the interrupted task may have left anywhere).
One child traces many tasks in turn, each in a fresh module namespace. Not
guaranteed: isolation between the tasks of one child (a task that patches
torch changes what later ones trace; the filter screens for mistakes, not for
an adversary) or honest replies (its code runs here).
Imports only the standard library, torch and `synth.opgraph`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import warnings
from typing import Any

from cuda_agent.synth.opgraph import TraceError, trace_source


class _Timeout(BaseException):  # not an Exception: the task's own handlers must not swallow it
    pass


def _alarm(*_: Any) -> None:
    raise _Timeout


def cmd_trace(msg: dict[str, Any]) -> dict[str, Any]:
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, float(msg.get("timeout_s", 30.0)))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = trace_source(str(msg["source"]), f"<{msg.get('name', 'task')}>")
    except TraceError as e:
        return {"ok": False, "error": str(e)[:600]}
    except _Timeout:
        return {"ok": False, "error": f"tracing ran past {msg.get('timeout_s', 30.0)} s", "timed_out": True}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return {"ok": True, "graph": graph}


WARM_UP = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.softmax(torch.relu(self.fc(x)).sum(dim=1, keepdim=True) * x, dim=-1)


def get_inputs():
    return [torch.randn(2, 4)]


def get_init_inputs():
    return []
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--role", default="trace")
    ap.add_argument("--fd-in", type=int, required=True)
    ap.add_argument("--fd-out", type=int, required=True)
    a = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace_source(WARM_UP, "<warm-up>")  # the lazy imports, outside any task's budget
    for line in os.fdopen(a.fd_in, "rb"):
        msg = json.loads(line)
        cmd = msg.get("cmd")
        if cmd == "exit":
            break
        try:
            reply = cmd_trace(msg) if cmd == "trace" else {"ok": True}
        except BaseException as e:  # noqa: BLE001 - whatever the task raises is its verdict
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"[:600]}
        os.write(a.fd_out, (json.dumps(reply) + "\n").encode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
