"""Build a single-file solution's `load_inline` extensions in the trusted parent, cached by content.

Why: KernelBench-style solutions compile their CUDA strings with
`torch.utils.cpp_extension.load_inline` when imported; inside the sandboxed candidate child
that happened in a private extension dir every time (64-79 s per evaluation on the H200, even
for an unchanged file). Here the parent reads the call's arguments from the syntax tree and
builds the same extension with the evaluator's split, content-cached build: the C++ unit
(declarations plus the generated bindings, against torch's headers) and the CUDA unit (nvcc)
compile in parallel, each object cached by its text and flags, so an unchanged file links from
the cache and an edit of the CUDA string recompiles that unit only. The candidate child's
`load_inline` then returns the prebuilt module for a call of that name (`child.main.cmd_setup`).
Every unit's object passes the post-build symbol check (`checks.symbols.check`, layout "single_file")
before the link, as a workspace's do (`build`); a rejection is a failed `BuildResult` with findings.

Contract: `find_calls(text)` returns one `InlineCall` per `load_inline(...)` call in the file
when every argument that shapes the build is static (string literals, lists of them,
concatenations, and module-level names bound once to such values; `functions` as a list or a
dict of names to docstrings), else None: the child then builds as before. `build_call(call,
cache_dir, arch, ...)` returns a `BuildResult` whose `so_path` imports as module `call.name`.
The generated sources follow `load_inline`'s documented behaviour: the C++ unit starts with
`#include <torch/extension.h>`, the CUDA unit with `<torch/types.h>`, `<cuda.h>` and
`<cuda_runtime.h>`, and `functions` become `m.def` bindings wrapped in
`torch::wrap_pybind_function` (with_pytorch_error_handling, the default).

Not guaranteed: byte-identical flags to `load_inline` (ours: -O3 and the evaluator's arch; the
call's extra flags are appended, `extra_ldflags` only `-l`/`-L` ones); calls that pass other
keyword arguments fall back to the child (`find_calls` returns None). Nothing here runs candidate code:
the sources are compiled, never executed, in the parent, and a call whose compiler flags would run a
program, load a plugin or read or write a file (`static_cpp_symbols.build_flag`: `-wrapper`, `-B`,
`-ccbin`, `-fplugin`, `@file`, ...) is rejected without running the compiler at all.
"""

from __future__ import annotations

import ast
import hashlib
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from cuda_agent.eval.build import split as inline_split
from cuda_agent.eval.build.toolchain import toolchain
from cuda_agent.eval.build.workspace import BuildResult, rejected_build
from cuda_agent.eval.channel.processes import run_command, tail
from cuda_agent.eval.checks import symbols
from cuda_agent.eval.checks.static_cpp_symbols import build_flag
from cuda_agent.eval.judge.result import Finding, Severity

_SHAPING = {
    "name",
    "cpp_sources",
    "cuda_sources",
    "functions",
    "extra_cflags",
    "extra_cuda_cflags",
    "extra_ldflags",
    "extra_include_paths",
    "with_cuda",
    "verbose",
    "build_directory",
    "with_pytorch_error_handling",
    "keep_intermediates",
    "is_python_module",
}
_POSITIONAL = ("name", "cpp_sources", "cuda_sources")


@dataclass(frozen=True)
class InlineCall:
    name: str
    cpp_sources: tuple[str, ...]
    cuda_sources: tuple[str, ...] = ()
    functions: tuple[tuple[str, str], ...] = ()  # (name, docstring)
    extra_cflags: tuple[str, ...] = ()
    extra_cuda_cflags: tuple[str, ...] = ()
    extra_ldflags: tuple[str, ...] = ()
    extra_include_paths: tuple[str, ...] = ()
    error_handling: bool = True
    notes: list[str] = field(default_factory=list, compare=False)


class _NotStatic(Exception):
    pass


