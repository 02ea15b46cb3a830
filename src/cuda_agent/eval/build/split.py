"""Split a load_inline CUDA source into a torch-free device unit and a host unit, so an edit rebuilds fast.

Why: a KernelBench-style CUDA string holds its kernels and the host wrapper that takes
`torch::Tensor`s and launches them, so every edit sent torch's headers through nvcc's three
passes (cudafe++, cicc, the host compiler): 80 s on the CPU machine, 51 s on the H200, for a
one-line change. Split at its top-level declarations, the kernels compile with nvcc and no torch
header (about 1 s), and the host wrapper with the host compiler against a precompiled
`torch/types.h` (about 2 s), its `kernel<<<grid, block, smem, stream>>>(args)` launches
rewritten into calls of typed launchers that the device unit defines
(`__ca_launch_<kernel>(grid, block, smem, stream, args)`), so argument conversions are the
kernel's own.

Contract: `split(cuda_text)` returns a `Split` (device source, host source, the kernels launched)
or the reason (a string) when the text is not plainly of that shape: a launch of a kernel template
or of an unknown name, top-level conditional compilation, namespaces or `extern` blocks, a kernel
parameter it cannot read (templates, function pointers, defaults, `__grid_constant__`), a macro
that launches, torch names in device code, `__CUDACC__`-style tests in host code, PYBIND11_MODULE.
The caller compiles both units and, when either fails, builds the original text as one unit as
before: a split never turns a solution that builds into one that does not, and compile errors a
user sees come from the original unit.

Not guaranteed: that the two units behave exactly as the single one in every corner of C++ (the
host unit sees `torch/types.h` where the original said `torch/extension.h`, and is compiled by the
host compiler, not through nvcc; a name the host code needs from device code fails to compile and
falls back). Nothing here runs candidate code; the parent only reads and compiles text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TORCH_INCLUDE = re.compile(r"^\s*#\s*include\s*[<\"](torch|ATen|c10|pybind11|Python\.h)")
_TORCHY = re.compile(r"\b(torch|at|c10|py|pybind11)::|\bTensor\b|\b(TORCH|AT|C10|PYBIND11)_[A-Z_]+\b")
_DEVICE_WORDS = re.compile(r"\b(__global__|__device__|__constant__|__shared__|__managed__)\b")
_CUDA_TESTS = re.compile(r"\b(__CUDACC__|__CUDA_ARCH__|__NVCC__|__CUDACC_RTC__)\b")
_TYPEISH = re.compile(
    r"^\s*(struct|class|union|enum|typedef|using|constexpr|static\s+constexpr|const\s|static\s+const\s)"
)
_LAUNCHER = "__ca_launch_"


@dataclass(frozen=True)
class Split:
    device: str
    host: str
    kernels: tuple[str, ...]  # kernels the host unit launches


@dataclass(frozen=True)
class _Kernel:
    name: str
    params: str  # verbatim parameter list
    names: tuple[str, ...]


def _blank(text: str) -> str:
    """The text with comments and string/char literals blanked (same length, newlines kept), for scanning."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out[i:j] = [ch if ch == "\n" else " " for ch in text[i:j]]
            i = j
        elif c in "\"'":
            if c == '"' and i > 0 and text[i - 1] == "R":  # raw string: give up on scanning it
                raise ValueError("raw string literal")
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out[i + 1 : j] = " " * (j - i - 1)
            i = j + 1
        else:
            i += 1
    return "".join(out)


