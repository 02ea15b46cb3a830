"""The agent's tools: JSON schemas, argument checking and dispatch.

Contract: `Toolbox.call(name, arguments_json)` never raises for anything the
model sends: bad JSON, an unknown tool, missing, extra or mistyped arguments,
and every tool failure come back as an `Observation` with `ok=False` and a
message that says how to fix the call. compile/verify/profile call the
injected `evaluator(workspace, phase)` (default: `cuda_agent.eval.api.
evaluate_workspace`) and return `render(result)` plus the reward; the
observation carries the `EvalResult` and the snapshot of the agent's files
that was evaluated. An exception from the evaluator is a harness bug: it is
reported to the model as an internal error and kept in `Observation.error`,
never scored as a candidate failure. The profile tool adds the expert profile
(`eval.profile.expert`: per kernel counters and a roofline verdict, never part of
the reward) after a correct evaluation: by default when the default evaluator is
used, else only with an injected `expert(workspace) -> text`;
`CUDA_AGENT_EXPERT_PROFILE=0` turns it off. Its failures are lines of its text.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.env.files import FileTools, ToolFailure
from cuda_agent.env.shell import Shell, ShellFactory, make_shell
from cuda_agent.eval.judge.result import EvalResult
from cuda_agent.task.workspace import read_agent_sources

Evaluator = Callable[[Path, str], EvalResult]
Renderer = Callable[[EvalResult], str]
Expert = Callable[[Path], str]
EVAL_PHASES = ("compile", "verify", "profile")


def _s(desc: str) -> dict[str, Any]:
    return {"type": "string", "description": desc}


def _i(desc: str) -> dict[str, Any]:
    return {"type": "integer", "description": desc}


def _b(desc: str) -> dict[str, Any]:
    return {"type": "boolean", "description": desc}


_EDIT = {
    "type": "object",
    "properties": {
        "old_string": _s("exact text to replace"),
        "new_string": _s("replacement"),
        "replace_all": _b("replace every occurrence"),
    },
    "required": ["old_string", "new_string"],
    "additionalProperties": False,
}
# name -> (description, properties, required)
SPECS: dict[str, tuple[str, dict[str, Any], list[str]]] = {
    "bash": (
        "Run a command in a persistent bash shell (cwd, variables persist) inside the workspace. No network. "
        "Long output is cut to its head and tail.",
        {
            "command": _s("the command line"),
            "timeout": _i("seconds before the command is killed (default 180, max 600)"),
        },
        ["command"],
    ),
    "read": (
        "Read a text file; lines come numbered (the numbers are not part of the file).",
        {
            "path": _s("file path, relative to the workspace"),
            "offset": _i("first line, from 1"),
            "limit": _i("number of lines (default 2000)"),
        },
        ["path"],
    ),
    "write": (
        "Create or overwrite a file with the given content. An existing file must be read first.",
        {"path": _s("file path, relative to the workspace"), "content": _s("the whole new content")},
        ["path", "content"],
    ),
    "edit": (
        "Replace an exact string in a file (read it first). old_string must occur exactly once unless replace_all.",
        {
            "path": _s("file path"),
            "old_string": _s("exact text to replace"),
            "new_string": _s("replacement text"),
            "replace_all": _b("replace every occurrence"),
        },
        ["path", "old_string", "new_string"],
    ),
    "multi_edit": (
        "Apply several exact-string edits to one file in order; all succeed or none is applied.",
        {"path": _s("file path"), "edits": {"type": "array", "items": _EDIT, "description": "the edits, in order"}},
        ["path", "edits"],
    ),
    "glob": (
        "List files matching a glob pattern (e.g. 'kernels/*.cu', '**/*.py').",
        {"pattern": _s("glob pattern"), "path": _s("directory to search from (default: workspace)")},
        ["pattern"],
    ),
    "grep": (
        "Search file contents with a Python regular expression; prints path:line:text.",
        {
            "pattern": _s("regular expression"),
            "path": _s("file or directory (default: workspace)"),
            "glob": _s("only files whose name matches this glob, e.g. '*.cu'"),
            "ignore_case": _b("case-insensitive"),
        },
        ["pattern"],
    ),
    "compile": (
        "Run the evaluator's static checks and build kernels/ and model_new.py. Same as tools/compile.",
        {},
        [],
    ),
    "verify": ("Compile, then check ModelNew against Model on fresh random inputs. Same as tools/verify.", {}, []),
    "profile": (
        "Compile, verify, then time ModelNew against eager PyTorch and torch.compile and give the reward; "
        "then an expert profile per kernel (DRAM and compute throughput against the GPU's measured peaks, "
        "occupancy, registers, spills, shared memory, top stalls, a roofline verdict). Same as tools/profile.",
        {},
        [],
    ),
    "finish": (
        "End the episode. The best correct version you profiled is kept, whatever the files hold now.",
        {"summary": _s("what you built and how fast it is")},
        [],
    ),
}
_TYPES = {"string": str, "integer": int, "boolean": bool, "array": list, "object": dict}


def tool_schemas() -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": n,
                "description": d,
                "parameters": {"type": "object", "properties": props, "required": req, "additionalProperties": False},
            },
        }
        for n, (d, props, req) in SPECS.items()
    ]


@dataclass
class Observation:
    text: str
    ok: bool = True
    result: EvalResult | None = None
    phase: str | None = None
    sources: dict[str, str] | None = None  # agent files as evaluated (model_new.py, kernels/...)
    finished: bool = False
    error: str | None = None  # traceback of a harness bug, for the trajectory
    elapsed_s: float = 0.0
    malformed: bool = False  # the call itself was unusable (unknown tool, bad arguments), not a tool failure


def _usage(name: str) -> str:
    _, props, req = SPECS[name]
    args = ", ".join(f"{k}{'' if k in req else '?'}: {v['type']}" for k, v in props.items())
    return f"{name}({args})"


def check_arguments(name: str, raw: str | dict | None) -> dict[str, Any]:
    """Parse and check arguments against the tool's schema; ToolFailure says how to fix them."""
    if name not in SPECS:
        raise ToolFailure(f"unknown tool {name!r}; available tools: {', '.join(SPECS)}")
    if isinstance(raw, dict):
        args = raw
    else:
        try:
            args = json.loads(raw or "{}")
        except json.JSONDecodeError as e:
            raise ToolFailure(
                f"arguments of {name} are not valid JSON ({e.msg} at char {e.pos}); send one JSON object, "
                f"e.g. {_usage(name)}"
            ) from None
    if not isinstance(args, dict):
        raise ToolFailure(f"arguments of {name} must be a JSON object: {_usage(name)}")
    _, props, req = SPECS[name]
    missing = [k for k in req if k not in args]
    extra = [k for k in args if k not in props]
    if missing or extra:
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"unknown {', '.join(extra)}"] if extra else []
        )
        raise ToolFailure(f"bad arguments for {name}: {'; '.join(parts)}. Expected {_usage(name)}")
    for k, v in args.items():
        want = _TYPES[props[k]["type"]]
        if not isinstance(v, want) or (want is int and isinstance(v, bool)):
            raise ToolFailure(
                f"argument {k} of {name} must be a {props[k]['type']}, got {type(v).__name__}. Expected {_usage(name)}"
            )
    return args


