"""The static rules' table, shared by both languages: one `Rule` per id (severity, languages, what it
forbids, what to do instead), the sink that words a finding, and the task's precision in findings.

Contract: `RULES` is every rule of the static checks (`static.py` runs them); `rules_markdown()` renders the
table for the docs; `precision_advice` / `explain_precision` name the task's precision and where it came from
in `lowered-precision` findings. Imports only the standard library and `cuda_agent.eval.judge.result`.
"""

from __future__ import annotations

import dataclasses
import re
from contextvars import ContextVar
from typing import NamedTuple

from cuda_agent.eval.judge.result import Finding, Severity

R, W = Severity.REJECT, Severity.WARN

# C++ names of types and intrinsics below a precision (the C++ rules use them too)
LOW_CPP_IDS = re.compile(
    r"^(__half2?|__nv_bfloat162?|nv_bfloat162?|__nv_fp8\w*|__float2half\w*|__half2float|__floats2half2\w*|__float22half2\w*|__half22float2|__float2bfloat16\w*|__bfloat162float|__floats2bfloat162\w*|__float22bfloat162\w*|__h(add|sub|mul|div|fma|max|min|neg|abs)2?\w*|__float_to_tf32|wmma|nvcuda|wgmma|mma_sync|Half|BFloat16|kHalf|kFloat16|kBFloat16|kFloat8\w*|Float8\w*|CUBLAS_TF32_TENSOR_OP_MATH|CUBLAS_TENSOR_OP_MATH|CUBLAS_COMPUTE_32F_FAST_\w+|CUBLAS_COMPUTE_16F\w*|CUDA_R_16F|CUDA_R_16BF|CUDA_R_8F\w*|CUDA_C_16F|CUDA_C_16BF|CUDNN_TENSOR_OP_MATH\w*|CUDNN_DATA_HALF|CUDNN_DATA_BFLOAT16|CUDNN_DATA_FP8\w*|setAllowTF32CuBLAS|setAllowTF32CuDNN|setFloat32MatmulPrecision|setAllowFP16ReductionCuBLAS|setAllowBF16ReductionCuBLAS|setFloat32Precision|cublasHgemm\w*|tf32)$"
)
FP8_CPP_IDS = re.compile(r"^(__nv_fp8\w*|kFloat8\w*|Float8\w*|CUDA_R_8F\w*|CUDNN_DATA_FP8\w*)$")


class Rule(NamedTuple):
    severity: Severity
    langs: str  # "py", "cpp" or "py,cpp"
    what: str  # what the rule forbids
    instead: str  # what to do instead


