"""The post-build symbol check: what a candidate's compiled objects link to, whatever its sources say.

Why: a source can call a function under any name it likes. `extern "C" int run(const char*)
__asm__("PyRun_SimpleString")` has no forbidden identifier in it, yet its object references the
interpreter's `PyRun_SimpleString`, and the candidate's process runs Python that rewrites the harness
(issue 28). The static rules (`symbol-rename`, `runtime-symbol-lookup`) reject the renaming forms they
can see; this check reads the names the assembler actually wrote, so macros, pasted tokens, `-D` flags,
symbol versions and directives in asm strings end the same way.

Contract: `check(objects, layout, cache_dir=..., arch=..., deadline=...)` reads each compiled candidate
object's ELF symbol table (a small reader here: no binutils, no subprocess, microseconds) and returns a
REJECT `Finding` (rule `built-symbol`) per object that
- references a Python-facing symbol (`Py*`, `_Py*`, or one torch's `libtorch_python.so` exports) that the
  pristine infrastructure does not need: the allowlist for `layout` "workspace" is what a probe binding
  needs (every argument and return type pybind11 and torch convert, defaults, keyword-only arguments,
  `torch::wrap_pybind_function`), for "single_file" that plus what the pristine `binding.cpp` needs (a
  load_inline unit defines the module itself);
- references the dynamic linker's lookup or internals (`dlsym`, `dlopen`, `dlvsym`, `dl_iterate_phdr`,
  `dladdr`, `_dl_*`, `__libc_dl*`, `_r_debug`, `getauxval`), `mprotect` / `mmap` / `memfd_create` /
  `syscall`, the `exec*` / `fork` / `clone` / `posix_spawn` / `system` / `popen` family, or `__real_*` (a
  linker `--wrap`);
- defines (exports) a function of the CUDA runtime or driver, Python or the loader (`cudaEvent*`,
  `cuLaunch*`, ... by family, `Py*`, `dlsym`, `__wrap_*`, ...: an interposition attempt).
Each finding names the object and the symbols. Version suffixes (`dlsym@GLIBC_2.2.5`) are dropped first.

The allowlist: `BUILTIN` holds the sets measured for torch 2.13 / g++ 12 (`derive` printed them). An
object whose Python-facing symbols are all in it passes at once; only an object that needs something
outside it makes the evaluator derive the sets for its own toolchain: the probe binding and the pristine
binding.cpp compiled once with the build's own command (`Toolchain.cxx_cmd` of `build/toolchain.py`, objects in
the build's content-keyed cache, the pristine one shared with every workspace build), their symbols kept in
`<cache>/symbols/allow-<key>.json` (key: the toolchain fingerprint, which includes the torch and compiler
versions, and the probe's and templates' text). So a newer torch whose headers need more is not rejected
for it, and a renamed interpreter call is rejected on every toolchain. A probe that cannot be built
leaves the finding standing (fail closed) with the reason in its message.

Not guaranteed: that an object needing only allowlisted symbols cannot reach Python. The pristine set
itself holds enough (PyObject_GetAttrString, PyObject_SetAttrString, PyCMethod_New, ...) for native code
that knows what it is doing, and code can find any function at run time from an address it already has
(reading the in-memory ELF image of the library behind an allowlisted symbol, with no lookup call at
all). This check and the static rules only raise the cost; the closure is a time the candidate's process
never touches (issue 28 item 1, `timing/clock.py`). Single-file solutions whose load_inline arguments are
not static are built inside the candidate child (`build/single_file.py`), where no check of the parent's runs.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import mmap
import os
import re
import struct
import threading
import time
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from cuda_agent.eval.build import toolchain as toolchain_mod
from cuda_agent.eval.checks.static_cpp_symbols import CUDA_API
from cuda_agent.eval.judge.result import Finding, Severity

RULE = "built-symbol"
INSTEAD = "bind plain functions over tensors and scalars; declare nothing under another symbol's name"

# Python-facing by name: the interpreter's C API (every one of its symbols carries the prefix)
PY_SYMBOL = re.compile(r"^_?Py[A-Z_]")
# never referenced by an honest object: the loader's lookup and internals, page protection and mappings
# (fresh executable pages), raw syscalls, starting programs or processes
DENIED = re.compile(
    r"^(dlsym|dlvsym|dlopen|dlmopen|dlclose|dlerror|dlinfo|dladdr1?|dl_iterate_phdr|_dl_\w+|__dl_\w+"
    r"|__libc_dl\w+|_r_debug|getauxval|__getauxval|mprotect|pkey_mprotect|syscall|process_vm_writev"
    r"|ptrace|__real_\w+|mmap|mmap64|mremap|memfd_create|execve|execveat|fexecve|execv|execvp|execvpe"
    r"|execl|execlp|execle|fork|vfork|clone|clone3|posix_spawnp?|system|popen)$"
)
# never defined by a candidate: a global definition of one of these interposes the runtime's own
INTERPOSED = re.compile(
    rf"^({CUDA_API}|_?Py(?!Init_)[A-Z_]\w*|dl(open|mopen|sym|vsym|close|error|addr1?|info"
    r"|iterate_phdr)|__libc_\w+|_dl_\w+|__wrap_\w+)$"
)

# A binding as an honest candidate may write it: the argument and return types pybind11 and torch
# convert, argument options, overloads, lambdas and torch's error-translating wrapper. Not dicts:
# pybind11's std::map caster imports a module and calls it (PyImport_ImportModule,
# PyObject_CallFunctionObjArgs), which would put running Python within an allowlisted reach.
PROBE_BINDING = r"""// cuda-agent: the symbol allowlist's probe (eval/checks/symbols.py), never run
#include "binding_registry.h"
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <array>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace py = pybind11;
using torch::Tensor;

