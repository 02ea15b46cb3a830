"""The Python rules' name tables and the context of one file: what each name in it is bound to.

Contract: the sets and patterns the Python checker (`static_python.py`) matches calls, attributes and
imports against, and `_build_ctx(tree)`: the file's imports, aliases, classes and which names hold tensors,
modules or scalars. Imports only the standard library and the rules' table.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

TORCH_ALLOWED_CALLS = {
    "torch.empty",
    "torch.empty_like",
    "torch.empty_strided",
    "torch.zeros",
    "torch.zeros_like",
    "torch.Size",
    "torch.device",
    "torch.is_tensor",
    "torch.no_grad",
    "torch.inference_mode",
    "torch.finfo",
    "torch.iinfo",
    "torch.get_default_dtype",
    "torch.is_floating_point",
    "torch.cuda.current_stream",
    "torch.cuda.current_device",
    "torch.cuda.is_available",
    "torch.cuda.device",
    "torch.cuda.get_device_properties",
    "torch.cuda.device_count",
    "torch.cuda.synchronize",
    "torch.nn.Parameter",
    "torch.utils.cpp_extension.load_inline",
    "torch.utils.cpp_extension.load",
}
# tensor methods that compute (REJECT in forward); any name ending in "_" also counts
TENSOR_COMPUTE = set(
    """
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
""".split()
)
TENSOR_VIEW = set(
    """