RULES: dict[str, Rule] = {
    "torch-compute": Rule(
        R,
        "py",
        "torch ops (or tensor operators/methods) in ModelNew.forward or code it calls",
        "compute in your CUDA kernels; forward may only allocate tensors, read their properties, make them contiguous and call cuda_extension",
    ),
    "torch-view": Rule(
        W,
        "py",
        "layout or conversion ops (transpose, permute, expand, to, item, indexing) in forward",
        "pass strides to the kernel or do the layout change inside it",
    ),
    "nn-functional": Rule(R, "py", "torch.nn.functional anywhere", "write the operation as a CUDA kernel"),
    "nn-submodule-call": Rule(
        R,
        "py",
        "calling an nn module (self.conv(x), a ModuleList entry) in forward",
        "keep the module only for its parameters and pass self.<name>.weight to your kernel",
    ),
    "reference-model": Rule(
        R,
        "py",
        "using the reference Model (import from model, subclassing, instantiating, super().forward)",
        "implement ModelNew independently",
    ),
    "try-fallback": Rule(
        R,
        "py",
        "try/except in forward or code it calls (a fallback path)",
        "let errors propagate; the evaluator reports them",
    ),
    "cuda-stream": Rule(
        R,
        "py,cpp",
        "creating or switching CUDA streams (torch.cuda.Stream, cudaStreamCreate, getStreamFromPool)",
        "launch on the current stream (at::cuda::getCurrentCUDAStream())",
    ),
    "cuda-graph": Rule(
        R,
        "py,cpp",
        "CUDA graphs (torch.cuda.CUDAGraph, cudaGraph*, stream capture)",
        "launch the kernels directly on every call",
    ),
    "threads": Rule(
        R,
        "py,cpp",
        "threads or processes for work (threading, multiprocessing, std::thread, pthread, OpenMP, host callbacks)",
        "do all work synchronously on the current stream",
    ),
    "process-network": Rule(
        R,
        "py,cpp",
        "subprocesses, sockets, network (subprocess, os.system, socket, urllib, fork, popen, compiler flags that run programs: -wrapper, -B, -ccbin, -fplugin)",
        "nothing: the candidate needs no process or network access",
    ),
    "file-access": Rule(
        R,
        "py,cpp",
        "reading or writing files or descriptors (open, os.write, pathlib, torch.load, fopen, ofstream, #include outside the workspace, compiler flags that read or write files: @file, -include, -MF, -o)",
        "nothing: the candidate reads only its inputs",
    ),
    "os-call": Rule(W, "py", "other os.* calls", "avoid os in model code"),
    "env-access": Rule(
        W,
        "py,cpp",
        "reading or setting environment variables",
        "take configuration from the inputs; the environment is scrubbed",
    ),
    "native-code": Rule(
        R,
        "py,cpp",
        "loading native code outside the build (ctypes, cffi, dlopen, torch.ops.load_library, cuModuleLoad, NVRTC)",
        "put the code in kernels/ so it is built and checked",
    ),
    "introspection": Rule(
        R,
        "py",
        "gc / inspect / frames / sys.modules / __globals__ / __builtins__",
        "compute the output from the inputs only",
    ),
    "monkey-patch": Rule(
        R,
        "py",
        "assigning or deleting attributes of modules (torch, time, builtins, ...), setattr on a module, sys.modules edits",
        "never change global state",
    ),
    "tensor-subclass": Rule(
        R,
        "py",
        "tensor subclasses and dispatch hooks (__torch_function__, __torch_dispatch__, _make_subclass, dispatch modes)",
        "return plain tensors written by your kernel",
    ),
    "import-cuda-agent": Rule(
        R, "py", "importing the evaluator (cuda_agent)", "nothing: the candidate must not touch the evaluator"
    ),
    "lowered-precision": Rule(
        R,
        "py,cpp",
        "lower precision than the task's: TF32, fp16, bf16, fp8, tensor-core MMA, allow_tf32 or autocast in an fp32/fp64 task; fp8 in a bf16/fp16 task (the task declares PRECISION, or its precision follows its tensors' dtypes)",
        "compute at the task's precision: fp32 tasks in fp32 (CUDA-core FMA, or cuBLAS with CUBLAS_COMPUTE_32F / default math), bf16/fp16 tasks in bf16/fp16 with fp32 accumulation",
    ),
    "dynamic-code": Rule(
        R, "py", "eval / exec / compile / __import__ / importlib / getattr on a module", "write the code out plainly"
    ),
    "rng-state": Rule(
        R,
        "py",
        "seeding or reading RNG state (manual_seed, Generator, random, numpy.random)",
        "nothing: outputs must not depend on the evaluator's seed",
    ),
    "torch-compiler": Rule(R, "py", "torch.compile / torch.jit / dynamo / inductor", "write the fused kernel yourself"),
    "third-party-library": Rule(
        R,
        "py,cpp",
        "libraries other than cuBLAS/cuBLASLt and cuDNN (CUTLASS, CuTe, CUB, thrust, cuRAND, cuFFT, cuSPARSE, cuSOLVER, NCCL, Triton, CuPy, ...)",
        "write the kernel yourself (cuBLAS for GEMM and cuDNN for convolution are the only exceptions)",
    ),
    "timing-probe": Rule(
        W,
        "py,cpp",
        "clocks, CUDA events or capture queries in model code",
        "do not measure or detect the evaluator's timing",
    ),
    "forward-state": Rule(
        W,
        "py",
        "state kept across forward calls (self.x = ... in forward, global, data_ptr comparisons)",
        "compute each output afresh from the current inputs",
    ),
    "returns-input": Rule(
        W, "py", "forward returns one of its inputs", "allocate the output with torch.empty* and write it in a kernel"
    ),
    "no-extension-call": Rule(
        W, "py", "forward never calls the compiled extension", "call your kernel through cuda_extension"
    ),
    "extension-in-init": Rule(
        W,
        "py",
        "calling the extension in __init__ (outputs precomputed before the inputs exist?)",
        "compute in forward; parameters are loaded after __init__",
    ),
    "syntax-error": Rule(W, "py", "the file does not parse; it was not checked", "fix the syntax"),
    "aten-compute": Rule(
        R,
        "cpp",
        "torch:: / at:: compute, tensor methods or tensor operators in C++",
        "compute in your kernel; in C++ only allocate (torch::empty*), read properties, check, and launch",
    ),
    "cublas-non-gemm": Rule(
        R,
        "cpp",
        "cuBLAS outside matrix products (axpy, scal, copy, dot, nrm2, geam, dgmm, trsm, ...)",
        "write that part as a kernel; cuBLAS is allowed only for GEMM",
    ),
    "cudnn-non-conv": Rule(
        R,
        "cpp",
        "cuDNN outside convolution (activation, softmax, pooling, normalization, reduce, op-tensor, ...)",
        "write that part as a kernel; cuDNN is allowed only for convolution",
    ),
    "suspicious-include": Rule(
        W, "cpp", "headers for threads, files, processes or dynamic loading", "remove headers the kernel does not need"
    ),
    "namespace-import": Rule(
        W, "cpp", "`using namespace torch/at` hides which ATen functions are called", "qualify torch:: names explicitly"
    ),
    "token-pasting": Rule(
        W,
        "cpp",
        "macro token pasting (##) can assemble forbidden names the checker cannot see",
        "spell identifiers out",
    ),
    "static-tensor": Rule(W, "cpp", "a static tensor (output cache across calls?)", "allocate outputs per call"),
    "raw-cuda-malloc": Rule(
        W, "cpp", "cudaMalloc / host allocation in the binding", "allocate with torch::empty (the caching allocator)"
    ),
    "load-time-code": Rule(
        W,
        "cpp",
        "code that runs when the library loads (__attribute__((constructor)))",
        "do all work in the bound functions",
    ),
    "python-from-native": Rule(
        R,
        "cpp",
        "native code reaching into Python: the Python C API (Python.h, Py*), pybind11 beyond defining functions (py::exec/eval/import/globals/object/cast, .attr(), embedding)",
        'bind plain functions over tensors and scalars only: m.def("name", &fn, py::arg("x"))',
    ),
    "system-call": Rule(
        R,
        "py,cpp",
        "namespace, mount, privilege, seccomp, ptrace and raw system calls (mount, umount2, syscall, unshare, setns, prctl, seccomp, personality, asm syscall, os.unshare)",
        "nothing: a kernel and its binding need no system calls",
    ),
    "symbol-rename": Rule(
        R,
        "py,cpp",
        'binding a name to another symbol: asm labels on declarations (`int f(const char*) __asm__("PyRun_SimpleString")`), alias / weakref / ifunc / symver / section attributes, `#pragma redefine_extname` / `weak`, assembler outside function bodies, symbol directives and assignments in asm strings, read as the assembler reads them (.set, .equ, `name = symbol`, .symver, .globl, .weak, .section, .8byte, .irp / .macro, @PLT), renaming pragmas through a stringizing macro, defining a function of the CUDA runtime, Python or the dynamic linker, --wrap / --defsym / -Wa and -D flags that rename',
        "declare and call functions by their own names; inline asm statements (PTX) inside kernels and device functions are fine",
    ),
    "runtime-symbol-lookup": Rule(
        R,
        "cpp",
        "finding code at run time: the dynamic linker's tables and internals (dl_iterate_phdr, dladdr, link_map, _r_debug, _dl_*, __libc_*, getauxval, <link.h>, <elf.h>), /proc/self/maps, return addresses, C-API names in strings (joined and decoded), torch's operator registry by name (c10::Dispatcher, findSchema, TORCH_LIBRARY*), the CUDA driver's entry points by name (cudaGetDriverEntryPoint*, cuGetProcAddress; only a literal cuTensorMapEncode* name)",
        "call the functions you need directly; cuda_extension links what the binding uses",
    ),
    "built-symbol": Rule(
        R,
        "cpp",
        "a compiled object that references a Python C-API or torch-Python function the pristine binding does not need, or the dynamic linker's lookup (dlsym, dlopen, dl_iterate_phdr, dladdr, _dl_*), or defines a function of the CUDA runtime or Python: checked after the build on the objects' symbols, whatever the source called them",
        "bind plain functions over tensors and scalars; declare nothing under another symbol's name",
    ),
}