static Tensor p_tensor(Tensor a, const Tensor& b, Tensor& c) { return torch::empty_like(a); }
static Tensor p_scalars(Tensor a, int i, int64_t l, double d, float f, bool b, unsigned u, size_t s, int32_t i32,
                        uint8_t u8, c10::complex<float> cf, c10::complex<double> cd) { return a; }
static Tensor p_optional(Tensor a, std::optional<Tensor> b, c10::optional<Tensor> c, std::optional<double> d,
                         std::optional<int64_t> e, std::optional<bool> f) { return a; }
static std::vector<Tensor> p_vectors(std::vector<Tensor> a, std::vector<int64_t> b, std::vector<double> c,
                                     std::vector<int> d, std::array<int64_t, 2> e) { return a; }
static std::tuple<Tensor, Tensor> p_tuple(Tensor a) { return {a, a}; }
static std::pair<Tensor, Tensor> p_pair(Tensor a) { return {a, a}; }
static std::tuple<Tensor, int64_t, double> p_tuple_mixed(Tensor a) { return {a, 1, 2.0}; }
static Tensor p_torch_types(Tensor a, at::IntArrayRef s, c10::ScalarType t, c10::Device dev, c10::Layout lay,
                            c10::MemoryFormat mf, at::Scalar sc, c10::SymInt si) { return a; }
static Tensor p_string(Tensor a, std::string s, const std::string& t, const char* u) { return a; }
static double p_ret_double(Tensor a) { return 1.0; }
static int64_t p_ret_int(Tensor a) { return 1; }
static bool p_ret_bool(Tensor a) { return true; }
static void p_ret_void(Tensor a) {}
static std::string p_ret_string(Tensor a) { return "x"; }
static std::vector<int64_t> p_ret_sizes(Tensor a) { return a.sizes().vec(); }
static std::optional<Tensor> p_ret_optional(Tensor a) { return a; }
static Tensor p_overload(Tensor a) { return a; }
static Tensor p_overload(Tensor a, double s) { return a; }
static Tensor p_guarded(Tensor a) {
  const c10::cuda::OptionalCUDAGuard guard(a.device());
  auto stream = c10::cuda::getCurrentCUDAStream();
  TORCH_CHECK(a.is_contiguous(), "probe");
  return a;
}

