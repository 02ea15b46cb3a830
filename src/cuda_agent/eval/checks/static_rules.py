"""Static checks of a candidate's sources: the first line of defence against reward hacking.

Contract: `check_sources({relpath: text}, precision=...)` and `check_single_file(text, ...)`
return `Finding`s; they never import, compile or execute the candidate, and they import only
the standard library and `cuda_agent.eval.judge.result`, so they run in the trusted parent on any
machine. Python is checked on its syntax tree (`ast`); C++/CUDA on a token stream from a small
lexer that drops comments and keeps string literals apart, so a comment or a message string that
names a forbidden function never triggers a finding. Every rule lives in `RULES` (id, severity,
what to do instead); `rules_markdown()` renders that table for the docs.

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

This module is longer than the 250-line guideline because the rule table, the Python checker and
the C++ lexer/checker belong together: one table drives both languages.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from contextvars import ContextVar
from dataclasses import dataclass
from typing import NamedTuple

from cuda_agent.eval.judge.result import Finding, Severity

R, W = Severity.REJECT, Severity.WARN


class Rule(NamedTuple):
    severity: Severity
    langs: str  # "py", "cpp" or "py,cpp"
    what: str  # what the rule forbids
    instead: str  # what to do instead


RULES: dict[str, Rule] = {
    "torch-compute": Rule(R, "py", "torch ops (or tensor operators/methods) in ModelNew.forward or code it calls", "compute in your CUDA kernels; forward may only allocate tensors, read their properties, make them contiguous and call cuda_extension"),
    "torch-view": Rule(W, "py", "layout or conversion ops (transpose, permute, expand, to, item, indexing) in forward", "pass strides to the kernel or do the layout change inside it"),
    "nn-functional": Rule(R, "py", "torch.nn.functional anywhere", "write the operation as a CUDA kernel"),
    "nn-submodule-call": Rule(R, "py", "calling an nn module (self.conv(x), a ModuleList entry) in forward", "keep the module only for its parameters and pass self.<name>.weight to your kernel"),
    "reference-model": Rule(R, "py", "using the reference Model (import from model, subclassing, instantiating, super().forward)", "implement ModelNew independently"),
    "try-fallback": Rule(R, "py", "try/except in forward or code it calls (a fallback path)", "let errors propagate; the evaluator reports them"),
    "cuda-stream": Rule(R, "py,cpp", "creating or switching CUDA streams (torch.cuda.Stream, cudaStreamCreate, getStreamFromPool)", "launch on the current stream (at::cuda::getCurrentCUDAStream())"),
    "cuda-graph": Rule(R, "py,cpp", "CUDA graphs (torch.cuda.CUDAGraph, cudaGraph*, stream capture)", "launch the kernels directly on every call"),
    "threads": Rule(R, "py,cpp", "threads or processes for work (threading, multiprocessing, std::thread, pthread, OpenMP, host callbacks)", "do all work synchronously on the current stream"),
    "process-network": Rule(R, "py,cpp", "subprocesses, sockets, network (subprocess, os.system, socket, urllib, fork, popen)", "nothing: the candidate needs no process or network access"),
    "file-access": Rule(R, "py,cpp", "reading or writing files or descriptors (open, os.write, pathlib, torch.load, fopen, ofstream, #include outside the workspace)", "nothing: the candidate reads only its inputs"),
    "os-call": Rule(W, "py", "other os.* calls", "avoid os in model code"),
    "env-access": Rule(W, "py,cpp", "reading or setting environment variables", "take configuration from the inputs; the environment is scrubbed"),
    "native-code": Rule(R, "py,cpp", "loading native code outside the build (ctypes, cffi, dlopen, torch.ops.load_library, cuModuleLoad, NVRTC)", "put the code in kernels/ so it is built and checked"),
    "introspection": Rule(R, "py", "gc / inspect / frames / sys.modules / __globals__ / __builtins__", "compute the output from the inputs only"),
    "monkey-patch": Rule(R, "py", "assigning or deleting attributes of modules (torch, time, builtins, ...), setattr on a module, sys.modules edits", "never change global state"),
    "tensor-subclass": Rule(R, "py", "tensor subclasses and dispatch hooks (__torch_function__, __torch_dispatch__, _make_subclass, dispatch modes)", "return plain tensors written by your kernel"),
    "import-cuda-agent": Rule(R, "py", "importing the evaluator (cuda_agent)", "nothing: the candidate must not touch the evaluator"),
    "lowered-precision": Rule(R, "py,cpp", "lower precision than the task's: TF32, fp16, bf16, fp8, tensor-core MMA, allow_tf32 or autocast in an fp32/fp64 task; fp8 in a bf16/fp16 task (the task declares PRECISION, or its precision follows its tensors' dtypes)", "compute at the task's precision: fp32 tasks in fp32 (CUDA-core FMA, or cuBLAS with CUBLAS_COMPUTE_32F / default math), bf16/fp16 tasks in bf16/fp16 with fp32 accumulation"),
    "dynamic-code": Rule(R, "py", "eval / exec / compile / __import__ / importlib / getattr on a module", "write the code out plainly"),
    "rng-state": Rule(R, "py", "seeding or reading RNG state (manual_seed, Generator, random, numpy.random)", "nothing: outputs must not depend on the evaluator's seed"),
    "torch-compiler": Rule(R, "py", "torch.compile / torch.jit / dynamo / inductor", "write the fused kernel yourself"),
    "third-party-library": Rule(R, "py,cpp", "libraries other than cuBLAS/cuBLASLt and cuDNN (CUTLASS, CuTe, CUB, thrust, cuRAND, cuFFT, cuSPARSE, cuSOLVER, NCCL, Triton, CuPy, ...)", "write the kernel yourself (cuBLAS for GEMM and cuDNN for convolution are the only exceptions)"),
    "timing-probe": Rule(W, "py,cpp", "clocks, CUDA events or capture queries in model code", "do not measure or detect the evaluator's timing"),
    "forward-state": Rule(W, "py", "state kept across forward calls (self.x = ... in forward, global, data_ptr comparisons)", "compute each output afresh from the current inputs"),
    "returns-input": Rule(W, "py", "forward returns one of its inputs", "allocate the output with torch.empty* and write it in a kernel"),
    "no-extension-call": Rule(W, "py", "forward never calls the compiled extension", "call your kernel through cuda_extension"),
    "extension-in-init": Rule(W, "py", "calling the extension in __init__ (outputs precomputed before the inputs exist?)", "compute in forward; parameters are loaded after __init__"),
    "syntax-error": Rule(W, "py", "the file does not parse; it was not checked", "fix the syntax"),
    "aten-compute": Rule(R, "cpp", "torch:: / at:: compute, tensor methods or tensor operators in C++", "compute in your kernel; in C++ only allocate (torch::empty*), read properties, check, and launch"),
    "cublas-non-gemm": Rule(R, "cpp", "cuBLAS outside matrix products (axpy, scal, copy, dot, nrm2, geam, dgmm, trsm, ...)", "write that part as a kernel; cuBLAS is allowed only for GEMM"),
    "cudnn-non-conv": Rule(R, "cpp", "cuDNN outside convolution (activation, softmax, pooling, normalization, reduce, op-tensor, ...)", "write that part as a kernel; cuDNN is allowed only for convolution"),
    "suspicious-include": Rule(W, "cpp", "headers for threads, files, processes or dynamic loading", "remove headers the kernel does not need"),
    "namespace-import": Rule(W, "cpp", "`using namespace torch/at` hides which ATen functions are called", "qualify torch:: names explicitly"),
    "token-pasting": Rule(W, "cpp", "macro token pasting (##) can assemble forbidden names the checker cannot see", "spell identifiers out"),
    "static-tensor": Rule(W, "cpp", "a static tensor (output cache across calls?)", "allocate outputs per call"),
    "raw-cuda-malloc": Rule(W, "cpp", "cudaMalloc / host allocation in the binding", "allocate with torch::empty (the caching allocator)"),
    "load-time-code": Rule(W, "cpp", "code that runs when the library loads (__attribute__((constructor)))", "do all work in the bound functions"),
    "python-from-native": Rule(R, "cpp", "native code reaching into Python: the Python C API (Python.h, Py*), pybind11 beyond defining functions (py::exec/eval/import/globals/object/cast, .attr(), embedding)", "bind plain functions over tensors and scalars only: m.def(\"name\", &fn, py::arg(\"x\"))"),
    "system-call": Rule(R, "py,cpp", "namespace, mount, privilege, seccomp, ptrace and raw system calls (mount, umount2, syscall, unshare, setns, prctl, seccomp, personality, asm syscall, os.unshare)", "nothing: a kernel and its binding need no system calls"),
    "symbol-rename": Rule(R, "py,cpp", "binding a name to another symbol: asm labels on declarations (`int f(const char*) __asm__(\"PyRun_SimpleString\")`), alias / weakref / ifunc / symver / section attributes, `#pragma redefine_extname` / `weak`, assembler outside function bodies, symbol directives in asm strings (.set, .equ, .symver, .globl, .weak, .section, @PLT), defining a function of the CUDA runtime, Python or the dynamic linker, --wrap / --defsym and -D flags that rename", "declare and call functions by their own names; inline asm statements (PTX) inside kernels and device functions are fine"),
    "runtime-symbol-lookup": Rule(R, "cpp", "finding code at run time: the dynamic linker's tables and internals (dl_iterate_phdr, dladdr, link_map, _r_debug, _dl_*, __libc_*, getauxval, <link.h>, <elf.h>), /proc/self/maps, return addresses, C-API names in strings, torch's operator registry by name (c10::Dispatcher, findSchema, TORCH_LIBRARY*)", "call the functions you need directly; cuda_extension links what the binding uses"),
    "built-symbol": Rule(R, "cpp", "a compiled object that references a Python C-API or torch-Python function the pristine binding does not need, or the dynamic linker's lookup (dlsym, dlopen, dl_iterate_phdr, dladdr, _dl_*), or defines a function of the CUDA runtime or Python: checked after the build on the objects' symbols, whatever the source called them", "bind plain functions over tensors and scalars; declare nothing under another symbol's name"),
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
    "bfloat16": re.compile(r"^(__nv_bfloat162?|nv_bfloat162?|__float2bfloat16\w*|__bfloat162float|__floats2bfloat162\w*|"
                           r"__float22bfloat162\w*|__bfloat1622float2|BFloat16|kBFloat16|CUDA_R_16BF|CUDNN_DATA_BFLOAT16|"
                           r"bfloat16|cuda_bf16\.hp?p?)$"),
    "float16": re.compile(r"^(__half2?|__float2half\w*|__half2float|__floats2half2\w*|__float22half2\w*|__half22float2|"
                          r"Half|kHalf|kFloat16|CUDA_R_16F|CUDNN_DATA_HALF|float16|half|cuda_fp16\.hp?p?)$"),
    "float8": re.compile(r"^(__nv_fp8\w*|kFloat8\w*|Float8\w*|CUDA_R_8F\w*|CUDNN_DATA_FP8\w*|float8\w*|cuda_fp8\.hp?p?)$"),
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
    below = (_low_precision(precision) and LOW_CPP_IDS.match(word)) or (precision in ("fp16", "bf16") and FP8_CPP_IDS.match(word))
    return bool(below) and not _task_dtype_name(word)


def precision_advice(precision: str, source: str = "", dtypes: tuple[str, ...] | frozenset[str] = ()) -> str:
    """What a `lowered-precision` finding advises for a task of this precision (from `source`) whose
    tensors have `dtypes`."""
    if precision in ("fp16", "bf16"):
        return (f"compute in {precision}: bf16/fp16 loads, stores and arithmetic with fp32 accumulation (half2 / "
                f"bfloat162 math, tensor-core MMA with fp32 accumulators, cuBLAS with CUBLAS_COMPUTE_32F) are fine in a "
                f"{precision} task; fp8 and narrower types are below it")
    advice = (("compute in fp64 (double FMA, cuBLAS D routines)" if precision == "fp64" else
               "compute in fp32 (CUDA-core FMA, or cuBLAS with CUBLAS_COMPUTE_32F / default math)") +
              "; TF32, fp16, bf16, fp8 and tensor-core MMA are below it")
    held = sorted(d for d in dtypes if precision_of_dtype(d) in ("bf16", "fp16", "fp8"))
    if held:
        advice += f" (the task's own {'/'.join(held)} tensors may be loaded, stored and converted as they are)"
    if source and source != "declared":
        advice += ('; a task meant to run in bf16 or fp16 gets that precision from bf16/fp16 inputs or parameters, '
                   'or from a PRECISION = "bf16" line')
    return advice


def precision_of_dtype(d: str) -> str | None:
    return "fp8" if d.startswith("float8") else {"bfloat16": "bf16", "float16": "fp16"}.get(d)


def explain_precision(findings: list[Finding], precision: str, source: str = "",
                      dtypes: tuple[str, ...] | frozenset[str] = ()) -> list[Finding]:
    """`lowered-precision` findings rewritten to name the task's precision and its source, with advice for it."""
    out = []
    for f in findings:
        if f.rule == "lowered-precision":
            detail = f.message.split("; instead: ", 1)[0]
            task = f"; the task is {precision} ({source})" if source else ""
            f = dataclasses.replace(f, message=f"{detail}{task}; instead: {precision_advice(precision, source, dtypes)}")
        out.append(f)
    return out