def _module_constants(tree: ast.Module) -> dict[str, ast.AST]:
    """Names bound exactly once at module level (a name bound twice is not static)."""
    seen: dict[str, list[ast.AST]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            seen.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            seen.setdefault(node.target.id, []).append(node.value)
    return {k: v[0] for k, v in seen.items() if len(v) == 1}


def _value(node: ast.AST, consts: dict[str, ast.AST], depth: int = 0) -> object:
    if depth > 20:
        raise _NotStatic("too deep")
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (str, bool, int, float))):
        return node.value
    if isinstance(node, ast.Name) and node.id in consts:
        return _value(consts[node.id], consts, depth + 1)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(e, consts, depth + 1) for e in node.elts]
    if isinstance(node, ast.Dict) and all(k is not None for k in node.keys):
        return {
            _value(k, consts, depth + 1): _value(v, consts, depth + 1)
            for k, v in zip(node.keys, node.values, strict=True)
        }  # type: ignore[arg-type]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _value(node.left, consts, depth + 1), _value(node.right, consts, depth + 1)
        if isinstance(a, str) and isinstance(b, str) or isinstance(a, list) and isinstance(b, list):
            return a + b  # type: ignore[operator]
    if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
        return "".join(str(v.value) for v in node.values)  # type: ignore[attr-defined]
    raise _NotStatic(ast.dump(node)[:80])


def _strings(v: object, what: str) -> tuple[str, ...]:
    if v is None:
        return ()
    if isinstance(v, str):
        return (v,)
    if isinstance(v, list) and all(isinstance(s, str) for s in v):
        return tuple(v)
    raise _NotStatic(what)


def _is_load_inline(func: ast.AST) -> bool:
    return (isinstance(func, ast.Name) and func.id == "load_inline") or (
        isinstance(func, ast.Attribute) and func.attr == "load_inline"
    )


def find_calls(text: str) -> list[InlineCall] | None:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    consts = _module_constants(tree)
    calls: list[InlineCall] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _is_load_inline(node.func)):
            continue
        try:
            if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
                raise _NotStatic("*args or **kwargs")
            kw = {k.arg: k.value for k in node.keywords}
            if set(kw) - _SHAPING or len(node.args) > len(_POSITIONAL):
                raise _NotStatic("an argument this build does not reproduce")
            kw.update(dict(zip(_POSITIONAL, node.args, strict=False)))
            v = {k: _value(n, consts) for k, n in kw.items() if k is not None}
            fn = v.get("functions")
            funcs = (
                tuple((f, "") for f in _strings(fn, "functions"))
                if not isinstance(fn, dict)
                else tuple((str(k), str(d)) for k, d in fn.items())
            )
            name = v.get("name")
            if not isinstance(name, str) or not name.isidentifier():
                raise _NotStatic("name")
            if v.get("is_python_module", True) is not True:
                raise _NotStatic("is_python_module=False returns a path, not a module")
            calls.append(
                InlineCall(
                    name,
                    _strings(v.get("cpp_sources"), "cpp_sources"),
                    _strings(v.get("cuda_sources"), "cuda_sources"),
                    funcs,
                    _strings(v.get("extra_cflags"), "extra_cflags"),
                    _strings(v.get("extra_cuda_cflags"), "extra_cuda_cflags"),
                    _strings(v.get("extra_ldflags"), "extra_ldflags"),
                    _strings(v.get("extra_include_paths"), "extra_include_paths"),
                    bool(v.get("with_pytorch_error_handling", True)),
                )
            )
        except _NotStatic:
            return None
    if len({c.name for c in calls}) != len(calls):
        return None  # one name built twice with different sources: leave it to load_inline
    return calls or None


def sources(call: InlineCall) -> dict[str, str]:
    """The generated translation units: {"main.cpp": ..., "cuda.cu": ...} (no CUDA unit without CUDA sources)."""
    cpp = ["#include <torch/extension.h>", *call.cpp_sources]
    if call.functions:
        cpp.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
        for f, doc in call.functions:
            target = f"torch::wrap_pybind_function({f})" if call.error_handling else f
            cpp.append(f'  m.def("{f}", {target}, "{doc.replace(chr(34), chr(39))}");')
        cpp.append("}")
    out = {"main.cpp": "\n".join(cpp) + "\n"}
    if call.cuda_sources:
        out["cuda.cu"] = (
            "\n".join(
                ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>", *call.cuda_sources]
            )
            + "\n"
        )
    return out