def _chunks(text: str, scan: str) -> list[tuple[str, str]]:
    """Top-level declarations as (original text, scanned text): preprocessor lines, blocks ending at a
    depth-0 `}` (or the `;` after a type's `}`), and statements ending at a depth-0 `;`."""
    out: list[tuple[str, str]] = []
    i, n, start, depth = 0, len(scan), 0, 0
    while i < n:
        c = scan[i]
        if depth == 0 and c == "#" and scan[start:i].strip() == "":
            j = i
            while True:
                k = scan.find("\n", j)
                k = n if k < 0 else k
                if k > 0 and scan[k - 1] == "\\":
                    j = k + 1
                    continue
                break
            out.append((text[i:k], scan[i:k]))
            i = start = k
            continue
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
            if depth < 0:
                raise ValueError("unbalanced brackets")
            if depth == 0 and c == "}":
                head = scan[start:i]
                if not _TYPEISH.match(head) and not re.search(r"=\s*\{", head):
                    j = i + 1
                    while j < n and scan[j] in " \t\r\n":
                        j += 1
                    end = j + 1 if j < n and scan[j] == ";" else i + 1  # `template <..> struct S {...};`
                    out.append((text[start:end], scan[start:end]))
                    start = i = end
                    continue
        elif c == ";" and depth == 0:
            out.append((text[start : i + 1], scan[start : i + 1]))
            start = i + 1
        i += 1
    if depth != 0:
        raise ValueError("unbalanced brackets")
    if scan[start:].strip():
        raise ValueError("text after the last declaration")
    return [(t, s) for t, s in out if s.strip()]


