"""The C++/CUDA half of the static checks: the rules over a token stream.

Contract: `check_cpp(text, file, precision, line_offset, kind)` returns the findings of the C++ rules for one
source (a file of `kernels/`, or a load_inline string at `line_offset`): torch / ATen compute, side streams,
threads, graphs, process / file / native-library access, Python from native code, third-party libraries,
lowered precision, and (through `static_cpp_symbols.py`) symbols under other names.
"""

from __future__ import annotations

import re

from cuda_agent.eval.checks.static_cpp_lexer import Tok, lex_cpp
from cuda_agent.eval.checks.static_cpp_symbols import RUNTIME_LOOKUP, _asm_strings, _check_symbol_binding, c_unescape
from cuda_agent.eval.checks.static_python_names import DUNDER_MATH, TENSOR_COMPUTE
from cuda_agent.eval.checks.static_rules import LOW_CPP_IDS, W, _below_task, _low_precision, _Sink, _task_dtype_name
from cuda_agent.eval.judge.result import Finding

ATEN_ALLOWED = {
    "empty",
    "empty_like",
    "empty_strided",
    "zeros",
    "zeros_like",
    "dtype",
    "device",
    "layout",
    "requires_grad",
    "device_of",
    "getCurrentCUDAStream",
    "getDefaultCUDAStream",
    "getCurrentCUDABlasHandle",
    "getCurrentCUDABlasLtHandle",
    "getCurrentDeviceProperties",
    "getDeviceProperties",
    "current_device",
    "device_count",
    "getCurrentCUDASparseHandle",
    "getCudnnHandle",
    "elementSize",
    "toString",
    "isFloatingType",
    "typeMetaToScalarType",
    "scalarTypeToTypeMeta",
    "check",
    "get_device",
    "getCUDADeviceAllocator",
    "maybe_wrap_dim",
    "ArrayRef",
    "IntArrayRef",
}
TORCH_NAMESPACES = ("torch", "at", "c10", "caffe2")
STREAM_CPP = re.compile(
    r"^(cudaStreamCreate\w*|cuStreamCreate\w*|cudaStreamPerThread|cudaStreamNonBlocking|getStreamFromPool|getStreamFromExternal|setCurrentCUDAStream|cudaStreamAddCallback|cudaLaunchHostFunc|cuLaunchHostFunc|CUDAStreamGuard|CUDAMultiStreamGuard)$"
)
GRAPH_CPP = re.compile(
    r"^(cudaGraph\w*|cuGraph\w*|cudaStreamBeginCapture\w*|cudaStreamEndCapture|cuStreamBeginCapture\w*|cuStreamEndCapture|CUDAGraph|cudaStreamGetCaptureInfo\w*|cudaStreamUpdateCaptureDependencies\w*)$"
)
THREAD_CPP = re.compile(r"^(pthread_create|pthread_\w+|thrd_create|_beginthread\w*|CreateThread|clone)$")
PROC_CPP = {
    "fork",
    "vfork",
    "system",
    "popen",
    "execl",
    "execlp",
    "execle",
    "execv",
    "execvp",
    "execvpe",
    "posix_spawn",
    "posix_spawnp",
    "socket",
    "connect",
    "getaddrinfo",
    "gethostbyname",
    "kill",
    "ptrace",
}
FILE_CPP = {
    "fopen",
    "fopen64",
    "freopen",
    "fdopen",
    "open",
    "open64",
    "openat",
    "creat",
    "write",
    "read",
    "pwrite",
    "pread",
    "dup",
    "dup2",
    "mmap",
    "unlink",
    "rename",
    "truncate",
    "ftruncate",
    "sendfile",
    "memfd_create",
    "opendir",
    "readlink",
}
FILE_TYPES_CPP = {
    "ofstream",
    "ifstream",
    "fstream",
    "filebuf",
    "basic_ofstream",
    "basic_ifstream",
    "basic_fstream",
    "filesystem",
}
NATIVE_CPP = re.compile(
    r"^(dlopen|dlsym|dlmopen|dlvsym|LoadLibrary\w*|GetProcAddress|cuModuleLoad\w*|cuLibraryLoad\w*|cudaLibraryLoad\w*|nvrtc\w+|nvJitLink\w+|cuLinkCreate\w*|cuLinkAdd\w*)$"
)
ENV_CPP = {"getenv", "secure_getenv", "setenv", "putenv", "unsetenv", "environ"}
TIMING_CPP = re.compile(
    r"^(cudaEventCreate\w*|cudaEventRecord\w*|cudaEventElapsedTime\w*|cudaStreamIsCapturing|cuStreamIsCapturing|gettimeofday|clock_gettime|chrono|CUDAEvent|cudaStreamQuery)$"
)
MALLOC_CPP = re.compile(
    r"^(cudaMalloc|cudaMallocAsync|cudaMallocManaged|cudaMallocHost|cudaHostAlloc|cudaMallocPitch|cudaMalloc3D|cuMemAlloc\w*)$"
)
THIRD_PARTY_NS = {"cutlass", "cute", "thrust", "cub", "hipcub", "Eigen", "cutensor", "nccl", "tbb"}
THIRD_PARTY_ID = re.compile(
    r"^(curand\w*|cufft\w*|cusparse\w*|cusolver\w*|nccl[A-Z]\w*|cutensor\w*|npp[a-zA-Z]\w*|cublasXt\w*|magma_\w+)$"
)
THIRD_PARTY_INC = re.compile(
    r"^(cutlass|cute|thrust|cub|hipcub|Eigen|unsupported/Eigen|cudnn_frontend)(/|\.|$)|^(curand|cufft|cusparse|cusolver|nccl|cutensor|npp|nvjpeg|magma|cudss|nvrtc|nvJitLink|cublasXt)",
    re.I,
)
CUBLAS_NON_GEMM = re.compile(
    r"^cublas(?:i?[sdczh]?)(axpy|scal|copy|swap|dot[uc]?|nrm2|asum|amax|amin|rot|rotg|rotm|rotmg|geam|dgmm|trsm|trsv|tbsv|tpsv|getr[fis]|geqrf|gels|matinv)(?:ex)?(?:batched|stridedbatched)?(?:_v2)?(?:_64)?$",
    re.I,
)
CUDNN_NON_CONV = re.compile(
    r"^cudnn(Activation(Forward|Backward)|Softmax\w+|Pooling\w+|BatchNormalization\w+|Normalization\w+|LRN\w+|DivisiveNormalization\w+|RNN\w+|MultiHead\w+|Dropout(Forward|Backward)|OpTensor|ReduceTensor|SpatialTf\w+|CTCLoss\w*|TransformTensor\w*|ScaleTensor|SetTensor|Backend\w*)$"
)
LOW_PTX = re.compile(
    r"\b(w?gmma|mma\.sync|mma\.sp|tcgen05|wmma)\b|\.tf32\b|\.f16x?2?\b|\.bf16x?2?\b|\.e4m3|\.e5m2|cvt\.rna\.tf32"
)
FP8_PTX = re.compile(r"\.e4m3|\.e5m2")
SUSPICIOUS_INC = re.compile(
    r"^(thread|future|pthread\.h|fstream|filesystem|dlfcn\.h|sys/socket\.h|netinet/.*|arpa/.*|unistd\.h|fcntl\.h|sys/mman\.h|spawn\.h|sys/wait\.h|omp\.h|chrono|sys/time\.h|ctime|time\.h)$"
)
LOW_INC = re.compile(r"^(cuda_fp16\.h|cuda_bf16\.h|cuda_fp8\.h|mma\.h|cuda_fp16\.hpp|cuda_bf16\.hpp)$")
TORCH_INC = re.compile(r"^(torch/|ATen/|c10/|(\.\./)?binding_registry\.h)")
# The workspace's fixed registry header, by our spelling and by the public CUDA-Agent release's
# (kernels/x_binding.cpp includes "../binding_registry.h"); the build resolves both to the pristine copy.
REGISTRY_INCLUDES = ("binding_registry.h", "../binding_registry.h")
# Native code that reaches Python can rewrite the harness in its own process (issue 12).
PY_CAPI = re.compile(r"^_?Py[A-Z_][A-Za-z0-9_]*$|^PYBIND11_(EMBEDDED_MODULE|OVERRIDE\w*|OVERLOAD\w*)$")
PY_INC = re.compile(
    r"^(Python\.h|frameobject\.h|structmember\.h|pyconfig\.h|pythonrun\.h|pybind11/(embed|eval|exec|iostream|pytypes|cast|attr)\.h|python[0-9.]*/.*)$"
)
# pybind11 names a binding needs to define functions; everything else in the namespace reaches Python objects
PYBIND_OK = {
    "module_",
    "module",
    "arg",
    "arg_v",
    "kw_only",
    "pos_only",
    "call_guard",
    "gil_scoped_release",
    "return_value_policy",
    "overload_cast",
    "const_",
    "doc",
}
PY_MEMBERS = {
    "attr",
    "add_object",
    "import",
    "def_submodule",
    "reload",
    "inc_ref",
    "dec_ref",
    "ptr",
    "def_property",
    "def_readwrite",
    "def_readonly",
    "def_static",
    "def_property_readonly",
}
SYSCALL_CPP = {
    "mount",
    "umount",
    "umount2",
    "syscall",
    "unshare",
    "setns",
    "prctl",
    "seccomp",
    "personality",
    "pivot_root",
    "chroot",
    "mount_setattr",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "clone3",
    "process_vm_readv",
    "process_vm_writev",
    "capset",
    "setuid",
    "setgid",
    "setresuid",
    "setresgid",
    "seteuid",
    "setegid",
    "setgroups",
    "keyctl",
    "add_key",
    "bpf",
    "perf_event_open",
    "ioctl",
    "prlimit",
    "prlimit64",
    "setrlimit",
    "init_module",
    "finit_module",
    "kexec_load",
    "reboot",
    "swapon",
    "userfaultfd",
    "pidfd_open",
    "pidfd_getfd",
    "pidfd_send_signal",
    "ptrace",
    "mprotect",
}
SYSCALL_ID = re.compile(
    r"^(__NR_\w+|SYS_\w+|SECCOMP_\w+|PR_SET_\w+|CLONE_NEW\w+|MS_REMOUNT|MS_BIND|MNT_DETACH|PTRACE_\w+)$"
)
SYSCALL_INC = re.compile(
    r"^(sys/syscall\.h|syscall\.h|sys/mount\.h|sys/prctl\.h|sys/ptrace\.h|sys/personality\.h|sys/capability\.h|sys/fsuid\.h|sched\.h|seccomp\.h|linux/.*|asm/.*)$"
)
SYSCALL_ASM = re.compile(r"\bsyscall\b|\bsysenter\b|\bint\s+\$?0x80\b|\bsvc\s+#?0\b")
CPP_TENSOR_VIEW = {
    "t",
    "transpose",
    "permute",
    "expand",
    "expand_as",
    "narrow",
    "select",
    "as_strided",
    "chunk",
    "split",
    "unbind",
    "to",
    "cuda",
    "cpu",
    "toType",
    "type",
    "item",
    "slice",
    "index",
    "from_blob",
    "resize_",
    "set_",
}