# ---------------------------------------------------------------------------------------------
# Python
# ---------------------------------------------------------------------------------------------

TORCH_ALLOWED_CALLS = {
    "torch.empty", "torch.empty_like", "torch.empty_strided", "torch.zeros", "torch.zeros_like",
    "torch.Size", "torch.device", "torch.is_tensor", "torch.no_grad", "torch.inference_mode",
    "torch.finfo", "torch.iinfo", "torch.get_default_dtype", "torch.is_floating_point",
    "torch.cuda.current_stream", "torch.cuda.current_device", "torch.cuda.is_available",
    "torch.cuda.device", "torch.cuda.get_device_properties", "torch.cuda.device_count",
    "torch.cuda.synchronize", "torch.nn.Parameter", "torch.utils.cpp_extension.load_inline",
    "torch.utils.cpp_extension.load",
}
# tensor methods that compute (REJECT in forward); any name ending in "_" also counts
TENSOR_COMPUTE = set("""
abs absolute acos acosh add addbmm addcdiv addcmul addmm addmv addr all allclose amax amin aminmax
angle any argmax argmin argsort argwhere asin asinh atan atan2 atanh baddbmm bernoulli bincount
bitwise_and bitwise_not bitwise_or bitwise_xor bmm ceil cholesky clamp clamp_max clamp_min clip
clone conj copysign corrcoef cos cosh count_nonzero cov cross cummax cummin cumprod cumsum deg2rad
diag diag_embed diagonal diff digamma dist div divide dot eig einsum eq equal erf erfc erfinv exp
exp2 expm1 fix flip fliplr flipud float_power floor floor_divide fmax fmin fmod frac gather gcd ge
gelu ger greater gt heaviside histc hypot index_add index_copy index_fill index_put index_select
inner inverse isclose isfinite isinf isnan kron kthvalue lcm ldexp le lerp lgamma log log10 log1p
log2 log_softmax logaddexp logcumsumexp logdet logical_and logical_not logical_or logical_xor logit
logsumexp lt lu masked_fill masked_scatter masked_select matmul matrix_exp matrix_power max maximum
mean median min minimum mm mode moveaxis msort mul multinomial multiply mv mvlgamma nan_to_num
nanmean nanmedian nanquantile nansum ne neg negative nextafter nonzero norm normal outer pinverse
polygamma pow prod qr quantile rad2deg reciprocal relu remainder renorm repeat repeat_interleave
roll rot90 round rsqrt scatter scatter_add scatter_reduce sgn sigmoid sign signbit sin sinc sinh
slogdet softmax sort sqrt square std std_mean sub subtract sum sum_to_size svd take
take_along_dim tan tanh tensordot tile topk trace trapz tril triu true_divide trunc unique
unique_consecutive var var_mean vdot where xlogy hardtanh silu mish softplus
""".split())
TENSOR_VIEW = set("""
t transpose permute expand expand_as narrow select as_strided chunk split tensor_split unbind unfold
movedim swapaxes swapdims to cuda cpu float double int long short bool char byte type type_as item
tolist numpy pin_memory masked_select index
""".split())
ALLOWED_INPLACE = {"requires_grad_", "share_memory_"}
DUNDER_MATH = re.compile(r"^__(r|i)?(add|sub|mul|matmul|truediv|floordiv|mod|pow|neg|pos|abs|and|or|xor|lshift|rshift|invert|lt|le|gt|ge|eq|ne)__$")
LOW_DTYPES = {"float16", "half", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "complex32", "chalf"}
FP8_DTYPES = {d for d in LOW_DTYPES if d.startswith("float8")}
PRECISION_ATTRS = {"allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction", "fp32_precision", "set_float32_matmul_precision"}

MODULE_RULES: dict[str, str] = {
    "threading": "threads", "_thread": "threads", "multiprocessing": "threads", "concurrent": "threads",
    "asyncio": "threads", "torch.multiprocessing": "threads", "sched": "threads", "signal": "threads",
    "subprocess": "process-network", "socket": "process-network", "ssl": "process-network",
    "urllib": "process-network", "urllib3": "process-network", "http": "process-network",
    "requests": "process-network", "httpx": "process-network", "aiohttp": "process-network",
    "ftplib": "process-network", "smtplib": "process-network", "xmlrpc": "process-network",
    "webbrowser": "process-network", "pty": "process-network", "telnetlib": "process-network",
    "ctypes": "native-code", "_ctypes": "native-code", "cffi": "native-code",
    "gc": "introspection", "inspect": "introspection", "__main__": "introspection",
    "importlib": "dynamic-code", "runpy": "dynamic-code", "marshal": "dynamic-code", "code": "dynamic-code",
    "shutil": "file-access", "tempfile": "file-access", "mmap": "file-access", "glob": "file-access",
    "pickle": "file-access", "shelve": "file-access",
    "random": "rng-state",
    "cuda_agent": "import-cuda-agent",
    "model": "reference-model",
    "torch.nn.functional": "nn-functional",
    "torch._dynamo": "torch-compiler", "torch._inductor": "torch-compiler", "torch.jit": "torch-compiler",
    "torch.utils._python_dispatch": "tensor-subclass", "torch.overrides": "tensor-subclass",
}
THIRD_PARTY_PY = {
    "triton", "cupy", "pycuda", "numba", "jax", "tensorflow", "cutlass", "cuda", "apex", "xformers",
    "flash_attn", "transformer_engine", "deepspeed", "liger_kernel", "tilelang", "warp", "taichi",
    "torchao", "bitsandbytes", "thunderkittens", "cuequivariance", "nvmath", "cuda_core", "tvm",
}
LOW_PRECISION_PY = {"torch.autocast", "torch.cuda.amp", "torch.amp", "torch.set_float32_matmul_precision"}
TIMING_PY = {"time", "timeit", "torch.cuda.Event", "torch.profiler", "torch.cuda.is_current_stream_capturing", "torch.autograd.profiler"}
STREAM_PY = {"torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.set_stream", "torch.cuda.ExternalStream", "torch.cuda.StreamContext", "torch.Stream"}
GRAPH_PY = {"torch.cuda.CUDAGraph", "torch.cuda.graph", "torch.cuda.graphs", "torch.cuda.make_graphed_callables"}
RNG_PY = {"torch.manual_seed", "torch.seed", "torch.initial_seed", "torch.get_rng_state", "torch.set_rng_state", "torch.Generator", "torch.random", "torch.cuda.manual_seed", "torch.cuda.manual_seed_all", "torch.cuda.seed", "torch.cuda.seed_all", "torch.cuda.initial_seed", "torch.cuda.get_rng_state", "torch.cuda.set_rng_state", "torch.cuda.get_rng_state_all", "torch.cuda.set_rng_state_all", "torch.cuda.random", "numpy.random"}
SUBCLASS_NAMES = {"__torch_function__", "__torch_dispatch__", "_make_subclass", "_make_wrapper_subclass", "TorchDispatchMode", "TorchFunctionMode", "_DisableTorchDispatch"}
FRAME_ATTRS = {"f_back", "f_locals", "f_globals", "f_code", "f_builtins", "gi_frame", "cr_frame", "ag_frame", "tb_frame", "tb_next", "__globals__", "__closure__", "__code__", "__builtins__", "__subclasses__"}
SYS_INTROSPECT = {"sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile", "sys.modules", "sys.meta_path", "sys.path_hooks", "sys.addaudithook", "sys.exc_info", "sys.exception", "sys.last_value", "sys.monitoring"}
OS_PROCESS = re.compile(r"^os\.(system|popen|exec\w*|spawn\w*|fork\w*|posix_spawn\w*|kill\w*|wait\w*)$")
OS_FILE = re.compile(r"^os\.(open|read|write|pread|pwrite|fdopen|dup2?|pipe2?|remove|unlink|rename|replace|listdir|scandir|walk|mkdir|makedirs|rmdir|chmod|chown|symlink|link|truncate|ftruncate|sendfile|memfd_create|readlink|stat|lstat|utime|mkfifo|access|chdir)$")
FILE_CALLS = {"open", "io.open", "torch.load", "torch.save", "numpy.load", "numpy.save", "numpy.fromfile", "numpy.loadtxt", "numpy.savetxt", "numpy.memmap", "io.FileIO", "pathlib.Path", "pathlib.PosixPath"}
FILE_METHODS = {"read_text", "write_text", "read_bytes", "write_bytes", "tofile", "touch", "unlink", "symlink_to", "hardlink_to"}
DYNAMIC_BUILTINS = {"eval", "exec", "compile", "__import__", "breakpoint"}
INTROSPECT_BUILTINS = {"globals", "locals", "vars"}
EXT_LOADERS = {"torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load"}
NN_NOT_MODULES = {"Parameter", "ParameterList", "ParameterDict", "Buffer"}
CPP_HINT = ("#include", "__global__", "torch::", "at::", 'extern "C"', "<<<", "cudaStream", "cublas", "PYBIND11")
BAD_LDLIBS = re.compile(r"^-l(curand|cufft\w*|cusparse\w*|cusolver\w*|nccl|cutensor\w*|npp\w*|nvrtc\w*|cutlass\w*|nvJitLink)$")


