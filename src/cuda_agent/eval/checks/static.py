"""Static checks of a candidate's sources: the first line of defence against reward hacking.

Contract: `check_sources({relpath: text}, precision=...)` and `check_single_file(text, ...)`
return `Finding`s; they never import, compile or execute the candidate, and they (and the modules
below) import only the standard library, `cuda_agent.eval.judge.result` and each other, so they run
in the trusted parent on any machine. Python is checked on its syntax tree (`ast`); C++/CUDA on a token stream from a small
lexer that drops comments and keeps string literals apart, so a comment or a message string that
names a forbidden function never triggers a finding. Every rule lives in `RULES` (`static_rules.py`: id,
severity, what to do instead); `rules_markdown()` renders that table for the docs.

What the checks can catch: anything the rules forbid that is spelled out in the source: torch /
ATen compute in `ModelNew.forward` (and every function of the file it can reach) or in C++,
`torch.nn.functional`, nn submodule calls, the reference `Model`, try/except fallbacks, side
streams, threads, CUDA graphs, process / network / file / native-library access, frame and gc
introspection, monkey-patching of modules, tensor subclasses, dynamic code, RNG seeding,
third-party libraries (CUTLASS, CUB, thrust, cuRAND, cuFFT, cuSPARSE, cuSOLVER, Triton, ...),
cuBLAS outside matrix products, cuDNN outside convolutions, and lowered precision (TF32 / fp16 /
bf16 / tensor-core MMA in fp32 tasks, fp8 in bf16 / fp16 tasks; the entry points name the task's
precision and where it came from in those findings, with advice for that precision).

Symbols under other names (issue 28): the assembler and the linker take the name a declaration gives
them, so `extern "C" int run(const char*) __asm__("PyRun_SimpleString")` calls the interpreter with no
forbidden identifier. `symbol-rename` rejects asm labels on declarations (functions and variables,
`asm` / `__asm__` / `__asm`, at any scope, through macros too), alias / weakref / ifunc / symver /
section attributes (`__attribute__` and `[[gnu::...]]`), `#pragma redefine_extname` / `weak` and their
`_Pragma` form, assembler outside function bodies, symbol directives and host-symbol operands in any asm
string (.set, .equ, .symver, .globl, .weak, .section, @PLT, %rip), extern "C" definitions of CUDA
runtime / driver / Python / loader functions (interposition), `__wrap_` / `__real_` names, and
load_inline flags that rename (-D values are checked as the C++ they become; --wrap, --defsym).
`runtime-symbol-lookup` rejects what finds code at run time and shows in the source: the loader's
tables and internals (dl_iterate_phdr, dladdr, link_map, _r_debug, _dl_*, __libc_*, getauxval, ELF
types, <link.h>, <elf.h>, <sys/auxv.h>), /proc/<pid> paths, return addresses and backtraces, strings that
are exactly a C-API or loader symbol, and torch's operator registry (c10::Dispatcher, findSchema,
TORCH_LIBRARY*). Inline asm statements inside functions (PTX: `asm volatile(...)`, or `asm(...)` with
operands or an instruction's text) stay allowed; a statement is told from a label by what precedes it (a
declarator: a name, `]`, a parameter list) and, in a macro's body, by its text. Names built at run time
cannot be seen here: `eval/checks/symbols.py` checks the compiled objects' symbols after the build (rule
`built-symbol`), whatever the source called them.

What they cannot catch (the runtime defences must): a kernel that is never launched or returns
uninitialised memory, pass-through / constant / wrong outputs, mutated inputs, hardcoded shapes,
output caches keyed on pointers or contents, work deferred across calls, code that behaves
differently when timed, races and out-of-bounds accesses, and anything hidden behind obfuscation
the lexer does not undo (macros built with `##`, `using namespace torch`, computed attribute
names; a symbol name pasted with `##` is left to the post-build symbol check); the suspicious forms of
those are reported as WARN. A TorchDispatchMode log of the ATen
ops executed during the candidate's forward is the stronger, authoritative check.

Decisions: tensor creation allowed in forward and C++ is empty / empty_like / empty_strided and
zeros / zeros_like (zero-filled buffers are needed for atomic accumulation; a zero output is then
caught by the correctness check); ones / full / arange / rand* are value-producing and rejected.
CUB and thrust (device-wide, block- and warp-level alike) count as third-party libraries: they ship
with the toolkit, but they are ready-made algorithms, and the rule admits only cuBLAS (GEMM) and
cuDNN (convolution). libcu++ (`cuda/...`, `cuda::`) and cooperative_groups are language support and
allowed. Unannotated forward parameters are assumed to be tensors, so arithmetic on them is torch
compute; annotate scalar parameters (`dim: int`) to avoid that.

The rules live in modules by concern: `static_rules.py` (the one table both languages share),
`static_python_names.py` + `static_python.py` (Python), `static_cpp_lexer.py` + `static_cpp.py` (C++/CUDA) and
`static_cpp_symbols.py` (symbol binding). This module is their entry points.
"""

from __future__ import annotations

from cuda_agent.eval.checks.static_cpp import check_cpp
from cuda_agent.eval.checks.static_python import check_python
from cuda_agent.eval.checks.static_rules import _TASK_DTYPES, explain_precision
from cuda_agent.eval.judge.result import Finding

CPP_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".h", ".hpp", ".hh", ".inl")


def check_sources(
    sources: dict[str, str], *, precision: str = "fp32", precision_source: str = "", task_dtypes: tuple[str, ...] = ()
) -> list[Finding]:
    """Findings for a workspace's agent files (relative path -> text). `precision_source` (the task's
    `precision_source`) is named in `lowered-precision` findings; `task_dtypes` (`Task.dtypes`) are the
    dtypes whose storage types are never below the task (`DTYPE_STORAGE`)."""
    out: list[Finding] = []
    token = _TASK_DTYPES.set(frozenset(task_dtypes))
    try:
        for rel in sorted(sources):
            text = sources[rel]
            if rel.endswith(".py"):
                out += check_python(text, rel, precision)
            elif rel.endswith(CPP_SUFFIXES):
                out += check_cpp(text, rel, precision)
    finally:
        _TASK_DTYPES.reset(token)
    return explain_precision(out, precision, precision_source, task_dtypes)


def check_single_file(
    text: str,
    *,
    precision: str = "fp32",
    name: str = "solution.py",
    precision_source: str = "",
    task_dtypes: tuple[str, ...] = (),
) -> list[Finding]:
    """Findings for a KernelBench single-file solution: the Python with the Python rules, and
    every string literal that holds C++/CUDA source (load_inline sources) with the C++ rules."""
    token = _TASK_DTYPES.set(frozenset(task_dtypes))
    try:
        out = check_python(text, name, precision)
    finally:
        _TASK_DTYPES.reset(token)
    return explain_precision(out, precision, precision_source, task_dtypes)