def _top_commas(s: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def _kernel(scan_chunk: str, text_chunk: str) -> _Kernel:
    """A non-template `__global__` definition's name and parameters (ValueError when not plain)."""
    if re.match(r"\s*template\b", scan_chunk):
        raise ValueError("kernel template")
    bounds = r"(?:__launch_bounds__\s*\([^)]*\)\s*)?"
    m = re.search(rf"__global__\s+{bounds}(?:static\s+)?void\s+{bounds}([A-Za-z_]\w*)\s*\(", scan_chunk)
    if not m:
        raise ValueError("a __global__ declaration it cannot read")
    open_at, depth = m.end() - 1, 0
    for j in range(open_at, len(scan_chunk)):
        depth += {"(": 1, ")": -1}.get(scan_chunk[j], 0)
        if depth == 0:
            break
    params_scan = scan_chunk[open_at + 1 : j]
    if re.search(r"[<>()=]|__grid_constant__|\.\.\.", params_scan):
        raise ValueError(f"kernel {m.group(1)}: parameters it cannot read")
    params = text_chunk[open_at + 1 : j]
    if _blank(params) != params_scan:
        raise ValueError("comments in a kernel's parameters")
    names: list[str] = []
    for p in _top_commas(params_scan) if params_scan.strip() not in ("", "void") else []:
        ids = re.findall(r"[A-Za-z_]\w*", re.sub(r"\[[^\]]*\]", "", p))
        if len(ids) < 2 or ids[-1] in {
            "int",
            "float",
            "double",
            "char",
            "long",
            "short",
            "unsigned",
            "bool",
            "const",
            "__restrict__",
            "size_t",
        }:
            raise ValueError(f"kernel {m.group(1)}: an unnamed parameter")
        names.append(ids[-1])
    return _Kernel(m.group(1), " ".join(params.split()), tuple(names))


_LAUNCH = re.compile(r"\b([A-Za-z_]\w*)\s*(<[^<>;]*>)?\s*<<<")


def _rewrite_launches(text: str, kernels: dict[str, _Kernel], used: set[str]) -> str:
    """`k<<<cfg>>>(args)` -> `__ca_launch_k(grid, block, smem, stream, args)` in a host chunk."""
    scan = _blank(text)
    out, pos = [], 0
    for m in _LAUNCH.finditer(scan):
        name = m.group(1)
        if m.group(2) is not None:
            raise ValueError(f"a launch of a kernel template ({name})")
        if name not in kernels:
            raise ValueError(f"a launch of {name}, not a kernel defined in this source")
        end_cfg = scan.find(">>>", m.end())
        if end_cfg < 0:
            raise ValueError("unterminated launch configuration")
        cfg = _top_commas(text[m.end() : end_cfg])
        if not 2 <= len(cfg) <= 4 or not all(cfg):
            raise ValueError(f"a launch configuration of {name} it cannot read")
        cfg += ["0", "0"][: 4 - len(cfg)]
        k = end_cfg + 3
        while k < len(scan) and scan[k].isspace():
            k += 1
        if k >= len(scan) or scan[k] != "(":
            raise ValueError(f"a launch of {name} without arguments")
        args_empty = scan[k + 1 :].lstrip().startswith(")")
        out.append(text[pos : m.start()])
        out.append(f"{_LAUNCHER}{name}(" + ", ".join(cfg) + ("" if args_empty else ", "))
        pos = k + 1
        used.add(name)
    out.append(text[pos:])
    return "".join(out)


def split(cuda_text: str) -> Split | str:
    """The two units, or a string saying why this text is not split."""
    try:
        return _split(cuda_text)
    except ValueError as e:
        return str(e)


def _split(text: str) -> Split:
    scan = _blank(text)
    if "PYBIND11_MODULE" in scan:
        raise ValueError("the CUDA source defines a Python module")
    chunks = _chunks(text, scan)
    device: list[str] = []
    host: list[str] = []
    kernels: dict[str, _Kernel] = {}
    used: set[str] = set()
    first_host = None  # where the launchers are declared: before the first chunk that needs torch or launches
    for t, s in chunks:
        head = s.lstrip()
        if head.startswith("#"):
            if re.match(r"#\s*(if|ifdef|ifndef|elif|else|endif)\b", head):
                raise ValueError("top-level conditional compilation")
            if "<<<" in s:
                raise ValueError("a macro that launches a kernel")
            if _TORCH_INCLUDE.match(s):
                host.append(t)
            else:
                device.append(t)
                host.append(t)
            continue
        if re.match(r"(namespace|extern)\b", head):
            raise ValueError("a namespace or extern block")
        if _DEVICE_WORDS.search(s) and "<<<" in s:
            raise ValueError("a launch from device code")
        if re.match(r"using\s+namespace\s+(torch|at|c10)\b", head):
            host.append(t)
            continue
        if _DEVICE_WORDS.search(s):
            if _TORCHY.search(s):
                raise ValueError("torch names in device code")
            device.append(t)
            if "__global__" in s:
                if re.search(r"\b__host__\b", s):
                    raise ValueError("a __host__ __global__ declaration")
                try:
                    k = _kernel(s, t)
                except ValueError:
                    if re.match(r"\s*template\b", s):
                        continue  # a kernel template nobody on the host launches is fine
                    raise
                if k.name in kernels:
                    raise ValueError(f"kernel {k.name} declared twice")
                kernels[k.name] = k
            elif re.search(r"\b__host__\b", s):
                host.append(t)
            continue
        if _TORCHY.search(s) or "<<<" in s:
            if _CUDA_TESTS.search(s):
                raise ValueError("host code that tests __CUDACC__ or __CUDA_ARCH__")
            # a kernel is defined before its launch (a separate declaration is refused above), so it is known here
            first_host = len(host) if first_host is None else first_host
            host.append(_rewrite_launches(t, kernels, used))
            continue
        if _TYPEISH.match(head) or re.match(
            r"(static|inline)\b|template\s*<[^{;]*>\s*(struct|class|union|using)\b", head
        ):
            device.append(t)
            host.append(t)
        else:
            host.append(t)
    if not used or first_host is None:
        raise ValueError("no kernel launched from the host code")
    for name in sorted(used):
        k = kernels[name]
        sig = "dim3 __ca_grid, dim3 __ca_block, size_t __ca_smem, cudaStream_t __ca_stream" + (
            f", {k.params}" if k.names else ""
        )
        device.append(
            f"void {_LAUNCHER}{name}({sig}) {{ {name}<<<__ca_grid, __ca_block, __ca_smem, __ca_stream>>>"
            f"({', '.join(k.names)}); }}"
        )
    decls = [
        f"void {_LAUNCHER}{n}(dim3, dim3, size_t, cudaStream_t"
        + (f", {kernels[n].params}" if kernels[n].names else "")
        + ");"
        for n in sorted(used)
    ]
    host = [*host[:first_host], *decls, *host[first_host:]]
    dev_src = "#include <cuda.h>\n#include <cuda_runtime.h>\n" + "\n".join(device) + "\n"
    host_src = (
        "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
        + "\n".join("#include <torch/types.h>" if _is_extension_include(h) else h for h in host)
        + "\n"
    )
    return Split(dev_src, host_src, tuple(sorted(used)))


def _is_extension_include(line: str) -> bool:
    return re.match(r"\s*#\s*include\s*[<\"]torch/extension\.h[>\"]", line) is not None
