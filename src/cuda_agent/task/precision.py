"""The precision of a task that declares none: the floating-point dtypes of its own tensors.

Contract: `infer_precision(source)` returns an `Inferred` (one of `taskfile.DEFAULT_TOLERANCE`'s
precisions and a one-line account of where it came from, which findings and the CLI print). The
rule: the lowest floating-point precision among the task's inputs (`get_inputs()`), init inputs,
parameters and buffers (`Model(*get_init_inputs())`) and the outputs of one `forward`, ordered
bf16 < fp16 < fp32 < fp64 (complex dtypes count as their parts; fp8 counts as bf16, the lowest the
evaluator knows). The lowest, because the candidate must read and write that dtype natively: a
bf16 input in an fp32 task would make every honest kernel "lowered precision". A task mixing
precisions says so and which it chose. A task without any floating-point tensor (indices only)
keeps the fp32 rules for whatever float work it has.

How: a source that names no floating dtype but float32 (no `bfloat16`, `half`, `float64`, ...,
nor numpy, anywhere in its text) is fp32 at once, with nothing run; that is most tasks. Otherwise the task is
run once in a subprocess (`dtype_probe.py`) on meta tensors, every device it names redirected, so
no memory is allocated however large its tensors (it falls back to a capped CPU build). The answer
is kept in memory and in the cache (`$CUDA_AGENT_CACHE/precision/`, keyed by the source's hash, this
module's version and the torch version), so a workspace's evaluations pay for the probe once. Where
the probe cannot run the task at all (or torch is missing), the dtypes the source names on its syntax
tree decide (`torch.bfloat16`, `.half()`, "float16": the lowest named half precision), else fp32.

`Inferred.dtypes` are the floating dtypes seen (torch names): a task whose own tensors are bf16 needs
bf16 loads and stores whatever its precision, and the static checks allow them (`Task.dtypes`).

Not guaranteed: that the task runs (the evaluator's reference run says that), or that a dtype
computed only from data (a dtype read from a file) is seen.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.task.cache_dir import CacheDirError, cache_root

PROBE = Path(__file__).with_name("dtype_probe.py")
VERSION = "1"  # bump when the rule or the probe changes: the disk cache is keyed on it
TIMEOUT_S = 120.0
ORDER = ("bf16", "fp16", "fp32", "fp64")  # lowest first
# a source whose text matches none of these names no floating dtype but float32
# (numpy: its arrays default to float64, so a tensor made from one is float64 without a name)
OTHER_DTYPE = re.compile(
    r"\b(bfloat16|bf16|float16|half|fp16|float64|double|fp64|float8\w*|complex\w*|cfloat|cdouble|"
    r"chalf|e4m3\w*|e5m2\w*|numpy|from_numpy)\b"
)
GROUPS = (("inputs", "inputs"), ("init_inputs", "init inputs"), ("parameters", "parameters"), ("buffers", "buffers"))
DEFAULT = "default: the task names no floating dtype but float32"
TORCH_NAME = {
    "half": "float16",
    "double": "float64",
    "float": "float32",
    "chalf": "complex32",
}  # aliases -> dtype names


@dataclass(frozen=True)
class Inferred:
    precision: str
    source: str  # "inferred from inputs: bfloat16 x2", "default: ...", ...
    dtypes: tuple[str, ...] = ()  # the floating dtypes of the task's tensors (torch names), where seen


def precision_of(dtype: str) -> str | None:
    """The precision a torch dtype name ("bfloat16", "complex64", ...) counts as; None for non-floats."""
    if dtype.startswith("float8") or dtype.startswith("float4"):
        return "fp8"
    return {
        "bfloat16": "bf16",
        "float16": "fp16",
        "half": "fp16",
        "float32": "fp32",
        "float": "fp32",
        "float64": "fp64",
        "double": "fp64",
        "complex32": "fp16",
        "complex64": "fp32",
        "complex128": "fp64",
    }.get(dtype)


def _rank(p: str) -> int:
    return -1 if p == "fp8" else ORDER.index(p)


def _listing(counts: dict[str, int]) -> str:
    return ", ".join(f"{d} x{n}" for d, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def decide(probe: dict) -> Inferred:
    """The precision from a probe's dtype counts (the rule in the module docstring); pure."""
    parts: list[str] = []
    found: dict[str, list[str]] = {}  # precision -> dtypes of it seen
    dtypes: set[str] = set()
    for key, label in (*GROUPS, ("outputs", "outputs")):
        counts = probe.get(key) or {}
        new = False
        for d in counts:
            p = precision_of(d)
            if p is not None:
                dtypes.add(d)
                new = new or p not in found
                found.setdefault(p, [])
                if d not in found[p]:
                    found[p].append(d)
        if counts and (key != "outputs" or new):  # outputs are named only where they add a precision
            parts.append(f"{label}: {_listing(counts)}")
    seen = "; ".join(parts) or "no tensors"
    if not found:
        return Inferred("fp32", f"default: no floating-point tensors ({seen}), fp32 rules for any float work")
    lowest = min(found, key=_rank)
    chosen = "bf16" if lowest == "fp8" else lowest
    notes = []
    if len(found) > 1:
        mixed = "/".join(sorted(found, key=_rank))
        notes.append(
            f"mixed {mixed}: {chosen}, the lowest, as the kernel must handle {'/'.join(found[lowest])} natively"
        )
    if lowest == "fp8":
        notes.append("fp8 counts as bf16, the lowest precision the evaluator knows")
    if probe.get("stage") == "cpu":
        notes.append("built on the CPU, meta tensors failed")
    return Inferred(
        chosen, f"inferred from {seen}" + (f" ({'; '.join(notes)})" if notes else ""), tuple(sorted(dtypes))
    )