_PRIM = {
    "int",
    "float",
    "double",
    "long",
    "short",
    "char",
    "bool",
    "unsigned",
    "signed",
    "auto",
    "void",
    "size_t",
    "float4",
    "float2",
    "dim3",
    "cudaStream_t",
}


def _qualified(toks: list[Tok], i: int) -> tuple[list[str], int]:
    """The qualified name starting at id token i (a::b::c) and the index after it."""
    parts = [toks[i].text]
    j = i + 1
    while j + 1 < len(toks) and toks[j].text == "::" and toks[j + 1].kind == "id":
        parts.append(toks[j + 1].text)
        j += 2
    return parts, j


def check_cpp(
    text: str, file: str | None, precision: str = "fp32", line_offset: int = 0, kind: str | None = None
) -> list[Finding]:
    """Findings for one C++/CUDA source. `kind` is the suffix (.cu/.cpp/.h); by default from `file`."""
    sink = _Sink(file, line_offset)
    toks = lex_cpp(text)
    low = _low_precision(precision)
    includes = [t for t in toks if t.kind == "inc"]
    torch_aware = any(TORCH_INC.match(t.text) for t in includes) or (kind or file or "").endswith(
        (".cpp", ".cc", ".cxx")
    )
    for t in includes:
        name = t.text.strip()
        if THIRD_PARTY_INC.match(name):
            sink.add("third-party-library", t.line, f"#include <{name}>")
        if name not in REGISTRY_INCLUDES and (
            name.startswith("/") or ".." in name.split("/") or name.startswith("proc/")
        ):
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
            if (
                j < len(toks)
                and toks[j].kind == "id"
                and j + 1 < len(toks)
                and toks[j + 1].text in (",", ")", "=", ";", "{")
            ):
                tensor_names.add(toks[j].text)
        if (
            t.kind == "id"
            and t.text == "auto"
            and i + 3 < len(toks)
            and toks[i + 1].kind == "id"
            and toks[i + 2].text == "="
        ):
            k = i + 3
            if toks[k].text in ("torch", "at") or (
                toks[k].kind == "id" and toks[k].text in tensor_names and toks[k + 1].text in (".", ";")
            ):
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
                sink.add(
                    "lowered-precision",
                    t.line,
                    f"inline PTX `{t.text.strip()[:40]}` uses tensor cores / reduced precision",
                )
            decoded = c_unescape(t.text)  # "...\n\tsyscall", "sysc\x61ll": what the assembler reads
            if ".incbin" in decoded:
                sink.add("file-access", t.line, ".incbin embeds a file")
            if SYSCALL_ASM.search(decoded):
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
                    sink.add(
                        "namespace-import" if ns[0] in ("torch", "at") else "third-party-library",
                        self_line,
                        f"using namespace {'::'.join(ns)}",
                    )
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
            if (
                m in TENSOR_COMPUTE
                or (m.endswith("_") and not m.startswith("_") and m not in ("requires_grad_", "resize_", "set_"))
                or DUNDER_MATH.match(m)
            ):
                sink.add("aten-compute", t.line, f"tensor method .{m}() computes with ATen")
            elif m in ("half", "bfloat16") and low:
                sink.add("lowered-precision", t.line, f".{m}() casts below {precision}")
            elif m in CPP_TENSOR_VIEW:
                sink.add("aten-compute", t.line, f"tensor method .{m}() runs ATen", W)
            else:
                _check_plain_id(sink, m, toks, i, precision)
        elif t.kind == "id" and prev.text in (".", "->", "::"):
            _check_plain_id(sink, t.text, toks, i, precision)
        elif (
            t.kind == "punct"
            and t.text in ("+", "-", "*", "/", "+=", "-=", "*=", "/=", "%", "|", "&", "^")
            and torch_aware
            and tensor_names
        ):
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
            window = [x.text for x in toks[i + 1 : i + 9]]
            if "Tensor" in window:
                k = window.index("Tensor") + 1
                while k < len(window) and window[k] in ("&", "*", "const"):
                    k += 1
                if k + 1 < len(window) and window[k + 1] in (";", "=", "{", "["):
                    sink.add("static-tensor", t.line, "static torch::Tensor (an output cache across calls?)")
        if (
            t.text.strip("_") == "constructor"
            and i >= 2
            and toks[i - 2].text in ("__attribute__", "(", "gnu", "__gnu__")
        ):
            sink.add("load-time-code", t.line, "__attribute__((constructor))")
    return sink.out


def _check_name(
    sink: _Sink, parts: list[str], toks: list[Tok], i: int, j: int, line: int, precision: str, torch_aware: bool
) -> None:
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


def _check_plain_id(
    sink: _Sink,
    word: str,
    toks: list[Tok],
    i: int,
    precision: str,
    name: str | None = None,
    called: bool | None = None,
    prev: str | None = None,
) -> None:
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