def rules_markdown() -> str:
    lines = ["| rule | severity | lang | forbids | do instead |", "|---|---|---|---|---|"]
    for rid, r in RULES.items():
        lines.append(f"| `{rid}` | {r.severity.value} | {r.langs} | {r.what} | {r.instead} |")
    return "\n".join(lines)


class _Sink:
    def __init__(self, file: str | None, line_offset: int = 0) -> None:
        self.file, self.offset = file, line_offset
        self.out: list[Finding] = []

    def add(self, rule: str, line: int | None, detail: str, severity: Severity | None = None) -> None:
        r = RULES[rule]
        msg = f"{detail}; instead: {r.instead}"
        ln = None if line is None else line + self.offset
        f = Finding(rule=rule, message=msg, severity=severity or r.severity, file=self.file, line=ln)
        if not any((g.rule, g.line) == (f.rule, f.line) for g in self.out):
            self.out.append(f)


def _low_precision(precision: str) -> bool:
    """True when half / bf16 / TF32 are below the task's precision."""
    return precision in ("fp32", "fp64")


# The names that only hold, load, store or convert a dtype (no arithmetic in it, no tensor cores): a
# task whose own tensors have that dtype (Task.dtypes: a bf16 input of a task declared fp32, an fp8
# weight of a bf16 task) needs them, so they are not below it. Set per check by the entry points.
DTYPE_STORAGE = {
    "bfloat16": re.compile(
        r"^(__nv_bfloat162?|nv_bfloat162?|__float2bfloat16\w*|__bfloat162float|__floats2bfloat162\w*|"
        r"__float22bfloat162\w*|__bfloat1622float2|BFloat16|kBFloat16|CUDA_R_16BF|CUDNN_DATA_BFLOAT16|"
        r"bfloat16|cuda_bf16\.hp?p?)$"
    ),
    "float16": re.compile(
        r"^(__half2?|__float2half\w*|__half2float|__floats2half2\w*|__float22half2\w*|__half22float2|"
        r"Half|kHalf|kFloat16|CUDA_R_16F|CUDNN_DATA_HALF|float16|half|cuda_fp16\.hp?p?)$"
    ),
    "float8": re.compile(
        r"^(__nv_fp8\w*|kFloat8\w*|Float8\w*|CUDA_R_8F\w*|CUDNN_DATA_FP8\w*|float8\w*|cuda_fp8\.hp?p?)$"
    ),
}
_TASK_DTYPES: ContextVar[frozenset[str]] = ContextVar("task_dtypes", default=frozenset())