def _commands(call: InlineCall, arch: str, src: Path, obj: Path) -> list[str]:
    import torch.utils.cpp_extension as ext

    tc = toolchain(arch)
    defines = [*_shared_defines(tc), f"-DTORCH_EXTENSION_NAME={call.name}"]
    incs = [f"-I{d}" for d in (*call.extra_include_paths, *tc.include_dirs)]
    if src.suffix == ".cu":
        major, minor = arch.split(".")
        # torch's headers use C++20 bit-field initialisers: warnings on every unit, silenced (3306, -Wc++20-extensions)
        return [
            tc.nvcc,
            "-O3",
            "-std=c++17",
            "-Xcompiler",
            "-fPIC",
            "-diag-suppress=3306",
            "-Xcompiler",
            "-Wno-c++20-extensions",
            *ext.COMMON_NVCC_FLAGS,
            f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}",
            *incs,
            *defines,
            *call.extra_cuda_cflags,
            "-c",
            str(src),
            "-o",
            str(obj),
        ]
    return [
        tc.cxx,
        "-O3",
        "-std=c++17",
        "-fPIC",
        "-w",
        *incs,
        *defines,
        *call.extra_cflags,
        "-c",
        str(src),
        "-o",
        str(obj),
    ]


# nvcc flags of a call that touch only device code: with others (-D, -Xcompiler, ...) the CUDA text
# is built as one unit, so that its host code sees exactly the flags it was written for
_DEVICE_ONLY_FLAG = (
    "-O",
    "--use_fast_math",
    "-use_fast_math",
    "--expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "-lineinfo",
    "--ptxas-options",
    "-maxrregcount",
    "--maxrregcount",
    "-std=c++17",
    "-arch",
    "-gencode",
    "--generate-code",
    "-Xptxas",
    "--resource-usage",
    "-res-usage",
)
PCH_HEADERS = ("torch/types.h", "cuda.h", "cuda_runtime.h", "c10/cuda/CUDAGuard.h", "c10/cuda/CUDAStream.h")
# KernelBench solutions often include it for the current stream; it needs the CUDA math libraries'
# headers (cusparse.h, ...), so where it does not compile the precompiled header goes without it
PCH_OPTIONAL = ("ATen/cuda/CUDAContext.h",)


def split_reason(call: InlineCall) -> str | None:
    """Why this call's CUDA text is built as one unit (None: it may be split, `build/split.py`)."""
    if os.environ.get("CUDA_AGENT_INLINE_SPLIT", "1") == "0":
        return "CUDA_AGENT_INLINE_SPLIT=0"
    prev = ""
    for f in call.extra_cuda_cflags:
        if not (f.startswith(_DEVICE_ONLY_FLAG) or prev == "-Xptxas"):
            return f"extra_cuda_cflags {f!r} may change host code"
        prev = f
    return None


def _host_cmd(call: InlineCall, arch: str, pch_dir: Path | None, src: Path, obj: Path) -> list[str]:
    """The host unit of a split: the host compiler, the precompiled torch header when there is one."""
    import torch.utils.cpp_extension as ext

    tc = toolchain(arch)
    base = _host_base(tc, ext)
    incs = [f"-I{d}" for d in call.extra_include_paths]
    pch = ["-I", str(pch_dir), "-include", "ca_pch.h"] if pch_dir is not None else []
    return [*base, *pch, *incs, "-c", str(src), "-o", str(obj)]


def _shared_defines(tc) -> list[str]:  # noqa: ANN001 - a Toolchain
    """The toolchain's defines less the extension's name, which is each call's own."""
    return [d for d in tc.defines if not d.startswith("-DTORCH_EXTENSION_NAME=")]


def _host_base(tc, ext) -> list[str]:  # noqa: ANN001 - Toolchain and the cpp_extension module
    return [
        tc.cxx,
        "-O3",
        "-std=c++17",
        "-fPIC",
        "-w",
        *(f"-I{d}" for d in tc.include_dirs),
        *_shared_defines(tc),
        *(f for f in ext.COMMON_NVCC_FLAGS if f.startswith("-D")),
    ]


def host_pch(cache_dir: Path, arch: str, deadline: float) -> Path | None:
    """The folder of `ca_pch.h` and its precompiled `.gch` for this toolchain, built once (under a lock, so
    concurrent evaluations build it once) and kept; with PCH_OPTIONAL where that compiles, else without;
    None when neither builds (the host unit then parses the headers itself). It is built with exactly
    the host unit's flags, which GCC requires."""
    import torch.utils.cpp_extension as ext

    tc = toolchain(arch)
    base = _host_base(tc, ext)
    for headers in ((*PCH_HEADERS, *PCH_OPTIONAL), PCH_HEADERS):
        d = _pch(cache_dir, tc.fingerprint, base, "".join(f"#include <{h}>\n" for h in headers), deadline)
        if d is not None:
            return d
    return None