t transpose permute expand expand_as narrow select as_strided chunk split tensor_split unbind unfold
movedim swapaxes swapdims to cuda cpu float double int long short bool char byte type type_as item
tolist numpy pin_memory masked_select index
""".split()
)
ALLOWED_INPLACE = {"requires_grad_", "share_memory_"}
DUNDER_MATH = re.compile(
    r"^__(r|i)?(add|sub|mul|matmul|truediv|floordiv|mod|pow|neg|pos|abs|and|or|xor|lshift|rshift|invert|lt|le|gt|ge|eq|ne)__$"
)
LOW_DTYPES = {
    "float16",
    "half",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "complex32",
    "chalf",
}
FP8_DTYPES = {d for d in LOW_DTYPES if d.startswith("float8")}
PRECISION_ATTRS = {
    "allow_tf32",
    "allow_fp16_reduced_precision_reduction",
    "allow_bf16_reduced_precision_reduction",
    "fp32_precision",
    "set_float32_matmul_precision",
}

MODULE_RULES: dict[str, str] = {
    "threading": "threads",
    "_thread": "threads",
    "multiprocessing": "threads",
    "concurrent": "threads",
    "asyncio": "threads",
    "torch.multiprocessing": "threads",
    "sched": "threads",
    "signal": "threads",
    "subprocess": "process-network",
    "socket": "process-network",
    "ssl": "process-network",
    "urllib": "process-network",
    "urllib3": "process-network",
    "http": "process-network",
    "requests": "process-network",
    "httpx": "process-network",
    "aiohttp": "process-network",
    "ftplib": "process-network",
    "smtplib": "process-network",
    "xmlrpc": "process-network",
    "webbrowser": "process-network",
    "pty": "process-network",
    "telnetlib": "process-network",
    "ctypes": "native-code",
    "_ctypes": "native-code",
    "cffi": "native-code",
    "gc": "introspection",
    "inspect": "introspection",
    "__main__": "introspection",
    "importlib": "dynamic-code",
    "runpy": "dynamic-code",
    "marshal": "dynamic-code",
    "code": "dynamic-code",
    "shutil": "file-access",
    "tempfile": "file-access",
    "mmap": "file-access",
    "glob": "file-access",
    "pickle": "file-access",
    "shelve": "file-access",
    "random": "rng-state",
    "cuda_agent": "import-cuda-agent",
    "model": "reference-model",
    "torch.nn.functional": "nn-functional",
    "torch._dynamo": "torch-compiler",
    "torch._inductor": "torch-compiler",
    "torch.jit": "torch-compiler",
    "torch.utils._python_dispatch": "tensor-subclass",
    "torch.overrides": "tensor-subclass",
}
THIRD_PARTY_PY = {
    "triton",
    "cupy",
    "pycuda",
    "numba",
    "jax",
    "tensorflow",
    "cutlass",
    "cuda",
    "apex",
    "xformers",
    "flash_attn",
    "transformer_engine",
    "deepspeed",
    "liger_kernel",
    "tilelang",
    "warp",
    "taichi",
    "torchao",
    "bitsandbytes",
    "thunderkittens",
    "cuequivariance",
    "nvmath",
    "cuda_core",
    "tvm",
}
LOW_PRECISION_PY = {"torch.autocast", "torch.cuda.amp", "torch.amp", "torch.set_float32_matmul_precision"}
TIMING_PY = {
    "time",
    "timeit",
    "torch.cuda.Event",
    "torch.profiler",
    "torch.cuda.is_current_stream_capturing",
    "torch.autograd.profiler",
}
STREAM_PY = {
    "torch.cuda.Stream",
    "torch.cuda.stream",
    "torch.cuda.set_stream",
    "torch.cuda.ExternalStream",
    "torch.cuda.StreamContext",
    "torch.Stream",
}
GRAPH_PY = {"torch.cuda.CUDAGraph", "torch.cuda.graph", "torch.cuda.graphs", "torch.cuda.make_graphed_callables"}
RNG_PY = {
    "torch.manual_seed",
    "torch.seed",
    "torch.initial_seed",
    "torch.get_rng_state",
    "torch.set_rng_state",
    "torch.Generator",
    "torch.random",
    "torch.cuda.manual_seed",
    "torch.cuda.manual_seed_all",
    "torch.cuda.seed",
    "torch.cuda.seed_all",
    "torch.cuda.initial_seed",
    "torch.cuda.get_rng_state",
    "torch.cuda.set_rng_state",
    "torch.cuda.get_rng_state_all",
    "torch.cuda.set_rng_state_all",
    "torch.cuda.random",
    "numpy.random",
}
SUBCLASS_NAMES = {
    "__torch_function__",
    "__torch_dispatch__",
    "_make_subclass",
    "_make_wrapper_subclass",
    "TorchDispatchMode",
    "TorchFunctionMode",
    "_DisableTorchDispatch",
}
FRAME_ATTRS = {
    "f_back",
    "f_locals",
    "f_globals",
    "f_code",
    "f_builtins",
    "gi_frame",
    "cr_frame",
    "ag_frame",
    "tb_frame",
    "tb_next",
    "__globals__",
    "__closure__",
    "__code__",
    "__builtins__",
    "__subclasses__",
}
SYS_INTROSPECT = {
    "sys._getframe",
    "sys._current_frames",
    "sys.settrace",
    "sys.setprofile",
    "sys.modules",
    "sys.meta_path",
    "sys.path_hooks",
    "sys.addaudithook",
    "sys.exc_info",
    "sys.exception",
    "sys.last_value",
    "sys.monitoring",
}
OS_PROCESS = re.compile(r"^os\.(system|popen|exec\w*|spawn\w*|fork\w*|posix_spawn\w*|kill\w*|wait\w*)$")
OS_FILE = re.compile(
    r"^os\.(open|read|write|pread|pwrite|fdopen|dup2?|pipe2?|remove|unlink|rename|replace|listdir|scandir|walk|mkdir|makedirs|rmdir|chmod|chown|symlink|link|truncate|ftruncate|sendfile|memfd_create|readlink|stat|lstat|utime|mkfifo|access|chdir)$"
)
FILE_CALLS = {
    "open",
    "io.open",
    "torch.load",
    "torch.save",
    "numpy.load",
    "numpy.save",
    "numpy.fromfile",
    "numpy.loadtxt",
    "numpy.savetxt",
    "numpy.memmap",
    "io.FileIO",
    "pathlib.Path",
    "pathlib.PosixPath",
}
FILE_METHODS = {
    "read_text",
    "write_text",
    "read_bytes",
    "write_bytes",
    "tofile",
    "touch",
    "unlink",
    "symlink_to",
    "hardlink_to",
}
DYNAMIC_BUILTINS = {"eval", "exec", "compile", "__import__", "breakpoint"}
INTROSPECT_BUILTINS = {"globals", "locals", "vars"}
EXT_LOADERS = {"torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load"}
NN_NOT_MODULES = {"Parameter", "ParameterList", "ParameterDict", "Buffer"}
CPP_HINT = ("#include", "__global__", "torch::", "at::", 'extern "C"', "<<<", "cudaStream", "cublas", "PYBIND11")
BAD_LDLIBS = re.compile(
    r"^-l(curand|cufft\w*|cusparse\w*|cusolver\w*|nccl|cutensor\w*|npp\w*|nvrtc\w*|cutlass\w*|nvJitLink)$"
)


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
            if (
                parts[0]
                in (
                    "open",
                    "eval",
                    "exec",
                    "compile",
                    "__import__",
                    "getattr",
                    "setattr",
                    "delattr",
                    "globals",
                    "locals",
                    "vars",
                    "breakpoint",
                )
                and parts[0] not in self.defined
            ):
                return ".".join(parts)
            return None
        return ".".join([head] + parts[1:])


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body:
            first = n.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
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
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("register_buffer", "register_parameter")
        ):
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
        if (
            origin.endswith(".Model")
            or origin == "model.Model"
            or (isinstance(val.func, ast.Name) and val.func.id == "Model")
        ):
            return "model"
        return "other"
    parts = _chain(val)
    if parts and parts[0] in ctx.ext_names:
        return "ext"
    origin = ctx.resolve(val) or ""
    if origin.startswith("torch."):
        return "torch-fn"
    return "other"


SYSCALL_PY = {
    "os.unshare",
    "os.setns",
    "os.pidfd_open",
    "os.setuid",
    "os.setgid",
    "os.setresuid",
    "os.setresgid",
    "os.seteuid",
    "os.setegid",
    "os.setgroups",
    "os.chroot",
    "os.sched_setaffinity",
    "resource.setrlimit",
    "resource.prlimit",
}