def _task_dtype_name(word: str) -> bool:
    """True when `word` (an identifier, a torch dtype or a header) only stores a dtype the task's tensors have."""
    for d in _TASK_DTYPES.get():
        pat = DTYPE_STORAGE.get("float8" if d.startswith("float8") else d)
        if pat is not None and pat.match(word):
            return True
    return False


def _below_task(word: str, precision: str) -> bool:
    """A C++ identifier below the task's precision (and not only the storage of one of the task's dtypes)."""
    below = (_low_precision(precision) and LOW_CPP_IDS.match(word)) or (
        precision in ("fp16", "bf16") and FP8_CPP_IDS.match(word)
    )
    return bool(below) and not _task_dtype_name(word)


def precision_advice(precision: str, source: str = "", dtypes: tuple[str, ...] | frozenset[str] = ()) -> str:
    """What a `lowered-precision` finding advises for a task of this precision (from `source`) whose
    tensors have `dtypes`."""
    if precision in ("fp16", "bf16"):
        return (
            f"compute in {precision}: bf16/fp16 loads, stores and arithmetic with fp32 accumulation (half2 / "
            f"bfloat162 math, tensor-core MMA with fp32 accumulators, cuBLAS with CUBLAS_COMPUTE_32F) are fine in a "
            f"{precision} task; fp8 and narrower types are below it"
        )
    advice = (
        "compute in fp64 (double FMA, cuBLAS D routines)"
        if precision == "fp64"
        else "compute in fp32 (CUDA-core FMA, or cuBLAS with CUBLAS_COMPUTE_32F / default math)"
    ) + "; TF32, fp16, bf16, fp8 and tensor-core MMA are below it"
    held = sorted(d for d in dtypes if precision_of_dtype(d) in ("bf16", "fp16", "fp8"))
    if held:
        advice += f" (the task's own {'/'.join(held)} tensors may be loaded, stored and converted as they are)"
    if source and source != "declared":
        advice += (
            "; a task meant to run in bf16 or fp16 gets that precision from bf16/fp16 inputs or parameters, "
            'or from a PRECISION = "bf16" line'
        )
    return advice


def precision_of_dtype(d: str) -> str | None:
    return "fp8" if d.startswith("float8") else {"bfloat16": "bf16", "float16": "fp16"}.get(d)


def explain_precision(
    findings: list[Finding], precision: str, source: str = "", dtypes: tuple[str, ...] | frozenset[str] = ()
) -> list[Finding]:
    """`lowered-precision` findings rewritten to name the task's precision and its source, with advice for it."""
    out = []
    for f in findings:
        if f.rule == "lowered-precision":
            detail = f.message.split("; instead: ", 1)[0]
            task = f"; the task is {precision} ({source})" if source else ""
            f = dataclasses.replace(
                f, message=f"{detail}{task}; instead: {precision_advice(precision, source, dtypes)}"
            )
        out.append(f)
    return out