static void bind_probe(pybind11::module_& m) {
  m.def("p_tensor", &p_tensor, "doc");
  m.def("p_scalars", &p_scalars, py::arg("a"), py::arg("i") = 0, py::arg("l") = 1, py::arg("d") = 1.0, py::arg("f") = 1.0f,
        py::arg("b") = true, py::arg("u") = 0u, py::arg("s") = 0, py::arg("i32") = 0, py::arg("u8") = 0,
        py::arg("cf") = c10::complex<float>(), py::arg("cd") = c10::complex<double>());
  m.def("p_optional", &p_optional, py::arg("a"), py::arg("b") = py::none(), py::arg("c") = py::none(),
        py::arg("d") = py::none(), py::arg("e") = std::optional<int64_t>(), py::arg("f") = std::nullopt);
  m.def("p_vectors", &p_vectors, py::call_guard<py::gil_scoped_release>());
  m.def("p_tuple", &p_tuple, py::return_value_policy::move);
  m.def("p_pair", &p_pair);
  m.def("p_tuple_mixed", &p_tuple_mixed);
  m.def("p_torch_types", &p_torch_types);
  m.def("p_string", &p_string, py::arg("a"), py::kw_only(), py::arg("s") = "x", py::arg("t") = std::string("y"),
        py::arg("u") = "z");
  m.def("p_ret_double", &p_ret_double, py::arg("a"), py::pos_only());
  m.def("p_ret_int", &p_ret_int);
  m.def("p_ret_bool", &p_ret_bool);
  m.def("p_ret_void", &p_ret_void);
  m.def("p_ret_string", &p_ret_string);
  m.def("p_ret_sizes", &p_ret_sizes);
  m.def("p_ret_optional", &p_ret_optional);
  m.def("p_overload", py::overload_cast<Tensor>(&p_overload));
  m.def("p_overload", py::overload_cast<Tensor, double>(&p_overload));
  m.def("p_lambda", [](Tensor a, double s) { return a; });
  m.def("p_wrapped", torch::wrap_pybind_function(p_tuple));
  m.def("p_guarded", &p_guarded, py::arg("a").noconvert());
  m.doc() = "probe";
}
REGISTER_BINDING(probe, bind_probe)
"""

# Measured with `derive` (torch 2.13.0+cpu, g++ 12.2, pybind11 of that torch): decides at once for
# objects that need nothing else (see the module docstring).
_BUILTIN_WORKSPACE = """
PyBaseObject_Type PyByteArray_AsString PyByteArray_Size PyByteArray_Type PyBytes_AsString PyBytes_AsStringAndSize
PyBytes_Size PyCFunction_Type PyCMethod_New PyCapsule_GetContext PyCapsule_GetName PyCapsule_GetPointer
PyCapsule_New PyCapsule_SetContext PyCapsule_SetDestructor PyComplex_AsCComplex PyComplex_FromDoubles
PyDict_GetItemWithError PyDict_New PyDict_SetDefault PyErr_Clear PyErr_Fetch PyErr_Format PyErr_NormalizeException
PyErr_Occurred PyErr_Restore PyErr_SetObject PyErr_SetString PyErr_WarnEx PyErr_WriteUnraisable PyEval_AcquireThread
PyEval_GetBuiltins PyEval_RestoreThread PyEval_SaveThread PyExc_FutureWarning PyExc_IndexError PyExc_MemoryError
PyExc_OverflowError PyExc_RuntimeError PyExc_SystemError PyExc_TypeError PyExc_ValueError PyException_SetCause
PyException_SetContext PyException_SetTraceback PyFloat_AsDouble PyFloat_FromDouble PyFloat_Type PyFrame_GetBack
PyFrame_GetCode PyFrame_GetLineNumber PyFrozenSet_Type PyGILState_Check PyGILState_Ensure
PyGILState_GetThisThreadState PyGILState_Release PyGen_Type PyIndex_Check PyInstanceMethod_New PyInstanceMethod_Type
PyInterpreterState_GetDict PyIter_Next PyList_New PyList_Size PyLong_AsLong PyLong_AsUnsignedLong PyLong_FromSize_t
PyLong_FromSsize_t PyMem_Calloc PyMem_Free PyModule_AddObject PyModule_Type PyNumber_Add PyNumber_Check
PyNumber_Float PyNumber_Long PyObject_ClearWeakRefs PyObject_Free PyObject_GC_UnTrack PyObject_GetAttrString
PyObject_GetItem PyObject_GetIter PyObject_HasAttrString PyObject_IsInstance PyObject_Repr PyObject_SetAttrString
PyObject_SetItem PyObject_Str PyProperty_Type PySequence_Check PySequence_GetItem PySequence_Size PySequence_Tuple
PySet_Type PyThreadState_Clear PyThreadState_DeleteCurrent PyThreadState_New PyThread_tss_create PyThread_tss_delete
PyThread_tss_get PyThread_tss_set PyTuple_New PyTuple_SetItem PyType_FromSpec PyType_IsSubtype PyType_Ready
PyType_Type PyUnicode_AsEncodedString PyUnicode_AsUTF8AndSize PyUnicode_AsUTF8String PyUnicode_Compare
PyUnicode_DecodeUTF8 PyUnicode_FromString PyUnicode_InternFromString PyWeakref_NewRef THPDeviceType THPDtypeType
THPLayoutType THPMemoryFormatType _PyObject_GetDictPtr _PyObject_New _PyThreadState_UncheckedGet _PyType_Lookup
_Py_Dealloc _Py_FalseStruct _Py_NoneStruct _Py_NotImplementedStruct _Py_TrueStruct _ZN5torch16PyWarningHandlerC1Ev
_ZN5torch16PyWarningHandlerD1Ev _ZN5torch29translate_exception_to_pythonERKNSt15__exception_ptr13exception_ptrE
_ZN8pybind116detail11type_casterIN2at6TensorEvE4castERKS3_NS_19return_value_policyENS_6handleE
_ZN8pybind116detail11type_casterIN2at6TensorEvE4loadENS_6handleEb
_ZN8pybind116detail11type_casterIN3c106ScalarEvE4loadENS_6handleEb
_ZN8pybind116detail11type_casterIN3c106SymIntEvE4loadENS_6handleEb
_ZN8pybind116detail11type_casterIN3c108ArrayRefIlEEvE4loadENS_6handleEb
"""
_BUILTIN_MODULE = """
PyDict_Contains PyDict_Type PyExc_ImportError PyModuleDef_Init PyModule_NewObject PyObject_CallFunctionObjArgs
Py_GetVersion
"""
BUILTIN: dict[str, frozenset[str]] = {
    "workspace": frozenset(_BUILTIN_WORKSPACE.split()),
    "single_file": frozenset(_BUILTIN_WORKSPACE.split()) | frozenset(_BUILTIN_MODULE.split()),
}
LAYOUTS = tuple(BUILTIN)


# ---------------------------------------------------------------------------------------------
# ELF symbol tables
# ---------------------------------------------------------------------------------------------


class ElfError(ValueError):
    """Not an ELF file this reader understands (64-bit little-endian), or a damaged one."""


_SHT_SYMTAB, _SHT_DYNSYM = 2, 11
_STB_LOCAL = 0


def elf_symbols(path: Path, *, dynamic: bool = False) -> tuple[frozenset[str], frozenset[str]]:
    """(undefined, defined global or weak) symbol names of an ELF file's .symtab (.dynsym with
    `dynamic`), version suffixes (`@VER`, `@@VER`) removed."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 64:
            raise ElfError(f"{path.name}: too short for an ELF header")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return _read_symbols(m, size, _SHT_DYNSYM if dynamic else _SHT_SYMTAB, path.name)