def _pch(cache_dir: Path, fingerprint: str, base: list[str], header: str, deadline: float) -> Path | None:
    import fcntl

    key = hashlib.sha256((fingerprint + header + repr(base)).encode()).hexdigest()[:16]
    d = cache_dir / "pch" / key
    gch, failed = d / "ca_pch.h.gch", d / "failed"
    if gch.exists():
        return d
    if failed.exists():  # these headers do not compile with this toolchain: not tried again
        return None
    d.mkdir(parents=True, exist_ok=True)
    with open(d / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if gch.exists():
            return d
        if failed.exists():
            return None
        (d / "ca_pch.h").write_text(header)
        tmp = d / f"ca_pch.h.{os.getpid()}.{threading.get_ident()}.gch.tmp"
        r = run_command(
            [*base, "-x", "c++-header", str(d / "ca_pch.h"), "-o", str(tmp)],
            timeout=max(deadline - time.monotonic(), 5),
            cwd=d,
        )
        if r.returncode != 0:
            tmp.unlink(missing_ok=True)
            if not r.timed_out:  # a timeout says nothing about the headers
                failed.write_text(tail(r.output))
            return None
        os.replace(tmp, gch)
    return d


def build_call(
    call: InlineCall, cache_dir: Path, *, arch: str, timeout: float, use_cache: bool = True, check_symbols: bool = True
) -> BuildResult:
    """Compile the units in parallel (each cached by its text and command) and link `<name>.so`. The CUDA
    text is split into a device and a host unit where it can be (`build/split.py`); if either does not
    build, the text is built as one unit as load_inline would."""
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.monotonic()
    deadline = t0 + timeout
    # the compiler runs here, in the trusted parent, with the call's flags: one that runs a program
    # (-wrapper /bin/sh,-c,...), loads a plugin or touches a file would act before any check of the output,
    # so such a call is rejected unbuilt (the static checks reject it too; this holds where they were skipped)
    unsafe = [(f, b) for f in (*call.extra_cflags, *call.extra_cuda_cflags) if (b := build_flag(f))]
    if unsafe:
        findings = [
            Finding(
                rule,
                f"load_inline {call.name!r}: the flag {opt!r} makes the compiler run, load, read or write what no "
                f"check sees; nothing was compiled; instead: pass only flags that shape the compilation",
                Severity.REJECT,
                "model_new.py",
            )
            for _, (rule, opt) in unsafe
        ]
        return rejected_build(findings, [], time.monotonic() - t0, [])
    srcdir = cache_dir / "inline" / "src"
    objdir = cache_dir / "objects"
    srcdir.mkdir(parents=True, exist_ok=True)
    objdir.mkdir(parents=True, exist_ok=True)
    srcs = sources(call)
    kinds: dict[Path, str] = {}  # object -> "main.cpp" | "cuda.cu" | "device.cu" | "host.cpp"

    def unit(fname: str, text: str) -> tuple[Path, Path]:
        flags = (
            call.extra_cflags
            if fname == "main.cpp"
            else call.extra_include_paths
            if fname == "host.cpp"
            else call.extra_cuda_cflags
        )
        key = hashlib.sha256(
            (
                toolchain(arch).fingerprint
                + fname
                + text
                + repr(flags)
                + call.name
                + repr(call.extra_include_paths)
                + (repr((PCH_HEADERS, PCH_OPTIONAL)) if fname == "host.cpp" else "")
            ).encode()
        ).hexdigest()[:24]
        src = srcdir / f"{key}{Path(fname).suffix}"
        if not src.exists():
            src.write_text(text)
        obj = objdir / f"inline-{key}.o"
        kinds[obj] = fname
        return src, obj

    note = ""
    units = [unit("main.cpp", srcs["main.cpp"])]
    if "cuda.cu" in srcs:
        why = split_reason(call)
        sp = inline_split.split("\n".join(call.cuda_sources)) if why is None else why
        if isinstance(sp, inline_split.Split):
            units += [unit("device.cu", sp.device), unit("host.cpp", sp.host)]
            note = f"split: {len(sp.kernels)} kernel launcher(s), device and host units"
        else:
            units.append(unit("cuda.cu", srcs["cuda.cu"]))
            note = f"one CUDA unit: {sp}"

    def compile_one(u: tuple[Path, Path]) -> tuple[Path, int | None, str]:
        src, obj = u
        tmp = obj.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp.o")
        if kinds[obj] == "host.cpp":
            cmd = _host_cmd(call, arch, host_pch(cache_dir, arch, deadline), src, tmp)
        else:
            cmd = _commands(call, arch, src, tmp)
        r = run_command(cmd, timeout=deadline - time.monotonic(), cwd=srcdir)
        if r.returncode == 0:
            os.replace(tmp, obj)
        else:
            tmp.unlink(missing_ok=True)
        return obj, r.returncode, r.output

    def compile_all(us: list[tuple[Path, Path]]) -> list[tuple[Path, int | None, str]]:
        todo = [u for u in us if not (use_cache and u[1].exists())]
        rebuilt.extend(f"{call.name}:{kinds[o]}" for _, o in todo)
        with ThreadPoolExecutor(max_workers=3) as pool:
            return list(pool.map(compile_one, todo))

    rebuilt: list[str] = []
    results = compile_all(units)
    failed_split = [(o, out) for o, rc, out in results if rc != 0 and kinds[o] in ("device.cu", "host.cpp")]
    if failed_split:  # the original text, as one unit, gives the verdict and the errors a user should see
        first = next((ln for ln in failed_split[0][1].splitlines() if "error" in ln), "").strip()[:200]
        note = f"one CUDA unit: the split's {kinds[failed_split[0][0]]} did not build ({first})"
        units = [units[0], unit("cuda.cu", srcs["cuda.cu"])]
        results = [r for r in results if kinds[r[0]] == "main.cpp"] + compile_all(units[1:])
    logs: list[str] = []
    for obj, rc, out in results:
        what = "cpp_sources" if kinds[obj] == "main.cpp" else "cuda_sources"
        if rc != 0:
            logs.append(f"== {call.name} {what}: compile {'timed out' if rc is None else f'failed (exit {rc})'}\n{out}")
        elif out.strip():
            logs.append(f"== {call.name} {what}: warnings\n{out}")
    if any(rc != 0 for _, rc, _ in results):
        timed_out = any(rc is None for _, rc, _ in results)
        return BuildResult(False, None, tail("\n".join(logs)), time.monotonic() - t0, timed_out, False, rebuilt, note)
    # every unit holds the candidate's text: all are checked, against the set of a unit that defines a module
    objects = [("model_new.py", f"load_inline {call.name!r} {kinds[o]}", o) for _, o in units]
    bad = (
        symbols.check(objects, "single_file", cache_dir=cache_dir, arch=arch, deadline=deadline)
        if check_symbols
        else []
    )
    if bad:
        return rejected_build(bad, logs, time.monotonic() - t0, rebuilt, note)
    tc = toolchain(arch)
    ld = [f for f in call.extra_ldflags if f.startswith(("-l", "-L"))]
    link_key = hashlib.sha256(
        ("|".join(o.name for _, o in units) + "|" + " ".join(ld) + call.name).encode()
    ).hexdigest()[:24]
    so = cache_dir / "modules" / link_key / f"{call.name}.so"
    if use_cache and so.exists():
        return BuildResult(True, so, "\n".join(logs), time.monotonic() - t0, False, not rebuilt, rebuilt, note)
    so.parent.mkdir(parents=True, exist_ok=True)
    tmp_so = so.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp.so")
    cmd = tc.link_cmd([o for _, o in units], tmp_so, [])
    r = run_command([*cmd[:-2], *ld, *cmd[-2:]], timeout=max(deadline - time.monotonic(), 5), cwd=srcdir)
    if r.returncode != 0:
        tmp_so.unlink(missing_ok=True)
        logs.append(f"== {call.name}: link {'timed out' if r.timed_out else 'failed'}\n{r.output}")
        return BuildResult(False, None, tail("\n".join(logs)), time.monotonic() - t0, r.timed_out, False, rebuilt, note)
    os.replace(tmp_so, so)
    return BuildResult(True, so, tail("\n".join(logs)), time.monotonic() - t0, False, False, rebuilt, note)