def _chain(node: ast.AST) -> list[str] | None:
    """['torch', 'nn', 'functional', 'relu'] for torch.nn.functional.relu; None if not a plain chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    if isinstance(node, ast.Call) and parts:  # e.g. Path(...).write_text: keep the tail
        return ["<call>"] + parts[::-1]
    return None


@dataclass
class _Ctx:
    aliases: dict[str, str]  # local name -> dotted origin (imports and simple module-level aliases)
    ext_names: set[str]  # names bound to the compiled extension (module or its functions)
    defined: set[str]  # classes and functions defined in the file

    def resolve(self, node: ast.AST) -> str | None:
        parts = _chain(node)
        if not parts or parts[0] == "<call>":
            return None
        head = self.aliases.get(parts[0])
        if head is None:
            if parts[0] in ("open", "eval", "exec", "compile", "__import__", "getattr", "setattr", "delattr", "globals", "locals", "vars", "breakpoint") and parts[0] not in self.defined:
                return ".".join(parts)
            return None
        return ".".join([head] + parts[1:])


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body:
            first = n.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                ids.add(id(first.value))
    return ids


def _build_ctx(tree: ast.Module) -> _Ctx:
    ctx = _Ctx(aliases={}, ext_names=set(), defined=set())
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                if a.asname:
                    ctx.aliases[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    ctx.aliases[top] = top
                if a.name == "cuda_extension":
                    ctx.ext_names.add(a.asname or a.name)
        elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            for a in n.names:
                ctx.aliases[a.asname or a.name] = f"{n.module}.{a.name}"
                if n.module == "cuda_extension":
                    ctx.ext_names.add(a.asname or a.name)
        elif isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            ctx.defined.add(n.name)
    for name in list(ctx.defined):
        ctx.aliases.pop(name, None)
    # simple aliases (relu = torch.relu) and extension handles (mod = load_inline(...)), file-wide
    for _ in range(2):
        for n in ast.walk(tree):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                tgt, val = n.targets[0].id, n.value
                if isinstance(val, (ast.Name, ast.Attribute)):
                    origin = ctx.resolve(val)
                    if origin:
                        ctx.aliases[tgt] = origin
                    root = _chain(val)
                    if root and root[0] in ctx.ext_names:
                        ctx.ext_names.add(tgt)
                elif isinstance(val, ast.Call) and ctx.resolve(val.func) in EXT_LOADERS:
                    ctx.ext_names.add(tgt)
    return ctx


def _self_attr_kinds(cls: ast.ClassDef, ctx: _Ctx) -> dict[str, str]:
    """self.<attr> -> 'nn' (an nn module), 'torch-fn', 'ext', 'model' or 'other', from every method."""
    kinds: dict[str, str] = {}
    for n in ast.walk(cls):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("register_buffer", "register_parameter"):
            if n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str):
                kinds[n.args[0].value] = "tensor"
        if not isinstance(n, ast.Assign):
            continue
        for t in n.targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                kinds[t.attr] = _value_kind(n.value, ctx)
    return kinds


def _value_kind(val: ast.AST, ctx: _Ctx) -> str:
    if isinstance(val, ast.Call):
        origin = ctx.resolve(val.func) or ""
        if origin in EXT_LOADERS:
            return "ext"
        if origin.startswith("torch.nn.") and origin.split(".")[-1] not in NN_NOT_MODULES:
            return "nn"
        if origin.startswith("torch."):
            return "tensor"
        if origin.endswith(".Model") or origin == "model.Model" or (isinstance(val.func, ast.Name) and val.func.id == "Model"):
            return "model"
        return "other"
    parts = _chain(val)
    if parts and parts[0] in ctx.ext_names:
        return "ext"
    origin = ctx.resolve(val) or ""
    if origin.startswith("torch."):
        return "torch-fn"
    return "other"


class _PyChecker:
    def __init__(self, tree: ast.Module, sink: _Sink, precision: str) -> None:
        self.tree, self.sink, self.precision = tree, sink, precision
        self.ctx = _build_ctx(tree)
        self.funcs: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        for n in ast.walk(tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.funcs.setdefault(n.name, []).append(n)
            elif isinstance(n, ast.ClassDef):
                self.classes[n.name] = n

    # -- file-wide rules ------------------------------------------------------------------
    def run(self) -> None:
        self._imports()
        for n in ast.walk(self.tree):
            self._node_anywhere(n)
        model_new = self.classes.get("ModelNew")
        if model_new is not None:
            self._model_new(model_new)

    def _module_rule(self, mod: str) -> str | None:
        parts = mod.split(".")
        for i in range(len(parts), 0, -1):
            rule = MODULE_RULES.get(".".join(parts[:i]))
            if rule:
                return rule
        if parts[0] in THIRD_PARTY_PY:
            return "third-party-library"
        return None

    def _imports(self) -> None:
        for n in ast.walk(self.tree):
            mods: list[str] = []
            if isinstance(n, ast.Import):
                mods = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom):
                if n.level:
                    mods = ["model"] if n.module in (None, "model") else [n.module]
                else:
                    mods = [n.module or ""] + [f"{n.module}.{a.name}" for a in n.names]
                    if any(a.name == "*" for a in n.names) and (n.module or "").startswith("torch"):
                        self.sink.add("torch-compute", n.lineno, f"`from {n.module} import *` hides which torch functions are called")
            for m in mods:
                rule = self._module_rule(m)
                if rule:
                    self.sink.add(rule, n.lineno, f"import of {m}")
                if m.split(".")[0] in ("time", "timeit"):
                    self.sink.add("timing-probe", n.lineno, f"import of {m}")

    def _name_rule(self, dotted: str) -> tuple[str, str] | None:
        """A forbidden meaning of a resolved dotted name anywhere in the file."""
        last = dotted.rsplit(".", 1)[-1]
        def under(prefixes: set[str]) -> bool:
            return any(dotted == p or dotted.startswith(p + ".") for p in prefixes)
        if under({"torch.nn.functional"}):
            return "nn-functional", f"{dotted} is torch.nn.functional"
        if under(STREAM_PY) or dotted in ("torch.cuda.Stream", "torch.cuda.stream"):
            return "cuda-stream", f"{dotted} creates or switches streams"
        if under(GRAPH_PY):
            return "cuda-graph", f"{dotted} is a CUDA graph"
        if under(RNG_PY) or (dotted.startswith("random.") and dotted.count(".") == 1):
            return "rng-state", f"{dotted} touches RNG state"
        if dotted in ("torch.compile",) or under({"torch.jit", "torch._dynamo", "torch._inductor", "torch.fx"}):
            return "torch-compiler", f"{dotted} hands the work to a compiler"
        if last in SUBCLASS_NAMES or under({"torch.utils._python_dispatch", "torch.overrides", "torch._C._DisableTorchFunction"}):
            return "tensor-subclass", f"{dotted} hooks tensor dispatch"
        if under(SYS_INTROSPECT):
            return "introspection", f"{dotted} reaches into the interpreter"
        if dotted in SYSCALL_PY:
            return "system-call", f"{dotted} is a namespace or privilege system call"
        if under({"torch.ops.load_library", "torch.classes.load_library", "torch.cuda.cudart"}):
            return "native-code", f"{dotted} loads native code"
        if _low_precision(self.precision) and ((last in LOW_DTYPES and not _task_dtype_name(last)) or under(LOW_PRECISION_PY) or last in PRECISION_ATTRS):
            return "lowered-precision", f"{dotted} lowers precision below {self.precision}"
        if self.precision in ("fp16", "bf16") and last in FP8_DTYPES and not _task_dtype_name(last):
            return "lowered-precision", f"{dotted} lowers precision below {self.precision}"
        if dotted in ("torch.cuda.is_current_stream_capturing", "torch.cuda.Event") or under({"torch.profiler", "torch.autograd.profiler"}):
            return "timing-probe", f"{dotted} observes timing or capture"
        return None

    def _node_anywhere(self, n: ast.AST) -> None:
        sink, ctx = self.sink, self.ctx
        line = getattr(n, "lineno", None)
        if isinstance(n, (ast.Attribute, ast.Name)):
            dotted = ctx.resolve(n)
            if dotted:
                hit = self._name_rule(dotted)
                if hit:
                    sink.add(hit[0], line, hit[1])
            if isinstance(n, ast.Attribute):
                if n.attr in FRAME_ATTRS:
                    sink.add("introspection", line, f"attribute {n.attr} reaches into frames or globals")
                elif n.attr in SUBCLASS_NAMES:
                    sink.add("tensor-subclass", line, f"{n.attr} hooks tensor dispatch")
                elif n.attr in PRECISION_ATTRS and _low_precision(self.precision):
                    sink.add("lowered-precision", line, f"{n.attr} changes matmul/conv precision")
                elif n.attr == "__dict__" and ctx.resolve(n.value):
                    sink.add("introspection", line, "a module's __dict__")
            elif n.id == "__builtins__":
                sink.add("introspection", line, "__builtins__")
            elif n.id in ("Model",) and "Model" not in ctx.defined and isinstance(n.ctx, ast.Load):
                sink.add("reference-model", line, "reference to the reference Model")
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if n.name in SUBCLASS_NAMES:
                sink.add("tensor-subclass", n.lineno, f"defines {n.name}")
        elif isinstance(n, ast.ClassDef):
            for b in n.bases:
                origin = ctx.resolve(b) or ""
                if origin in ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase") or origin.endswith("TorchDispatchMode") or origin.endswith("TorchFunctionMode"):
                    sink.add("tensor-subclass", n.lineno, f"class {n.name} subclasses {origin}")
                if (isinstance(b, ast.Name) and b.id == "Model") or origin.endswith(".Model"):
                    sink.add("reference-model", n.lineno, f"class {n.name} subclasses Model")
        elif isinstance(n, ast.Call):
            self._call_anywhere(n)
        elif isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = n.targets if isinstance(n, (ast.Assign, ast.Delete)) else [n.target]
            for t in targets:
                self._assign_target(t, line)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and BAD_LDLIBS.match(n.value.strip()):
            sink.add("third-party-library", line, f"links {n.value.strip()}")
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.lstrip().startswith("-"):
            self._flag(n.value.strip(), line)
        elif isinstance(n, ast.With):
            for item in n.items:
                origin = ctx.resolve(item.context_expr.func if isinstance(item.context_expr, ast.Call) else item.context_expr) or ""
                if origin in ("torch.autocast", "torch.cuda.amp.autocast", "torch.amp.autocast") and _low_precision(self.precision):
                    sink.add("lowered-precision", line, "autocast")

    def _flag(self, flag: str, line: int | None) -> None:
        """A compiler or linker flag (load_inline's extra_*flags): a macro it defines is checked as the
        C++ it becomes (`-Drun=PyRun_SimpleString` renames as well as a #define); --wrap / --defsym rename."""
        if RENAME_FLAGS.search(flag):
            self.sink.add("symbol-rename", line, f"the flag {flag[:60]!r} binds one symbol to another")
        m = DEFINE_FLAG.match(flag)
        if m:
            text = f"#define {m.group(1)} {m.group(2) or ''}\n"
            self.sink.out += check_cpp(text, self.sink.file, self.precision, line_offset=(line or 1) - 1, kind=".cpp")

    def _assign_target(self, t: ast.AST, line: int | None) -> None:
        if isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self._assign_target(e, line)
            return
        if isinstance(t, ast.Subscript):
            dotted = self.ctx.resolve(t.value) or ""
            if dotted in ("sys.modules",) or dotted.endswith("__dict__"):
                self.sink.add("monkey-patch", line, f"edits {dotted}")
            elif dotted == "os.environ":
                self.sink.add("env-access", line, "sets an environment variable")
            return
        if isinstance(t, ast.Attribute):
            dotted = self.ctx.resolve(t) or ""
            if dotted and dotted.split(".")[0] not in self.ctx.defined:
                last = dotted.rsplit(".", 1)[-1]
                if last in PRECISION_ATTRS and _low_precision(self.precision):
                    return  # reported as lowered-precision
                self.sink.add("monkey-patch", line, f"assigns {dotted}")
            elif isinstance(t.value, ast.Name) and t.value.id in ("builtins", "__builtins__"):
                self.sink.add("monkey-patch", line, f"assigns builtins.{t.attr}")

    def _call_anywhere(self, n: ast.Call) -> None:
        sink, ctx, line = self.sink, self.ctx, n.lineno
        dotted = ctx.resolve(n.func) or ""
        fname = n.func.id if isinstance(n.func, ast.Name) else None
        if fname in DYNAMIC_BUILTINS and fname not in ctx.defined:
            sink.add("dynamic-code", line, f"{fname}()")
        elif fname in INTROSPECT_BUILTINS and fname not in ctx.defined:
            sink.add("introspection", line, f"{fname}() exposes namespaces", W)
        elif fname == "open" and "open" not in ctx.defined:
            sink.add("file-access", line, "open()")
        if fname in ("getattr", "setattr", "delattr", "hasattr") and n.args:
            target = ctx.resolve(n.args[0])
            if target:
                if fname in ("setattr", "delattr"):
                    sink.add("monkey-patch", line, f"{fname} on module {target}")
                else:
                    sink.add("dynamic-code", line, f"{fname} on module {target} hides which function is used")
        if fname in ("__setattr__",) or (isinstance(n.func, ast.Attribute) and n.func.attr in ("__setattr__", "__delattr__") and n.args and ctx.resolve(n.args[0])):
            sink.add("monkey-patch", line, "__setattr__ on a module")
        if dotted in FILE_CALLS or OS_FILE.match(dotted) or dotted.startswith(("shutil.", "tempfile.", "pathlib.", "mmap.", "pickle.", "glob.", "os.path.expanduser")):
            sink.add("file-access", line, f"{dotted}()")
        elif OS_PROCESS.match(dotted) or dotted.startswith(("subprocess.", "socket.", "urllib.", "http.", "requests.")):
            sink.add("process-network", line, f"{dotted}()")
        elif dotted in ("os.getenv", "os.putenv", "os.unsetenv", "os.environ.get", "os.environ.setdefault", "os.environ.update", "os.environ.pop"):
            sink.add("env-access", line, f"{dotted}()")
        elif dotted.startswith("os.") and not dotted.startswith(("os.path.", "os.environ")) and dotted not in ("os.getpid", "os.cpu_count", "os.fspath", "os.sep"):
            sink.add("os-call", line, f"{dotted}()")
        elif dotted.startswith(("importlib.", "types.FunctionType", "types.CodeType")):
            sink.add("dynamic-code", line, f"{dotted}()")
        if isinstance(n.func, ast.Attribute) and n.func.attr in ("half", "bfloat16") and not n.args and _low_precision(self.precision):
            sink.add("lowered-precision", line, f".{n.func.attr}() casts below {self.precision}")
        if isinstance(n.func, ast.Attribute) and n.func.attr in FILE_METHODS:
            sink.add("file-access", line, f".{n.func.attr}() touches files")

    # -- ModelNew and everything forward can reach -------------------------------------------
    def _model_new(self, cls: ast.ClassDef) -> None:
        ctx, sink = self.ctx, self.sink
        kinds = _self_attr_kinds(cls, ctx)
        methods = {m.name: m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
        entry = [methods[m] for m in ("forward", "__call__", "_call_impl") if m in methods]
        reach = self._reachable(entry, methods)
        ext_calls = 0
        for fn in reach:
            ext_calls += self._check_forward_fn(fn, kinds, fn in entry)
        if entry and ext_calls == 0:
            sink.add("no-extension-call", entry[0].lineno, "forward never calls the compiled extension")
        init = methods.get("__init__")
        if init is not None and init not in reach:
            for n in ast.walk(init):
                if isinstance(n, ast.Call) and self._is_ext_call(n.func, kinds):
                    sink.add("extension-in-init", n.lineno, "extension called in __init__")
        for fn in entry:
            params = {a.arg for a in fn.args.args[1:]}
            for n in ast.walk(fn):
                if isinstance(n, ast.Return) and n.value is not None:
                    vals = n.value.elts if isinstance(n.value, ast.Tuple) else [n.value]
                    if any(isinstance(v, ast.Name) and v.id in params for v in vals):
                        sink.add("returns-input", n.lineno, "forward returns an input tensor")

    def _reachable(self, entry: list, methods: dict) -> list:
        seen: list = []
        todo = list(entry)
        all_methods = {}
        for c in self.classes.values():
            for m in c.body:
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    all_methods.setdefault(m.name, []).append(m)
        while todo:
            fn = todo.pop()
            if fn in seen:
                continue
            seen.append(fn)
            for n in ast.walk(fn):
                if not isinstance(n, ast.Call):
                    continue
                f = n.func
                if isinstance(f, ast.Name):
                    todo += [g for g in self.funcs.get(f.id, []) if g not in seen]
                    if f.id in self.classes:  # instantiating a helper class: its methods run
                        todo += [m for m in self.classes[f.id].body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
                elif isinstance(f, ast.Attribute):
                    if isinstance(f.value, ast.Name) and f.value.id == "self" and f.attr in methods:
                        todo.append(methods[f.attr])
                    else:
                        todo += all_methods.get(f.attr, [])
        return seen

    def _is_ext_call(self, func: ast.AST, kinds: dict[str, str]) -> bool:
        parts = _chain(func)
        if not parts:
            return False
        if parts[0] in self.ctx.ext_names:
            return True
        return parts[0] == "self" and len(parts) >= 2 and kinds.get(parts[1]) == "ext"

    def _check_forward_fn(self, fn, kinds: dict[str, str], is_entry: bool) -> int:
        sink, ctx = self.sink, self.ctx
        tensors = {a.arg for a in fn.args.args if a.arg != "self" and not _scalar_annotation(a.annotation)}
        tensors |= {a.arg for a in fn.args.kwonlyargs if not _scalar_annotation(a.annotation)}
        if fn.args.vararg:
            tensors.add(fn.args.vararg.arg)
        nn_locals: set[str] = set()
        ext_calls = 0

        def is_tensor(e: ast.AST) -> bool:
            if isinstance(e, ast.Name):
                return e.id in tensors
            if isinstance(e, ast.Attribute):
                if isinstance(e.value, ast.Name) and e.value.id == "self":
                    return kinds.get(e.attr) == "tensor"
                if e.attr in ("weight", "bias", "data", "T", "mT", "grad"):
                    return True
                return False
            if isinstance(e, ast.Call):
                if self._is_ext_call(e.func, kinds):
                    return True
                origin = ctx.resolve(e.func) or ""
                if origin.startswith("torch."):
                    return True
                if isinstance(e.func, ast.Attribute) and e.func.attr in ("contiguous", "view", "reshape", "flatten", "squeeze", "unsqueeze", "view_as", "reshape_as", "detach"):
                    return is_tensor(e.func.value)
                return False
            if isinstance(e, ast.Subscript):
                return is_tensor(e.value)
            if isinstance(e, ast.BinOp):
                return is_tensor(e.left) or is_tensor(e.right)
            if isinstance(e, ast.UnaryOp):
                return is_tensor(e.operand)
            return False

        # propagate tensor-ness through assignments (two passes cover use-before-def in loops)
        for _ in range(2):
            for n in ast.walk(fn):
                if isinstance(n, ast.Assign) and is_tensor(n.value):
                    for t in n.targets:
                        for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
                            if isinstance(e, ast.Name):
                                tensors.add(e.id)
                if isinstance(n, ast.For) and isinstance(n.target, ast.Name):
                    src = _chain(n.iter)
                    if src and src[0] == "self" and len(src) == 2 and kinds.get(src[1]) == "nn":
                        nn_locals.add(n.target.id)

        for n in ast.walk(fn):
            line = getattr(n, "lineno", None)
            if isinstance(n, ast.Try):
                sink.add("try-fallback", line, "try/except around forward code")
            elif isinstance(n, (ast.Global, ast.Nonlocal)):
                sink.add("forward-state", line, "global/nonlocal state in forward")
            elif isinstance(n, (ast.Assign, ast.AugAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t in targets:
                    root = t
                    while isinstance(root, (ast.Attribute, ast.Subscript)):
                        root = root.value
                    if isinstance(root, ast.Name) and root.id == "self":
                        sink.add("forward-state", line, "forward stores state on self")
                    elif isinstance(t, ast.Subscript) and is_tensor(t.value):
                        sink.add("torch-compute", line, "item assignment into a tensor (index_put/copy)")
                    if isinstance(n, ast.AugAssign) and isinstance(t, ast.Name) and t.id in tensors:
                        sink.add("torch-compute", line, "augmented assignment on a tensor")
            elif isinstance(n, ast.BinOp) and (is_tensor(n.left) or is_tensor(n.right)):
                sink.add("torch-compute", line, f"tensor operator {type(n.op).__name__}")
            elif isinstance(n, ast.UnaryOp) and not isinstance(n.op, ast.Not) and is_tensor(n.operand):
                sink.add("torch-compute", line, f"tensor operator {type(n.op).__name__}")
            elif isinstance(n, ast.Compare):
                ops_ok = all(isinstance(o, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for o in n.ops)
                if not ops_ok and any(is_tensor(x) for x in [n.left, *n.comparators]):
                    sink.add("torch-compute", line, "tensor comparison")
                if any(isinstance(x, ast.Call) and isinstance(x.func, ast.Attribute) and x.func.attr == "data_ptr" for x in [n.left, *n.comparators]):
                    sink.add("forward-state", line, "data_ptr comparison (output cache keyed on pointers?)")
            elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and is_tensor(n.value):
                sink.add("torch-view", line, "tensor indexing")
            elif isinstance(n, ast.Attribute) and n.attr in ("T", "mT", "H", "mH") and is_tensor(n.value):
                sink.add("torch-view", line, f".{n.attr} transposes")
            elif isinstance(n, ast.Call):
                ext_calls += self._forward_call(n, kinds, nn_locals)
        return ext_calls

    def _forward_call(self, n: ast.Call, kinds: dict[str, str], nn_locals: set[str]) -> int:
        sink, ctx, line = self.sink, self.ctx, n.lineno
        f = n.func
        if self._is_ext_call(f, kinds):
            return 1
        parts = _chain(f) or []
        origin = ctx.resolve(f) or ""
        if origin.startswith("torch.") or origin == "torch":
            if origin in TORCH_ALLOWED_CALLS or self._name_rule(origin):
                return 0  # allowed, or already reported by its own rule
            if origin.startswith("torch.nn.") and origin.rsplit(".", 1)[-1][:1].isupper():
                sink.add("nn-submodule-call", line, f"{origin}(...) builds an nn module in forward")
            else:
                sink.add("torch-compute", line, f"{origin}() in forward")
            return 0
        if origin.startswith("numpy.") or origin.startswith("scipy."):
            sink.add("torch-compute", line, f"{origin}() computes on the host in forward")
            return 0
        if isinstance(f, ast.Name) and f.id in nn_locals:
            sink.add("nn-submodule-call", line, f"calls nn module {f.id}")
            return 0
        if parts[:1] == ["self"] and len(parts) >= 2:
            kind = kinds.get(parts[1])
            if kind in ("nn", "model") and (len(parts) == 2 or parts[2] in ("forward", "__call__")):
                sink.add("nn-submodule-call" if kind == "nn" else "reference-model", line, f"calls self.{parts[1]} ({kind} module)")
                return 0
            if kind == "torch-fn" and len(parts) == 2:
                sink.add("torch-compute", line, f"self.{parts[1]} is a torch function")
                return 0
        if isinstance(f, ast.Subscript):
            src = _chain(f.value)
            if src and src[0] == "self" and len(src) == 2 and kinds.get(src[1]) == "nn":
                sink.add("nn-submodule-call", line, f"calls an entry of self.{src[1]}")
            return 0
        if isinstance(f, ast.Attribute):
            m = f.attr
            if isinstance(f.value, ast.Call) and isinstance(f.value.func, ast.Name) and f.value.func.id == "super" and m in ("forward", "__call__"):
                sink.add("reference-model", line, "super().forward runs the parent's forward")
            elif m in TENSOR_COMPUTE or DUNDER_MATH.match(m) or (m.endswith("_") and not m.startswith("_") and m not in ALLOWED_INPLACE):
                sink.add("torch-compute", line, f".{m}() computes with torch")
            elif m in TENSOR_VIEW:
                sink.add("torch-view", line, f".{m}()")
            elif m in ("forward",) and not (parts[:1] == ["self"]):
                sink.add("nn-submodule-call", line, "calls another module's forward", W)
        return 0


def _scalar_annotation(ann: ast.AST | None) -> bool:
    return isinstance(ann, ast.Name) and ann.id in ("int", "float", "bool", "str")


def _cpp_strings(tree: ast.Module) -> list[tuple[str, int]]:
    """String literals of a Python file that hold C++/CUDA source, with their first line."""
    docs = _docstring_nodes(tree)
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            if any(h in n.value for h in CPP_HINT):
                out.append((n.value, n.lineno))
        elif isinstance(n, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else " 0 " for v in n.values)
            if any(h in text for h in CPP_HINT):
                out.append((text, n.lineno))
    return out


def check_python(text: str, file: str | None = "model_new.py", precision: str = "fp32") -> list[Finding]:
    sink = _Sink(file)
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        sink.add("syntax-error", e.lineno, f"not valid Python: {e.msg}")
        return sink.out
    _PyChecker(tree, sink, precision).run()
    out = list(sink.out)
    for src, line in _cpp_strings(tree):
        # load_inline prepends torch/extension.h to cpp_sources, so treat every literal as torch-aware
        out += check_cpp(src, file, precision, line_offset=line - 1, kind=".cpp")
    return out


# ---------------------------------------------------------------------------------------------
# C++ / CUDA
# ---------------------------------------------------------------------------------------------


class Tok(NamedTuple):
    kind: str  # id num str chr punct inc hash
    text: str
    line: int


_PUNCT3 = ("<<=", ">>=", "...", "->*", "<<<", ">>>")
_PUNCT2 = ("::", "->", "##", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", ".*")
_STR_PREFIX = {"L", "u", "U", "u8", "R", "LR", "uR", "UR", "u8R"}


def lex_cpp(text: str) -> list[Tok]:
    """Tokens of C++/CUDA source without comments; string literals are one token each (their
    text unquoted), `#include` targets are `inc` tokens, `#` at the start of a line is `hash`."""
    toks: list[Tok] = []
    i, n, line = 0, len(text), 1
    bol = True  # at the beginning of a line (only whitespace so far)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
            bol = True
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if c == "\\" and text.startswith("\n", i + 1):
            i += 2
            line += 1
            continue
        if text.startswith("//", i):
            j = i
            while j < n and text[j] != "\n":
                if text[j] == "\\" and j + 1 < n and text[j + 1] == "\n":  # continued comment
                    line += 1
                    j += 1
                j += 1
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            line += text.count("\n", i, j)
            i = j
            continue
        if c == "#" and bol:
            toks.append(Tok("hash", "#", line))
            bol = False
            m = re.compile(r"#[ \t]*(include|include_next|import|embed)[ \t]*([<\"])").match(text, i)
            if m:
                close = ">" if m.group(2) == "<" else '"'
                j = text.find(close, m.end())
                eol = text.find("\n", m.end())
                eol = n if eol < 0 else eol
                if j < 0 or j > eol:
                    j = eol
                toks.append(Tok("id", m.group(1), line))
                toks.append(Tok("inc", text[m.end():j], line))
                i = j + 1
                continue
            i += 1
            continue
        bol = False
        if c.isalpha() or c == "_":
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            if j < n and text[j] in "\"'" and word in _STR_PREFIX:
                if word.endswith("R") and text[j] == '"':
                    k = text.find("(", j)
                    delim = text[j + 1:k]
                    end = text.find(")" + delim + '"', k)
                    end = n if end < 0 else end
                    toks.append(Tok("str", text[k + 1:end], line))
                    line += text.count("\n", j, end)
                    i = end + len(delim) + 2
                    continue
                i = j
                continue  # the quote is lexed next
            toks.append(Tok("id", word, line))
            i = j
            continue
        if c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] in "._'" or (text[j] in "+-" and text[j - 1] in "eEpP")):
                j += 1
            toks.append(Tok("num", text[i:j], line))
            i = j
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            toks.append(Tok("str" if c == '"' else "chr", text[i + 1:j], line))
            i = j + 1
            continue
        for p in _PUNCT3 + _PUNCT2:
            if text.startswith(p, i):
                toks.append(Tok("punct", p, line))
                i += len(p)
                break
        else:
            toks.append(Tok("punct", c, line))
            i += 1
    return toks


ATEN_ALLOWED = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "dtype", "device", "layout",
    "requires_grad", "device_of", "getCurrentCUDAStream", "getDefaultCUDAStream", "getCurrentCUDABlasHandle",
    "getCurrentCUDABlasLtHandle", "getCurrentDeviceProperties", "getDeviceProperties", "current_device",
    "device_count", "getCurrentCUDASparseHandle", "getCudnnHandle", "elementSize", "toString",
    "isFloatingType", "typeMetaToScalarType", "scalarTypeToTypeMeta", "check", "get_device",
    "getCUDADeviceAllocator", "maybe_wrap_dim", "ArrayRef", "IntArrayRef",
}
TORCH_NAMESPACES = ("torch", "at", "c10", "caffe2")
STREAM_CPP = re.compile(r"^(cudaStreamCreate\w*|cuStreamCreate\w*|cudaStreamPerThread|cudaStreamNonBlocking|getStreamFromPool|getStreamFromExternal|setCurrentCUDAStream|cudaStreamAddCallback|cudaLaunchHostFunc|cuLaunchHostFunc|CUDAStreamGuard|CUDAMultiStreamGuard)$")
GRAPH_CPP = re.compile(r"^(cudaGraph\w*|cuGraph\w*|cudaStreamBeginCapture\w*|cudaStreamEndCapture|cuStreamBeginCapture\w*|cuStreamEndCapture|CUDAGraph|cudaStreamGetCaptureInfo\w*|cudaStreamUpdateCaptureDependencies\w*)$")
THREAD_CPP = re.compile(r"^(pthread_create|pthread_\w+|thrd_create|_beginthread\w*|CreateThread|clone)$")
PROC_CPP = {"fork", "vfork", "system", "popen", "execl", "execlp", "execle", "execv", "execvp", "execvpe", "posix_spawn", "posix_spawnp", "socket", "connect", "getaddrinfo", "gethostbyname", "kill", "ptrace"}
FILE_CPP = {"fopen", "fopen64", "freopen", "fdopen", "open", "open64", "openat", "creat", "write", "read", "pwrite", "pread", "dup", "dup2", "mmap", "unlink", "rename", "truncate", "ftruncate", "sendfile", "memfd_create", "opendir", "readlink"}
FILE_TYPES_CPP = {"ofstream", "ifstream", "fstream", "filebuf", "basic_ofstream", "basic_ifstream", "basic_fstream", "filesystem"}
NATIVE_CPP = re.compile(r"^(dlopen|dlsym|dlmopen|dlvsym|LoadLibrary\w*|GetProcAddress|cuModuleLoad\w*|cuLibraryLoad\w*|cudaLibraryLoad\w*|nvrtc\w+|nvJitLink\w+|cuLinkCreate\w*|cuLinkAdd\w*)$")
ENV_CPP = {"getenv", "secure_getenv", "setenv", "putenv", "unsetenv", "environ"}
TIMING_CPP = re.compile(r"^(cudaEventCreate\w*|cudaEventRecord\w*|cudaEventElapsedTime\w*|cudaStreamIsCapturing|cuStreamIsCapturing|gettimeofday|clock_gettime|chrono|CUDAEvent|cudaStreamQuery)$")
MALLOC_CPP = re.compile(r"^(cudaMalloc|cudaMallocAsync|cudaMallocManaged|cudaMallocHost|cudaHostAlloc|cudaMallocPitch|cudaMalloc3D|cuMemAlloc\w*)$")
THIRD_PARTY_NS = {"cutlass", "cute", "thrust", "cub", "hipcub", "Eigen", "cutensor", "nccl", "tbb"}
THIRD_PARTY_ID = re.compile(r"^(curand\w*|cufft\w*|cusparse\w*|cusolver\w*|nccl[A-Z]\w*|cutensor\w*|npp[a-zA-Z]\w*|cublasXt\w*|magma_\w+)$")
THIRD_PARTY_INC = re.compile(r"^(cutlass|cute|thrust|cub|hipcub|Eigen|unsupported/Eigen|cudnn_frontend)(/|\.|$)|^(curand|cufft|cusparse|cusolver|nccl|cutensor|npp|nvjpeg|magma|cudss|nvrtc|nvJitLink|cublasXt)", re.I)
CUBLAS_NON_GEMM = re.compile(r"^cublas(?:i?[sdczh]?)(axpy|scal|copy|swap|dot[uc]?|nrm2|asum|amax|amin|rot|rotg|rotm|rotmg|geam|dgmm|trsm|trsv|tbsv|tpsv|getr[fis]|geqrf|gels|matinv)(?:ex)?(?:batched|stridedbatched)?(?:_v2)?(?:_64)?$", re.I)
CUDNN_NON_CONV = re.compile(r"^cudnn(Activation(Forward|Backward)|Softmax\w+|Pooling\w+|BatchNormalization\w+|Normalization\w+|LRN\w+|DivisiveNormalization\w+|RNN\w+|MultiHead\w+|Dropout(Forward|Backward)|OpTensor|ReduceTensor|SpatialTf\w+|CTCLoss\w*|TransformTensor\w*|ScaleTensor|SetTensor|Backend\w*)$")
LOW_CPP_IDS = re.compile(r"^(__half2?|__nv_bfloat162?|nv_bfloat162?|__nv_fp8\w*|__float2half\w*|__half2float|__floats2half2\w*|__float22half2\w*|__half22float2|__float2bfloat16\w*|__bfloat162float|__floats2bfloat162\w*|__float22bfloat162\w*|__h(add|sub|mul|div|fma|max|min|neg|abs)2?\w*|__float_to_tf32|wmma|nvcuda|wgmma|mma_sync|Half|BFloat16|kHalf|kFloat16|kBFloat16|kFloat8\w*|Float8\w*|CUBLAS_TF32_TENSOR_OP_MATH|CUBLAS_TENSOR_OP_MATH|CUBLAS_COMPUTE_32F_FAST_\w+|CUBLAS_COMPUTE_16F\w*|CUDA_R_16F|CUDA_R_16BF|CUDA_R_8F\w*|CUDA_C_16F|CUDA_C_16BF|CUDNN_TENSOR_OP_MATH\w*|CUDNN_DATA_HALF|CUDNN_DATA_BFLOAT16|CUDNN_DATA_FP8\w*|setAllowTF32CuBLAS|setAllowTF32CuDNN|setFloat32MatmulPrecision|setAllowFP16ReductionCuBLAS|setAllowBF16ReductionCuBLAS|setFloat32Precision|cublasHgemm\w*|tf32)$")
FP8_CPP_IDS = re.compile(r"^(__nv_fp8\w*|kFloat8\w*|Float8\w*|CUDA_R_8F\w*|CUDNN_DATA_FP8\w*)$")
LOW_PTX = re.compile(r"\b(w?gmma|mma\.sync|mma\.sp|tcgen05|wmma)\b|\.tf32\b|\.f16x?2?\b|\.bf16x?2?\b|\.e4m3|\.e5m2|cvt\.rna\.tf32")
FP8_PTX = re.compile(r"\.e4m3|\.e5m2")
SUSPICIOUS_INC = re.compile(r"^(thread|future|pthread\.h|fstream|filesystem|dlfcn\.h|sys/socket\.h|netinet/.*|arpa/.*|unistd\.h|fcntl\.h|sys/mman\.h|spawn\.h|sys/wait\.h|omp\.h|chrono|sys/time\.h|ctime|time\.h)$")
LOW_INC = re.compile(r"^(cuda_fp16\.h|cuda_bf16\.h|cuda_fp8\.h|mma\.h|cuda_fp16\.hpp|cuda_bf16\.hpp)$")
TORCH_INC = re.compile(r"^(torch/|ATen/|c10/|(\.\./)?binding_registry\.h)")
# The workspace's fixed registry header, by our spelling and by the public CUDA-Agent release's
# (kernels/x_binding.cpp includes "../binding_registry.h"); the build resolves both to the pristine copy.
REGISTRY_INCLUDES = ("binding_registry.h", "../binding_registry.h")
# Native code that reaches Python can rewrite the harness in its own process (issue 12).
PY_CAPI = re.compile(r"^_?Py[A-Z_][A-Za-z0-9_]*$|^PYBIND11_(EMBEDDED_MODULE|OVERRIDE\w*|OVERLOAD\w*)$")
PY_INC = re.compile(r"^(Python\.h|frameobject\.h|structmember\.h|pyconfig\.h|pythonrun\.h|pybind11/(embed|eval|exec|iostream|pytypes|cast|attr)\.h|python[0-9.]*/.*)$")
# pybind11 names a binding needs to define functions; everything else in the namespace reaches Python objects
PYBIND_OK = {"module_", "module", "arg", "arg_v", "kw_only", "pos_only", "call_guard", "gil_scoped_release",
             "return_value_policy", "overload_cast", "const_", "doc"}
PY_MEMBERS = {"attr", "add_object", "import", "def_submodule", "reload", "inc_ref", "dec_ref", "ptr", "def_property",
              "def_readwrite", "def_readonly", "def_static", "def_property_readonly"}
SYSCALL_CPP = {"mount", "umount", "umount2", "syscall", "unshare", "setns", "prctl", "seccomp", "personality",
               "pivot_root", "chroot", "mount_setattr", "open_tree", "move_mount", "fsopen", "fsmount", "fsconfig",
               "fspick", "clone3", "process_vm_readv", "process_vm_writev", "capset", "setuid", "setgid", "setresuid",
               "setresgid", "seteuid", "setegid", "setgroups", "keyctl", "add_key", "bpf", "perf_event_open", "ioctl",
               "prlimit", "prlimit64", "setrlimit", "init_module", "finit_module", "kexec_load", "reboot", "swapon",
               "userfaultfd", "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "ptrace", "mprotect"}
SYSCALL_ID = re.compile(r"^(__NR_\w+|SYS_\w+|SECCOMP_\w+|PR_SET_\w+|CLONE_NEW\w+|MS_REMOUNT|MS_BIND|MNT_DETACH|PTRACE_\w+)$")
SYSCALL_INC = re.compile(r"^(sys/syscall\.h|syscall\.h|sys/mount\.h|sys/prctl\.h|sys/ptrace\.h|sys/personality\.h|sys/capability\.h|sys/fsuid\.h|sched\.h|seccomp\.h|linux/.*|asm/.*)$")
SYSCALL_ASM = re.compile(r"\bsyscall\b|\bsysenter\b|\bint\s+\$?0x80\b|\bsvc\s+#?0\b")
SYSCALL_PY = {"os.unshare", "os.setns", "os.pidfd_open", "os.setuid", "os.setgid", "os.setresuid", "os.setresgid",
              "os.seteuid", "os.setegid", "os.setgroups", "os.chroot", "os.sched_setaffinity", "resource.setrlimit",
              "resource.prlimit"}
# Names bound to other symbols (issue 28): the assembler and the linker take the name a declaration
# gives them, so `int run(const char*) __asm__("PyRun_SimpleString")` calls the interpreter with no
# forbidden identifier in sight. The compiled objects' symbols are checked too (eval/checks/symbols.py).
ASM_KEYWORDS = ("asm", "__asm__", "__asm")
ASM_QUALIFIERS = ("volatile", "__volatile__", "__volatile", "goto", "inline", "__inline", "__inline__")
# attributes that bind a declaration to another symbol or place it where the loader runs it
SYMBOL_ATTRS = {"alias", "weakref", "ifunc", "symver", "section"}
RENAME_PRAGMAS = {"redefine_extname", "weak", "extern_prefix"}
# GNU as directives that define, bind or place symbols, at the start of an assembler statement and
# followed by a name (PTX state spaces and linking directives, `.local .align 8 .b8 x[4]`,
# `.weak .func`, are followed by another directive); host-symbol operands (@PLT, %rip)
GAS_DIRECTIVE = re.compile(r"(?:^|[\s;])\.(set|equ|equiv|eqv|symver|globl|global|weak|weakref|weakext|local|comm|lcomm"
                           r"|hidden|protected|internal|type|size|section|pushsection|popsection|previous|subsection|text"
                           r"|data|bss|rodata|reloc|org|quad|byte|long|word|ascii|asciz|string|zero|skip|space|fill)"
                           r"\b(?!\s*\.)")
HOST_SYMREF = re.compile(r"@(PLT|GOTPCREL|GOT|GOTOFF|GOTNTPOFF|GOTTPOFF|TPOFF|DTPOFF|TLSGD|TLSLD|PCREL)\b|\(\s*%%?rip\s*\)")
# a bare assembler instruction that is also a plausible symbol name
ASM_BARE_OK = {"nop", "pause", "int3", "ud2", "lfence", "mfence", "sfence", "hlt"}
# code found at run time: the dynamic linker's own tables and internals, auxv, ELF structures,
# return addresses, and torch's operator registry (by name, or registering over an ATen op)
RUNTIME_LOOKUP = re.compile(
    r"^(dl_iterate_phdr|dl_phdr_info|dladdr1?|Dl_info|dlinfo|dlerror|_r_debug|r_debug|r_debug_extended|link_map|_dl_\w+"
    r"|__dl_\w+|__libc_(?!single_threaded$)\w+|getauxval|__getauxval|AT_(PHDR|PHENT|PHNUM|BASE|ENTRY|SYSINFO_EHDR|EXECFN)"
    r"|_DYNAMIC|_GLOBAL_OFFSET_TABLE_|__ehdr_start|__executable_start|_etext|_edata|__bss_start|Elf(32|64)_\w+|ElfW"
    r"|RTLD_\w+|__builtin_return_address|__builtin_frame_address|__builtin_extract_return_addr|backtrace(_symbols\w*)?"
    r"|_Unwind_Backtrace|_Unwind_GetIP\w*|_Unwind_FindEnclosingFunction"
    r"|Dispatcher|OperatorHandle|findSchema\w*|findOp|findOperatorFor|getAllOperators\w*|getOperation|callBoxed"
    r"|RegisterOperators|TORCH_LIBRARY\w*|fromQualString)$")
LOOKUP_INC = re.compile(r"^(link\.h|elf\.h|sys/auxv\.h|execinfo\.h|unwind\.h|libunwind\.h|gnu/lib-names\.h"
                        r"|ATen/core/dispatch/\w+\.h|torch/library\.h|torch/csrc/jit/.*)$")
# a string that is only a symbol of the interpreter or the dynamic linker (passed to a lookup?)
LOOKUP_STRING = re.compile(r"^(_?Py[A-Z][A-Za-z0-9]*_\w+|_?Py_[A-Za-z]\w*|dlsym|dlvsym|dlopen|dlmopen|dl_iterate_phdr"
                           r"|dladdr1?|_dl_\w+|__libc_dl\w+|THP\w+)$")
PROC_SELF = re.compile(r"/proc/(self|thread-self|\d+|%d)(/|$)|/proc/\w*/(maps|smaps|mem|exe|auxv|environ)")
# functions a candidate may not define: a definition of one interposes the runtime's own. The CUDA
# runtime's and driver's by family (cudaEvent*, cuLaunch*, ...), so that a launcher of one's own
# called cudaRelu or cuMatmul stays a plain name
CUDA_API = (r"cuda(Event|Stream|Launch|Malloc|Free|Memcpy|Memset|Mem|Device|Get|Set|Graph|Func|Host|Peer|Ipc|Import"
            r"|External|Signal|Wait|Array|Mipmapped|Create|Destroy|Bind|Unbind|Profiler|Runtime|Driver|Pointer|Occupancy"
            r"|Thread|Ctx|Library|Kernel|Register|Unregister|Push|Pop|Configure|Setup|Init|Deinit|Peek|Chrono|Log)\w*"
            r"|cu(Launch|Mem|Event|Stream|Ctx|Module|Func|Graph|Device|Init|Get|Link|Library|Kernel|Occupancy|Pointer"
            r"|Profiler|Tex|Surf|Array|Import|External|Signal|Wait|User|Driver|Coredump|Checkpoint|Log|Multicast)\w*"
            r"|__cuda[A-Z]\w*")
INTERPOSED = re.compile(rf"^({CUDA_API}|_?Py[A-Z_]\w*|dl(open|mopen|sym|vsym|close|error|addr1?|info|iterate_phdr))$")
# compiler and linker flags (Python strings of a load_inline call) that rename symbols
RENAME_FLAGS = re.compile(r"(^|[\s,=])(--?defsym|--?wrap|--redefine-syms?|--?alias)([\s,=]|$)")
DEFINE_FLAG = re.compile(r"^-D\s*([A-Za-z_]\w*(?:\([^)]*\))?)(?:=(.*))?$", re.S)
CPP_TENSOR_VIEW = {"t", "transpose", "permute", "expand", "expand_as", "narrow", "select", "as_strided", "chunk", "split", "unbind", "to", "cuda", "cpu", "toType", "type", "item", "slice", "index", "from_blob", "resize_", "set_"}


_PRIM = {"int", "float", "double", "long", "short", "char", "bool", "unsigned", "signed", "auto", "void", "size_t", "float4", "float2", "dim3", "cudaStream_t"}


def _qualified(toks: list[Tok], i: int) -> tuple[list[str], int]:
    """The qualified name starting at id token i (a::b::c) and the index after it."""
    parts = [toks[i].text]
    j = i + 1
    while j + 1 < len(toks) and toks[j].text == "::" and toks[j + 1].kind == "id":
        parts.append(toks[j + 1].text)
        j += 2
    return parts, j


def check_cpp(text: str, file: str | None, precision: str = "fp32", line_offset: int = 0, kind: str | None = None) -> list[Finding]:
    """Findings for one C++/CUDA source. `kind` is the suffix (.cu/.cpp/.h); by default from `file`."""
    sink = _Sink(file, line_offset)
    toks = lex_cpp(text)
    low = _low_precision(precision)
    includes = [t for t in toks if t.kind == "inc"]
    torch_aware = any(TORCH_INC.match(t.text) for t in includes) or (kind or file or "").endswith((".cpp", ".cc", ".cxx"))
    for t in includes:
        name = t.text.strip()
        if THIRD_PARTY_INC.match(name):
            sink.add("third-party-library", t.line, f"#include <{name}>")
        if name not in REGISTRY_INCLUDES and (name.startswith("/") or ".." in name.split("/") or name.startswith("proc/")):
            sink.add("file-access", t.line, f'#include "{name}" reads a file outside the workspace sources')
        if PY_INC.match(name):
            sink.add("python-from-native", t.line, f"#include <{name}> reaches into the Python interpreter")
        elif SYSCALL_INC.match(name):
            sink.add("system-call", t.line, f"#include <{name}> declares system calls")
        elif SUSPICIOUS_INC.match(name):
            sink.add("suspicious-include", t.line, f"#include <{name}>")
        if low and LOW_INC.match(name) and not _task_dtype_name(name):
            sink.add("lowered-precision", t.line, f"#include <{name}> (half-precision or MMA header)", W)
    asm_strings = _asm_strings(toks)
    _check_symbol_binding(sink, text, toks, asm_strings)
    aliases: dict[str, list[str]] = {}
    tensor_names: set[str] = set()
    scalar_names: set[str] = set()
    # declarations of tensors (for operator checks): Tensor [const] [&] name
    for i, t in enumerate(toks):
        if t.kind == "id" and t.text == "Tensor":
            j = i + 1
            while j < len(toks) and toks[j].text in ("&", "&&", "const", "*"):
                j += 1
            if j < len(toks) and toks[j].kind == "id" and j + 1 < len(toks) and toks[j + 1].text in (",", ")", "=", ";", "{"):
                tensor_names.add(toks[j].text)
        if t.kind == "id" and t.text == "auto" and i + 3 < len(toks) and toks[i + 1].kind == "id" and toks[i + 2].text == "=":
            k = i + 3
            if toks[k].text in ("torch", "at") or (toks[k].kind == "id" and toks[k].text in tensor_names and toks[k + 1].text in (".", ";")):
                tensor_names.add(toks[i + 1].text)
            else:
                scalar_names.add(toks[i + 1].text)
        elif t.kind == "id" and (t.text in _PRIM or t.text.endswith("_t")):
            j = i + 1
            while j < len(toks) and toks[j].text in ("*", "&", "const", "__restrict__", "__restrict", "volatile"):
                j += 1
            if j + 1 < len(toks) and toks[j].kind == "id" and toks[j + 1].text in (",", ")", "=", ";", "["):
                scalar_names.add(toks[j].text)
    tensor_names -= scalar_names  # a name used for both in one file is ambiguous: skip it
    i = 0
    while i < len(toks):
        t = toks[i]
        prev = toks[i - 1] if i else Tok("punct", "", 0)
        nxt = toks[i + 1] if i + 1 < len(toks) else Tok("punct", "", 0)
        if t.kind == "punct" and t.text == "##":
            sink.add("token-pasting", t.line, "## in a macro")
        elif t.kind == "hash" and nxt.text == "pragma" and i + 2 < len(toks) and toks[i + 2].text in ("omp", "acc"):
            sink.add("threads", t.line, f"#pragma {toks[i + 2].text}")
        elif t.kind == "hash" and nxt.text == "embed":
            sink.add("file-access", t.line, "#embed reads a file")
        elif t.kind == "str" and i in asm_strings:
            if (low and LOW_PTX.search(t.text)) or (precision in ("fp16", "bf16") and FP8_PTX.search(t.text)):
                sink.add("lowered-precision", t.line, f"inline PTX `{t.text.strip()[:40]}` uses tensor cores / reduced precision")
            if ".incbin" in t.text:
                sink.add("file-access", t.line, ".incbin embeds a file")
            if SYSCALL_ASM.search(re.sub(r"\\[ntr]", " ", t.text)):  # "...\n\tsyscall": the escapes are not word breaks
                sink.add("system-call", t.line, f"inline assembly `{t.text.strip()[:40]}` makes a raw system call")
        elif t.kind == "id" and prev.text not in ("::", ".", "->"):
            parts, j = _qualified(toks, i)
            self_line = t.line
            if t.text == "namespace" and nxt.kind == "id" and i + 2 < len(toks) and toks[i + 2].text == "=":
                tgt, j2 = _qualified(toks, i + 3)
                aliases[nxt.text] = aliases.get(tgt[0], [tgt[0]]) + tgt[1:]
                i = j2
                continue
            if t.text == "using" and nxt.text == "namespace" and i + 2 < len(toks):
                ns, j2 = _qualified(toks, i + 2)
                if ns[0] in ("torch", "at") or ns[0] in THIRD_PARTY_NS:
                    sink.add("namespace-import" if ns[0] in ("torch", "at") else "third-party-library", self_line, f"using namespace {'::'.join(ns)}")
                if ns[0] in ("nvcuda",) and low:
                    sink.add("lowered-precision", self_line, "using namespace nvcuda (wmma)")
                i = j2
                continue
            if parts[0] in aliases:
                parts = aliases[parts[0]] + parts[1:]
            _check_name(sink, parts, toks, i, j, self_line, precision, torch_aware)
            i = j
            continue
        elif t.kind == "id" and prev.text in (".", "->") and nxt.text in ("(", "<") and t.text in PY_MEMBERS:
            sink.add("python-from-native", t.line, f".{t.text}() reaches a Python object")
        elif t.kind == "id" and prev.text in (".", "->") and torch_aware and nxt.text in ("(", "<"):
            m = t.text
            if m in TENSOR_COMPUTE or (m.endswith("_") and not m.startswith("_") and m not in ("requires_grad_", "resize_", "set_")) or DUNDER_MATH.match(m):
                sink.add("aten-compute", t.line, f"tensor method .{m}() computes with ATen")
            elif m in ("half", "bfloat16") and low:
                sink.add("lowered-precision", t.line, f".{m}() casts below {precision}")
            elif m in CPP_TENSOR_VIEW:
                sink.add("aten-compute", t.line, f"tensor method .{m}() runs ATen", W)
            else:
                _check_plain_id(sink, m, toks, i, precision)
        elif t.kind == "id" and prev.text in (".", "->", "::"):
            _check_plain_id(sink, t.text, toks, i, precision)
        elif t.kind == "punct" and t.text in ("+", "-", "*", "/", "+=", "-=", "*=", "/=", "%", "|", "&", "^") and torch_aware and tensor_names:
            a, b = prev, nxt
            after_b = toks[i + 2] if i + 2 < len(toks) else Tok("punct", "", 0)
            left = a.kind == "id" and a.text in tensor_names and (i < 2 or toks[i - 2].text not in (".", "->", "::"))
            right = b.kind == "id" and b.text in tensor_names and after_b.text not in (".", "->", "[", "(")
            operand_before = a.kind == "num" or a.text in (")", "]")
            unary_minus = t.text == "-" and a.text in ("(", "=", ",", "return", "{")
            if left or (right and (operand_before or unary_minus)):
                sink.add("aten-compute", t.line, f"operator {t.text} on a torch::Tensor runs ATen")
        i += 1
    # static tensors
    for i, t in enumerate(toks):
        if t.text == "static":
            window = [x.text for x in toks[i + 1:i + 9]]
            if "Tensor" in window:
                k = window.index("Tensor") + 1
                while k < len(window) and window[k] in ("&", "*", "const"):
                    k += 1
                if k + 1 < len(window) and window[k + 1] in (";", "=", "{", "["):
                    sink.add("static-tensor", t.line, "static torch::Tensor (an output cache across calls?)")
        if t.text == "constructor" and i >= 2 and toks[i - 2].text in ("__attribute__", "(") :
            sink.add("load-time-code", t.line, "__attribute__((constructor))")
    return sink.out


def _asm_strings(toks: list[Tok]) -> set[int]:
    """Indices of the string tokens inside asm(...) statements."""
    out: set[int] = set()
    for i, t in enumerate(toks):
        if t.kind != "id" or t.text not in ("asm", "__asm__", "__asm"):
            continue
        j = i + 1
        while j < len(toks) and toks[j].text in ("volatile", "__volatile__", "goto", "inline"):
            j += 1
        if j >= len(toks) or toks[j].text != "(":
            continue
        depth = 0
        for k in range(j, len(toks)):
            if toks[k].text == "(":
                depth += 1
            elif toks[k].text == ")":
                depth -= 1
                if depth == 0:
                    break
            elif toks[k].kind == "str":
                out.add(k)
    return out


# ---------------------------------------------------------------------------------------------
# symbol binding (issue 28): names given to the assembler and the linker, not to the compiler
# ---------------------------------------------------------------------------------------------


class _Directive(NamedTuple):
    start: int  # index of the `#` token
    end: int  # index after its last token
    body: int  # first token of a #define's replacement list (== end for other directives)


def _directives(text: str, toks: list[Tok]) -> list[_Directive]:
    """The preprocessor directives as token ranges: from `#` to the end of its line and the lines
    it continues onto with a backslash (the lexer keeps no line ends, so the text says where)."""
    lines = text.split("\n")
    out: list[_Directive] = []
    for i, t in enumerate(toks):
        if t.kind != "hash":
            continue
        last = t.line
        while last <= len(lines) and lines[last - 1].rstrip("\r").endswith("\\"):
            last += 1
        end = i + 1
        while end < len(toks) and toks[end].line <= last and toks[end].kind != "hash":
            end += 1
        body = end
        if i + 2 < end and toks[i + 1].text == "define":
            body = i + 3
            if body < end and toks[body].text == "(" and toks[body].line == toks[i + 2].line:
                depth = 0
                for k in range(body, end):
                    depth += {"(": 1, ")": -1}.get(toks[k].text, 0)
                    if depth == 0:
                        body = k + 1
                        break
        out.append(_Directive(i, end, body))
    return out


_SPECIFIERS = {"const", "volatile", "noexcept", "override", "final", "mutable", "&", "&&", "__restrict__", "__restrict"}


def _opens_function(toks: list[Tok], i: int, skip: list[bool]) -> bool:
    """Whether the `{` at i opens a function body (or a lambda's): its head ends in a parameter list,
    maybe followed by specifiers or a trailing return type. Namespace, class and initializer braces do not."""
    j = i - 1
    while j >= 0 and (skip[j] or toks[j].text in _SPECIFIERS):
        j -= 1
    if j >= 0 and toks[j].text == ")":
        return True
    for k in range(j, max(j - 40, 0) - 1, -1):  # auto f(...) -> T {
        if skip[k]:
            continue
        if toks[k].text in (";", "{", "}"):
            break
        if toks[k].text == "->" and k and toks[k - 1].text == ")":
            return True
    return False


def _scopes(toks: list[Tok], skip: list[bool]) -> tuple[list[bool], list[bool]]:
    """Per token: inside a function body; inside an extern "C" block."""
    in_fn = [False] * len(toks)
    in_c = [False] * len(toks)
    stack: list[tuple[bool, bool]] = []
    for i, t in enumerate(toks):
        if not skip[i] and t.kind == "punct" and t.text == "{":
            fn = bool(stack and stack[-1][0]) or _opens_function(toks, i, skip)
            c = bool(stack and stack[-1][1]) or (i >= 2 and toks[i - 1].kind == "str" and toks[i - 1].text == "C"
                                                 and toks[i - 2].text == "extern")
            stack.append((fn, c))
        elif not skip[i] and t.kind == "punct" and t.text == "}" and stack:
            stack.pop()
        if stack:
            in_fn[i], in_c[i] = stack[-1]
    return in_fn, in_c


def _close(toks: list[Tok], j: int) -> int:
    """Index of the `)` matching the `(` at j (or the last token)."""
    depth = 0
    for k in range(j, len(toks)):
        depth += {"(": 1, ")": -1}.get(toks[k].text, 0)
        if depth == 0:
            return k
    return len(toks) - 1


def _open(toks: list[Tok], k: int) -> int:
    """Index of the `(` matching the `)` at k."""
    depth = 0
    for j in range(k, -1, -1):
        depth += {")": 1, "(": -1}.get(toks[j].text, 0)
        if depth == 0:
            return j
    return 0


def _after_declarator(toks: list[Tok], i: int) -> bool:
    """Whether the token before i ends a declarator (a name, `]`, a parameter list): an asm there is
    a label naming the declaration's symbol, not a statement."""
    if i == 0:
        return False
    prev = toks[i - 1]
    if prev.kind == "id":
        return prev.text not in ("else", "do", "return", "case", "default", "goto", "throw")
    if prev.text == "]":
        return True
    if prev.text == ")":
        j = _open(toks, i - 1)
        return not (j and toks[j - 1].text in ("if", "for", "while", "switch", "catch"))
    return False


def _symbol_like(text: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z_.$][\w.$@]*", text)) and text not in ASM_BARE_OK


def _check_asm(sink: _Sink, toks: list[Tok], dirs: list[_Directive], in_fn: list[bool]) -> None:
    """asm labels on declarations and assembler outside function bodies: REJECT; inline asm statements
    inside functions (PTX) pass, unless their text binds symbols."""
    macro_of: dict[int, _Directive] = {}
    for d in dirs:
        if d.body < d.end:
            for k in range(d.body, d.end):
                macro_of[k] = d
    for i, t in enumerate(toks):
        if t.kind != "id" or t.text not in ASM_KEYWORDS or (i and toks[i - 1].text in (".", "->", "::")):
            continue
        j = i + 1
        while j < len(toks) and toks[j].text in ASM_QUALIFIERS:
            j += 1
        quals = j > i + 1
        d = macro_of.get(i)
        if j >= len(toks) or toks[j].text != "(":
            if d is not None:  # `#define ALIAS __asm__`: the keyword hidden behind a macro
                sink.add("symbol-rename", t.line, f"`{t.text}` behind a macro can rename a declaration's symbol")
            continue
        k = _close(toks, j)
        inner = toks[j + 1:k]
        depth, operands = 0, False
        template: list[str] = []  # the assembler text: the strings before the operands' first colon
        for x in inner:
            depth += {"(": 1, ")": -1}.get(x.text, 0)
            operands |= depth == 0 and x.text in (":", "::")
            if x.kind == "str" and not operands:
                template.append(x.text)
        strings = "".join(x.text for x in inner if x.kind == "str")
        literal = bool(inner) and all(x.kind == "str" for x in inner)
        shown = strings.strip()[:40]
        statement = quals or operands
        if d is not None:  # a macro's body: where it expands is unknown, so judge the text
            label = not statement and (not literal or _symbol_like(strings) or (i > d.body and _after_declarator(toks, i)))
            if label:
                sink.add("symbol-rename", t.line, f"asm label `{t.text}({shown or '...'})` in a macro renames the symbol of a declaration")
        elif not statement and _after_declarator(toks, i):
            sink.add("symbol-rename", t.line, f"asm label `{t.text}(\"{shown}\")` gives a declaration the symbol `{shown}`")
        elif not in_fn[i]:
            sink.add("symbol-rename", t.line, f"assembler outside a function body (`{shown}`) can define or bind symbols")
        # the template alone: operand constraints and clobbers ("r", "rdi") glued onto it would hide a
        # trailing `@PLT` from the word boundary (`...@PLTrrdi`)
        text = re.sub(r"\\[ntr]", " ", "".join(template))
        m = GAS_DIRECTIVE.search(text)
        if m:
            sink.add("symbol-rename", t.line, f"assembler directive `.{m.group(1)}` in inline assembly defines or binds symbols")
        m = HOST_SYMREF.search(text)
        if m:
            sink.add("symbol-rename", t.line, f"inline assembly addresses a host symbol (`{m.group(0)}`)")


def _check_symbol_binding(sink: _Sink, text: str, toks: list[Tok], asm_strings: set[int]) -> None:
    """Everything that gives the assembler or linker another name than the compiler sees: asm labels,
    symbol attributes and pragmas, definitions that interpose the runtime's functions; and the
    run-time lookup of code that no name in the source shows (includes, /proc paths, C-API names in strings)."""
    dirs = _directives(text, toks)
    skip = [False] * len(toks)
    for d in dirs:
        for k in range(d.start, d.end):
            skip[k] = True
    in_fn, in_c = _scopes(toks, skip)
    _check_asm(sink, toks, dirs, in_fn)
    for d in dirs:
        head = toks[d.start + 1].text if d.start + 1 < d.end else ""
        if head == "pragma" and d.start + 2 < d.end and toks[d.start + 2].text in RENAME_PRAGMAS:
            sink.add("symbol-rename", toks[d.start].line, f"#pragma {toks[d.start + 2].text} binds a name to another symbol")
    for i, t in enumerate(toks):
        nxt = toks[i + 1] if i + 1 < len(toks) else Tok("punct", "", 0)
        if t.kind == "inc" and LOOKUP_INC.match(t.text.strip()):
            sink.add("runtime-symbol-lookup", t.line, f"#include <{t.text.strip()}> walks the loader's or torch's symbol tables")
        elif t.kind == "str" and i not in asm_strings and not (i >= 1 and toks[i - 1].text == "extern"):
            if PROC_SELF.search(t.text):
                sink.add("runtime-symbol-lookup", t.line, f'"{t.text[:40]}" reads the process\'s own memory map or image')
            elif LOOKUP_STRING.match(t.text.strip()):
                sink.add("runtime-symbol-lookup", t.line, f'the string "{t.text.strip()}" names a symbol of the interpreter or the loader')
        elif t.kind == "id" and t.text == "_Pragma" and nxt.text == "(" and i + 2 < len(toks) and toks[i + 2].kind == "str":
            words = toks[i + 2].text.split()
            if words and words[0] in RENAME_PRAGMAS:
                sink.add("symbol-rename", t.line, f"_Pragma(\"{words[0]} ...\") binds a name to another symbol")
        elif t.kind == "id" and t.text in ("__attribute__", "__attribute") and nxt.text == "(":
            for x in toks[i + 2:_close(toks, i + 1)]:
                if x.kind == "id" and x.text.strip("_") in SYMBOL_ATTRS:
                    sink.add("symbol-rename", x.line, f"__attribute__(({x.text.strip('_')})) binds the declaration to another symbol or section")
        elif t.kind == "id" and t.text in ("gnu", "__gnu__") and nxt.text == "::" and i + 2 < len(toks) and toks[i + 2].text.strip("_") in SYMBOL_ATTRS:
            sink.add("symbol-rename", t.line, f"[[gnu::{toks[i + 2].text.strip('_')}]] binds the declaration to another symbol or section")
        elif t.kind == "id" and INTERPOSED.match(t.text) and nxt.text == "(" and not skip[i] and not in_fn[i] \
                and (in_c[i] or _extern_c_head(toks, i)):
            k = _close(toks, i + 1)
            m = k + 1
            while m < len(toks) and toks[m].text in _SPECIFIERS:
                m += 1
            if m < len(toks) and toks[m].text == "{":
                sink.add("symbol-rename", t.line, f'extern "C" {t.text}() defined here interposes the runtime\'s own function')


def _extern_c_head(toks: list[Tok], i: int) -> bool:
    """Whether the declaration containing token i starts with extern "C"."""
    for k in range(i - 1, max(i - 30, 0) - 1, -1):
        if toks[k].text in (";", "{", "}") and toks[k].kind == "punct":
            return False
        if toks[k].kind == "str" and toks[k].text == "C" and k and toks[k - 1].text == "extern":
            return True
    return False


def _check_name(sink: _Sink, parts: list[str], toks: list[Tok], i: int, j: int, line: int, precision: str, torch_aware: bool) -> None:
    if parts[0] == "" and len(parts) > 1:
        parts = parts[1:]
    head, last = parts[0], parts[-1]
    name = "::".join(parts)
    nxt = toks[j].text if j < len(toks) else ""
    prev = toks[i - 1].text if i else ""
    for p in parts:
        _check_plain_id(sink, p, toks, i, precision, name=name, called=nxt in ("(", "<"), prev=prev)
    if head in ("py", "pybind11") and len(parts) > 1:
        if parts[1] not in PYBIND_OK or any(p in ("import", "exec", "eval", "globals") for p in parts[2:]):
            sink.add("python-from-native", line, f"{name} reaches Python objects; a binding may only define functions")
        return
    if head in TORCH_NAMESPACES and len(parts) > 1:
        if STREAM_CPP.match(last) or GRAPH_CPP.match(last) or TIMING_CPP.match(last) or LOW_CPP_IDS.match(last):
            return  # reported by the plain-identifier rules
        if "nn" in parts or "native" in parts or "blas" in parts:
            sink.add("aten-compute", line, f"{name} is ATen compute")
            return
        if last in ATEN_ALLOWED or head in ("c10",) and last[:1].islower() and last not in ("add", "mul"):
            return
        if last[:1].isupper() or re.match(r"^k[A-Z]", last) or last in ("cuda", "indexing"):
            return  # types, constants and namespaces
        if last == "from_blob":
            sink.add("aten-compute", line, f"{name} aliases foreign memory", W)
            return
        sink.add("aten-compute", line, f"{name} is an ATen/torch function")
        return
    if head in THIRD_PARTY_NS and len(parts) > 1:
        sink.add("third-party-library", line, f"{name} is a third-party library")
    elif head == "std" and len(parts) > 1:
        if parts[1] in ("thread", "jthread", "async"):
            sink.add("threads", line, f"{name}")
        elif parts[1] in FILE_TYPES_CPP:
            sink.add("file-access", line, f"{name}")
        elif parts[1] == "chrono":
            sink.add("timing-probe", line, f"{name}")
    elif head in ("boost",) and "thread" in parts:
        sink.add("threads", line, name)
    elif head in FILE_TYPES_CPP and len(parts) == 1 and torch_aware:
        sink.add("file-access", line, name)


def _check_plain_id(sink: _Sink, word: str, toks: list[Tok], i: int, precision: str, name: str | None = None, called: bool | None = None, prev: str | None = None) -> None:
    line = toks[i].line
    if called is None:
        called = i + 1 < len(toks) and toks[i + 1].text == "("
        prev = toks[i - 1].text if i else ""
    shown = name or word
    if PY_CAPI.match(word):
        sink.add("python-from-native", line, f"{shown} is the Python C API")
    elif SYSCALL_ID.match(word):
        sink.add("system-call", line, f"{shown} names a system call or its flags")
    elif word in SYSCALL_CPP and called and prev not in (".", "->"):
        sink.add("system-call", line, f"{shown}() is a system call")
    elif RUNTIME_LOOKUP.match(word):
        sink.add("runtime-symbol-lookup", line, f"{shown} finds code or symbols at run time")
    elif word.startswith(("__wrap_", "__real_")):
        sink.add("symbol-rename", line, f"{shown} exists only for a linker --wrap of another symbol")
    elif STREAM_CPP.match(word):
        sink.add("cuda-stream", line, f"{shown} uses another stream")
    elif GRAPH_CPP.match(word):
        sink.add("cuda-graph", line, f"{shown} is a CUDA graph")
    elif THREAD_CPP.match(word) and called:
        sink.add("threads", line, f"{shown}()")
    elif NATIVE_CPP.match(word):
        sink.add("native-code", line, f"{shown} loads code outside the build")
    elif THIRD_PARTY_ID.match(word):
        sink.add("third-party-library", line, f"{shown} is a third-party library")
    elif CUBLAS_NON_GEMM.match(word):
        sink.add("cublas-non-gemm", line, f"{shown} is not a matrix product")
    elif CUDNN_NON_CONV.match(word):
        sink.add("cudnn-non-conv", line, f"{shown} is not a convolution")
    elif _below_task(word, precision):
        sink.add("lowered-precision", line, f"{shown} is below the task's precision ({precision})")
    elif word in ("setAllowTF32CuBLAS", "setAllowTF32CuDNN", "setFloat32MatmulPrecision", "setFloat32Precision"):
        sink.add("lowered-precision", line, f"{shown} changes global precision")
    elif TIMING_CPP.match(word):
        sink.add("timing-probe", line, f"{shown}")
    elif MALLOC_CPP.match(word) and called:
        sink.add("raw-cuda-malloc", line, f"{shown}()")
    elif prev not in (".", "->") and (name is None or "::" not in name or name.startswith("std::")):
        if word in PROC_CPP and called:
            sink.add("process-network", line, f"{shown}()")
        elif word in FILE_CPP and called:
            sink.add("file-access", line, f"{shown}()")
        elif word in ENV_CPP:
            sink.add("env-access", line, f"{shown}")


# ---------------------------------------------------------------------------------------------
# entry points
# ---------------------------------------------------------------------------------------------

CPP_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".h", ".hpp", ".hh", ".inl")


def check_sources(sources: dict[str, str], *, precision: str = "fp32", precision_source: str = "",
                  task_dtypes: tuple[str, ...] = ()) -> list[Finding]:
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


def check_single_file(text: str, *, precision: str = "fp32", name: str = "solution.py", precision_source: str = "",
                      task_dtypes: tuple[str, ...] = ()) -> list[Finding]:
    """Findings for a KernelBench single-file solution: the Python with the Python rules, and
    every string literal that holds C++/CUDA source (load_inline sources) with the C++ rules."""
    token = _TASK_DTYPES.set(frozenset(task_dtypes))
    try:
        out = check_python(text, name, precision)
    finally:
        _TASK_DTYPES.reset(token)
    return explain_precision(out, precision, precision_source, task_dtypes)