def named_in_source(source: str) -> tuple[str, list[str]] | None:
    """The lowest half precision the syntax tree names (torch.bfloat16, .half(), "float16") and the
    names of that precision it uses; None where it names none."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    names: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute):
            names.add(n.attr)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            names.add(n.value.removeprefix("torch."))
    half = {x: p for x in names if (p := precision_of(x)) in ("fp8", "bf16", "fp16")}
    if not half:
        return None
    lowest = min(half.values(), key=_rank)
    return ("bf16" if lowest == "fp8" else lowest), sorted(x for x, p in half.items() if p == lowest)


_memo: dict[str, Inferred] = {}


def infer_precision(source: str) -> Inferred:
    """The precision of an undeclared task (module docstring): memoised, cached on disk."""
    if not OTHER_DTYPE.search(source):
        return Inferred("fp32", DEFAULT)
    key = hashlib.sha256(source.encode()).hexdigest()[:24]
    if key in _memo:
        return _memo[key]
    disk = _disk_path(key)
    got = _read(disk)
    if got is None:
        probe, error = run_probe(source)
        if probe is not None:
            got = decide(probe)
            _write(disk, got)
        else:
            named = named_in_source(source)
            why = f"the task does not run on meta or CPU tensors: {error}"
            got = (
                Inferred(
                    named[0],
                    f"inferred from the dtypes the source names: {', '.join(named[1])}; {why}",
                    tuple(sorted({TORCH_NAME.get(x, x) for x in named[1]})),
                )
                if named
                else Inferred("fp32", f"default; {why}")
            )
    _memo[key] = got
    return got


def run_probe(source: str, timeout_s: float = TIMEOUT_S) -> tuple[dict | None, str]:
    """Run `dtype_probe.py` on the task in a fresh process with no GPU visible: (counts, "") or (None, why)."""
    with tempfile.TemporaryDirectory(prefix="cuda-agent-dtypes-") as tmp:
        task, out = Path(tmp) / "task.py", Path(tmp) / "dtypes.json"
        task.write_text(source)
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        try:
            p = subprocess.Popen(
                [sys.executable, str(PROBE), str(task), str(out)],
                cwd=tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as e:
            return None, f"cannot start python: {e}"
        try:
            _, err = p.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            return None, f"no answer in {timeout_s:g} s"
        try:
            got = json.loads(out.read_text())
        except (OSError, ValueError):
            tail = err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit status {p.returncode}"]
            return None, tail[0][:300]
    if not isinstance(got, dict) or "error" in got:
        return None, str(got.get("error") if isinstance(got, dict) else got)
    return got, ""


def _disk_path(key: str) -> Path | None:
    from importlib import metadata

    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = "none"
    try:
        return cache_root() / "precision" / f"{key}-v{VERSION}-torch{torch_version}.json"
    except CacheDirError:
        return None


def _read(path: Path | None) -> Inferred | None:
    if path is None:
        return None
    try:
        d = json.loads(path.read_text())
        if d["precision"] in ORDER and isinstance(d["source"], str) and all(isinstance(x, str) for x in d["dtypes"]):
            return Inferred(d["precision"], d["source"], tuple(d["dtypes"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _write(path: Path | None, got: Inferred) -> None:
    if path is None:
        return
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"precision": got.precision, "source": got.source, "dtypes": list(got.dtypes)}))
        tmp.replace(path)