class Toolbox:
    def __init__(
        self,
        workspace: str | Path,
        *,
        evaluator: Evaluator | None = None,
        render: Renderer | None = None,
        shell: Shell | None = None,
        shell_factory: ShellFactory | None = None,
        bash_timeout_s: float = 180.0,
        expert: Expert | None = None,
    ):
        self.workspace = Path(workspace).resolve()
        self.files = FileTools(self.workspace)
        self.shell = shell or make_shell(self.workspace, bash_timeout_s, shell_factory)
        self._evaluator = evaluator
        self._render = render
        # the expert profile: the real one with the real evaluator; with an injected evaluator only if given
        self._expert = expert if expert is not None or evaluator is not None else _default_expert

    def schemas(self) -> list[dict[str, Any]]:
        return tool_schemas()

    def call(self, name: str, raw_arguments: str | dict | None) -> Observation:
        t0 = time.monotonic()
        try:
            args = check_arguments(name, raw_arguments)
        except ToolFailure as e:
            obs = Observation(f"error: {e}", ok=False, malformed=True)
        else:
            try:
                obs = self._dispatch(name, args)
            except ToolFailure as e:
                obs = Observation(f"error: {e}", ok=False)
        obs.elapsed_s = time.monotonic() - t0
        return obs

    def _dispatch(self, name: str, a: dict[str, Any]) -> Observation:
        f = self.files
        if name == "bash":
            timeout = a.get("timeout")
            if timeout is not None and not 1 <= timeout <= 600:
                raise ToolFailure("timeout must be between 1 and 600 seconds")
            r = self.shell.run(a["command"], timeout_s=timeout)
            code = "killed" if r.exit_code is None else str(r.exit_code)
            return Observation(
                f"{r.output}\n[exit code: {code}]" if r.output else f"[exit code: {code}]", ok=r.exit_code == 0
            )
        if name == "read":
            return Observation(f.read(a["path"], a.get("offset", 1), a.get("limit", 2000)))
        if name == "write":
            return Observation(f.write(a["path"], a["content"]))
        if name == "edit":
            return Observation(f.edit(a["path"], a["old_string"], a["new_string"], a.get("replace_all", False)))
        if name == "multi_edit":
            return Observation(f.multi_edit(a["path"], a["edits"]))
        if name == "glob":
            return Observation(f.glob(a["pattern"], a.get("path", ".")))
        if name == "grep":
            return Observation(f.grep(a["pattern"], a.get("path", "."), a.get("glob"), a.get("ignore_case", False)))
        if name in EVAL_PHASES:
            return self._evaluate(name)
        if name == "finish":
            return Observation("episode finished", finished=True)
        raise AssertionError(f"tool {name} has a schema but no implementation")

    def _evaluate(self, phase: str) -> Observation:
        return self.evaluate_at(self.workspace, phase, expert=True)

    def evaluate_at(self, workspace: Path, phase: str, *, expert: bool = False) -> Observation:
        """Evaluate the agent files of `workspace` (this one, or a copy) and describe the result;
        `expert`: a profile that came out correct gets the expert profile's text after it."""
        # Snapshot first: what is kept as "best" must be what was evaluated.
        sources = read_agent_sources(workspace)
        try:
            result = self._evaluate_fn()(workspace, phase)
            text = self._render_fn()(result)
        except Exception as e:  # noqa: BLE001 - a harness bug must not end a long episode; it is logged as such
            return Observation(
                f"internal error of the evaluator (not your fault, not scored): {type(e).__name__}: {e}",
                ok=False,
                phase=phase,
                error=traceback.format_exc(),
            )
        text = text.rstrip()
        if "reward:" not in text:
            text += f"\nreward: {result.reward}"
        if expert and phase == "profile" and result.correct and self._expert is not None:
            text += "\n\n" + self._expert_text(workspace)
        return Observation(
            text,
            ok=result.correct or result.status.value in ("ok", "no_gpu"),
            result=result,
            phase=phase,
            sources=sources,
        )

    def _expert_text(self, workspace: Path) -> str:
        assert self._expert is not None
        try:
            return self._expert(workspace).rstrip()
        except Exception as e:  # noqa: BLE001 - a diagnostic's bug must not cost the evaluation's text
            return f"expert profile: internal error (not your fault): {type(e).__name__}: {e}"[:300]

    def _evaluate_fn(self) -> Evaluator:
        if self._evaluator is None:
            from cuda_agent.eval.api import evaluate_workspace
            from cuda_agent.eval.config import EvalConfig

            # spare children: the next evaluation's start-up overlaps the model's turn
            self._evaluator = lambda ws, phase: evaluate_workspace(  # type: ignore[arg-type]
                ws, phase=phase, config=EvalConfig(spare_children=True, retry_unstable=1)
            )
        return self._evaluator

    def _render_fn(self) -> Renderer:
        if self._render is None:
            from cuda_agent.eval.api import render_text

            self._render = render_text
        return self._render

    def close(self) -> None:
        self.shell.close()


def _default_expert(workspace: Path) -> str:
    from cuda_agent.eval.profile.expert import enabled_by_env, expert_text

    return expert_text(workspace) if enabled_by_env() else "expert profile: off (CUDA_AGENT_EXPERT_PROFILE=0)"