def _read_symbols(m: mmap.mmap, size: int, want: int, name: str) -> tuple[frozenset[str], frozenset[str]]:
    if m[:4] != b"\x7fELF" or m[4] != 2 or m[5] != 1:
        raise ElfError(f"{name}: not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", m, 0x28)
    shentsize, shnum, _ = struct.unpack_from("<HHH", m, 0x3A)
    if shentsize != 64:
        raise ElfError(f"{name}: unexpected section header size {shentsize}")

    def section(idx: int) -> tuple[int, int, int, int, int]:  # type, offset, size, link, entsize
        off = shoff + idx * 64
        if off + 64 > size:
            raise ElfError(f"{name}: section header {idx} beyond the file")
        _, sh_type, _, _, sh_offset, sh_size, sh_link, _, _, sh_entsize = struct.unpack_from("<IIQQQQIIQQ", m, off)
        if sh_offset + sh_size > size and sh_type != 8:  # SHT_NOBITS occupies no file space
            raise ElfError(f"{name}: section {idx} beyond the file")
        return sh_type, sh_offset, sh_size, sh_link, sh_entsize

    if shnum == 0 and shoff:  # more sections than fit in e_shnum: the count is section 0's size
        shnum = section(0)[2]
    undefined: set[str] = set()
    defined: set[str] = set()
    for idx in range(shnum):
        sh_type, off, sz, link, entsize = section(idx)
        if sh_type != want:
            continue
        if entsize != 24 or link >= shnum:
            raise ElfError(f"{name}: malformed symbol table")
        _, str_off, str_size, _, _ = section(link)
        for k in range(1, sz // 24):
            st_name, st_info, _, st_shndx = struct.unpack_from("<IBBH", m, off + k * 24)
            if not st_name or st_name >= str_size:
                continue
            end = m.find(b"\0", str_off + st_name, str_off + str_size)
            sym = m[str_off + st_name : end if end >= 0 else str_off + str_size].decode("utf-8", "replace")
            sym = sym.split("@", 1)[0]
            if st_shndx == 0:
                undefined.add(sym)
            elif st_info >> 4 != _STB_LOCAL:
                defined.add(sym)
    return frozenset(undefined), frozenset(defined)


_memo: dict[tuple[str, int, int], tuple[frozenset[str], frozenset[str]]] = {}
_memo_lock = threading.Lock()


def object_symbols(path: Path) -> tuple[frozenset[str], frozenset[str]]:
    """`elf_symbols` of an object, remembered by path, size and mtime (cached objects are content-keyed)."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _memo_lock:
        hit = _memo.get(key)
    if hit is None:
        hit = elf_symbols(path)
        with _memo_lock:
            if len(_memo) > 4096:
                _memo.clear()
            _memo[key] = hit
    return hit


@lru_cache(maxsize=8)
def torch_python_exports(lib_dirs: tuple[str, ...]) -> frozenset[str]:
    """The functions torch's Python bridge (libtorch_python.so) exports: reaching them is reaching Python."""
    for d in lib_dirs:
        p = Path(d) / "libtorch_python.so"
        if p.is_file():
            try:
                return elf_symbols(p, dynamic=True)[1]
            except (OSError, ElfError):
                return frozenset()
    return frozenset()


def python_facing(names: Iterable[str], bridge: frozenset[str]) -> set[str]:
    return {n for n in names if PY_SYMBOL.match(n) or n in bridge}


# ---------------------------------------------------------------------------------------------
# the allowlist derived from the pristine infrastructure
# ---------------------------------------------------------------------------------------------


def _allow_key(tc: toolchain_mod.Toolchain) -> str:
    from cuda_agent.task.workspace import template_text

    text = tc.fingerprint + PROBE_BINDING + template_text("binding.cpp") + template_text("binding_registry.h")
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def derive(cache_dir: Path, *, arch: str, deadline: float) -> dict[str, frozenset[str]]:
    """The Python-facing symbols the pristine infrastructure needs on this toolchain, per layout:
    compiled once (under a lock) and kept in `cache_dir/symbols`. Raises RuntimeError when the probe
    does not build."""
    from cuda_agent.task.workspace import template_text

    tc = toolchain_mod.toolchain(arch)
    key = _allow_key(tc)
    d = cache_dir / "symbols"
    out = d / f"allow-{key}.json"
    if not out.exists():
        d.mkdir(parents=True, exist_ok=True)
        with open(d / f"allow-{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not out.exists():
                _derive_into(out, d / f"probe-{key}", cache_dir / "objects", tc, template_text, deadline)
    data = json.loads(out.read_text())
    return {layout: frozenset(data[layout]) for layout in LAYOUTS}


def _derive_into(
    out: Path, root: Path, objdir: Path, tc: toolchain_mod.Toolchain, template_text, deadline: float
) -> None:  # noqa: ANN001
    from concurrent.futures import ThreadPoolExecutor

    (root / "kernels").mkdir(parents=True, exist_ok=True)
    objdir.mkdir(parents=True, exist_ok=True)
    for name in ("binding.cpp", "binding_registry.h"):
        (root / name).write_text(template_text(name))
    (root / "kernels" / "probe_binding.cpp").write_text(PROBE_BINDING)
    units = [root / "binding.cpp", root / "kernels" / "probe_binding.cpp"]

    def compile_one(src: Path) -> Path:
        obj = (
            objdir / f"{toolchain_mod._unit_key(tc, src, root)}.o"
        )  # the build's own key: binding.cpp's object is shared
        if obj.exists():
            return obj
        tmp = obj.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp.o")
        r = toolchain_mod._run_compiler(
            tc.cxx_cmd(src, tmp, root), timeout=max(deadline - time.monotonic(), 60), cwd=root
        )
        if r.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise RuntimeError(f"the symbol probe {src.name} did not build: {r.output.strip()[-300:]}")
        os.replace(tmp, obj)
        return obj

    with ThreadPoolExecutor(max_workers=2) as pool:
        pristine, probe = pool.map(compile_one, units)
    bridge = torch_python_exports(tc.lib_dirs)
    ws = python_facing(object_symbols(probe)[0], bridge)
    single = ws | python_facing(object_symbols(pristine)[0], bridge)
    tmp_out = out.with_suffix(f".{os.getpid()}.tmp")
    tmp_out.write_text(
        json.dumps({"workspace": sorted(ws), "single_file": sorted(single), "toolchain": tc.versions}, indent=0)
    )
    os.replace(tmp_out, out)


# ---------------------------------------------------------------------------------------------
# the check
# ---------------------------------------------------------------------------------------------


def check(
    objects: Iterable[tuple[str, str, Path]],
    layout: str,
    *,
    cache_dir: Path | None,
    arch: str,
    deadline: float,
    allowed: frozenset[str] | None = None,
) -> list[Finding]:
    """REJECT findings for candidate objects given as (source file for the finding, the unit's name in
    its message, object path). `allowed` replaces the allowlist (tests); otherwise BUILTIN[layout], then
    the derived set where an object needs more (not derived without a `cache_dir`)."""
    bridge = torch_python_exports(toolchain_mod.toolchain(arch).lib_dirs) if allowed is None else frozenset()
    base = BUILTIN[layout] if allowed is None else allowed
    derived: frozenset[str] | None = None
    why_not = ""
    out: list[Finding] = []
    for file, shown, path in objects:
        try:
            undefined, defined = object_symbols(path)
        except (OSError, ElfError) as e:
            out.append(
                Finding(
                    RULE,
                    f"{shown}: its compiled object cannot be read ({e}); instead: {INSTEAD}",
                    Severity.REJECT,
                    file,
                )
            )
            continue
        extra = python_facing(undefined, bridge) - base
        if extra and allowed is None and derived is None and not why_not:
            if cache_dir is None:
                why_not = "no build cache to derive the pristine set in"
            else:
                try:
                    derived = derive(cache_dir, arch=arch, deadline=deadline)[layout]
                except (OSError, RuntimeError, ValueError) as e:
                    why_not = f"the pristine set could not be derived here: {e}"
        if derived is not None:
            extra -= derived
        problems = []
        if extra:
            note = f"; {why_not}" if why_not else ""
            problems.append(f"{_names(extra)} (Python-facing, and not needed by the pristine binding{note})")
        denied = {s for s in undefined if DENIED.match(s)}
        if denied:
            problems.append(f"{_names(denied)} (the dynamic linker's lookup or internals)")
        interposed = {s for s in defined if INTERPOSED.match(s)}
        if interposed:
            problems.append(f"defines {_names(interposed)} (a function of the CUDA runtime, Python or the loader)")
        if problems:
            refs = [p for p in problems if not p.startswith("defines ")]
            text = "; ".join(
                (["references " + "; ".join(refs)] if refs else []) + [p for p in problems if p.startswith("defines ")]
            )
            out.append(
                Finding(
                    RULE,
                    f"{shown}: its compiled object {text}, whatever its source called them; instead: {INSTEAD}",
                    Severity.REJECT,
                    file,
                )
            )
    return out


def _names(names: set[str], most: int = 8) -> str:
    shown = sorted(names)
    return ", ".join(shown[:most]) + (f" and {len(shown) - most} more" if len(shown) > most else "")
