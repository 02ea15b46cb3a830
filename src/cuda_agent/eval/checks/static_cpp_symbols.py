"""Symbol binding in C++/CUDA sources (issue 28): names given to the assembler and the linker, not the compiler.

Contract: `_check_asm` and `_check_symbol_binding` add `symbol-rename` / `runtime-symbol-lookup` findings for
asm labels on declarations, symbol attributes and pragmas, assembler outside function bodies, symbol
directives in asm strings, interposing extern "C" definitions and run-time symbol lookups (see `static.py`).
`CUDA_API` is the CUDA runtime's and driver's function families, shared with the built-object check
(`checks/symbols.py`).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from cuda_agent.eval.checks.static_cpp_lexer import Tok
from cuda_agent.eval.checks.static_rules import _Sink

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
GAS_DIRECTIVE = re.compile(
    r"(?:^|[\s;])\.(set|equ|equiv|eqv|symver|globl|global|weak|weakref|weakext|local|comm|lcomm"
    r"|hidden|protected|internal|type|size|section|pushsection|popsection|previous|subsection|text"
    r"|data|bss|rodata|reloc|org|quad|byte|long|word|ascii|asciz|string|zero|skip|space|fill"
    # data that holds a symbol's address (`.8byte PyRun_SimpleString` references it), and the macro
    # directives, whose bodies paste directive names together (`.irp d, set` / `.\d run, Py...`)
    r"|int|short|hword|value|octa|2byte|4byte|8byte|dc\.\w+|dc|uleb128|sleb128|inst|include"
    r"|macro|irp|irpc|rept|altmacro|purgem)"
    r"\b(?!\s*\.)"
)
# GNU as's other spelling of .set / .eqv: `run = PyRun_SimpleString` (PTX has no assignment; `%=` is
# gcc's unique-number operand, not one)
GAS_ASSIGN = re.compile(r"(?:^|[\s;{])[A-Za-z_.$][\w.$]*[ \t]*==?(?!=)")
# relocation suffixes are case-insensitive to the assembler (`call f@plt`)
HOST_SYMREF = re.compile(
    r"@(PLT|GOTPCREL|GOT|GOTOFF|GOTNTPOFF|GOTTPOFF|TPOFF|DTPOFF|TLSGD|TLSLD|PCREL)\b|\(\s*%%?rip\s*\)", re.I
)
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
    r"|RegisterOperators|TORCH_LIBRARY\w*|fromQualString|cuGetExportTable|cudaGetExportTable)$"
)
# the CUDA driver's entry points found by name: through them a stream, a graph capture, a host callback
# or a module load is one string away from every rule that names those functions. Only the tensor-map
# encoders (TMA descriptors, which a workspace that links no libcuda can reach no other way) may be looked
# up, by a literal name; the post-build check cannot read the name, so this rule is the only one
DRIVER_LOOKUP = re.compile(r"^(cuGetProcAddress\w*|cudaGetDriverEntryPoint\w*)$")
DRIVER_LOOKUP_OK = re.compile(r"^cuTensorMap(Encode|Replace)\w*$")
LOOKUP_INC = re.compile(
    r"^(link\.h|elf\.h|sys/auxv\.h|execinfo\.h|unwind\.h|libunwind\.h|gnu/lib-names\.h"
    r"|ATen/core/dispatch/\w+\.h|torch/library\.h|torch/csrc/jit/.*)$"
)
# a string that is only a symbol of the interpreter or the dynamic linker (passed to a lookup?)
LOOKUP_STRING = re.compile(
    r"^(_?Py[A-Z][A-Za-z0-9]*_\w+|_?Py_[A-Za-z]\w*|dlsym|dlvsym|dlopen|dlmopen|dl_iterate_phdr"
    r"|dladdr1?|_dl_\w+|__libc_dl\w+|THP\w+)$"
)
PROC_SELF = re.compile(r"/proc/(self|thread-self|\d+|%d)(/|$)|/proc/\w*/(maps|smaps|mem|exe|auxv|environ)")
# functions a candidate may not define: a definition of one interposes the runtime's own. The CUDA
# runtime's and driver's by family (cudaEvent*, cuLaunch*, ...), so that a launcher of one's own
# called cudaRelu or cuMatmul stays a plain name
CUDA_API = (
    r"cuda(Event|Stream|Launch|Malloc|Free|Memcpy|Memset|Mem|Device|Get|Set|Graph|Func|Host|Peer|Ipc|Import"
    r"|External|Signal|Wait|Array|Mipmapped|Create|Destroy|Bind|Unbind|Profiler|Runtime|Driver|Pointer|Occupancy"
    r"|Thread|Ctx|Library|Kernel|Register|Unregister|Push|Pop|Configure|Setup|Init|Deinit|Peek|Chrono|Log)\w*"
    r"|cu(Launch|Mem|Event|Stream|Ctx|Module|Func|Graph|Device|Init|Get|Link|Library|Kernel|Occupancy|Pointer"
    r"|Profiler|Tex|Surf|Array|Import|External|Signal|Wait|User|Driver|Coredump|Checkpoint|Log|Multicast)\w*"
    r"|__cuda[A-Z]\w*"
)
INTERPOSED = re.compile(rf"^({CUDA_API}|_?Py[A-Z_]\w*|dl(open|mopen|sym|vsym|close|error|addr1?|info|iterate_phdr))$")
# compiler and linker flags (Python strings of a load_inline call) that rename symbols
RENAME_FLAGS = re.compile(r"(^|[\s,=])(--?defsym|--?wrap|--redefine-syms?|--?alias)([\s,=]|$)")
# compiler-driver flags that make the build run another program, load a plugin into the compiler, or read
# or write a file the checks never see. The single-file build runs the compiler in the trusted parent with
# the call's flags, so `-wrapper /bin/sh,-c,...` would run a command there before any check of the output
# (and gcc's `-B`, nvcc's `-ccbin`, `-fplugin`, `-specs` and `@file` pick programs or options from files).
# Matched where a driver option starts: the string's start, after a space or quote, or in a forwarded list
# (`-Xcompiler=-wrapper,...`, `-Xcompiler -B/tmp`); gcc's `-Bsymbolic` style linker words are not a directory.
_FLAG_AT = r"(?:^|(?<=[\s,='\"]))"
DRIVER_FLAGS: dict[str, re.Pattern[str]] = {
    "process-network": re.compile(
        _FLAG_AT + r"(-wrapper\b|-B(?=[\s/.~$'\"]|$)|-ccbin\b|--compiler-bindir\b|--?run\b|-fplugin\S*|-fplugin-arg\S*)"
    ),
    "file-access": re.compile(
        _FLAG_AT + r"(@\S|--?specs\b|-specs=|--options-file\b|-optf\b|-include\b|-imacros\b|--?sysroot\b|-isysroot\b"
        r"|-iprefix\b|-M[DFTQ]?(?=[\s=,]|$)|-MMD\b|-Wp,|-Xpreprocessor\b|--?save-temps\b|--?keep\b|--keep-dir\b"
        r"|-o(?=[\s/.~$=]|$)|-odir\b|--output-\w+|-dumpdir\b|-dumpbase\b|-fdump-\S*|-fopt-info\S*=|--dependency-output\b)"
    ),
    # the assembler's own options (--defsym, -I for .incbin, listings) bypass the source checks
    "symbol-rename": re.compile(_FLAG_AT + r"(-Wa,|-Xassembler\b)"),
}


def build_flag(flag: str) -> tuple[str, str] | None:
    """(rule, the option) when a compiler or linker flag runs a program, loads a plugin, reads or writes a
    file or passes options to the assembler (`DRIVER_FLAGS`); None for an ordinary one. A `-D` / `-U`
    value is C++ (checked as such), so only what follows it in the same string counts."""
    probe = re.sub(r"^-[DU]\S*", "", flag.strip())
    for rule, pat in DRIVER_FLAGS.items():
        m = pat.search(probe)
        if m:
            return rule, m.group(1)
    return None


DEFINE_FLAG = re.compile(r"^-D\s*([A-Za-z_]\w*(?:\([^)]*\))?)(?:=(.*))?$", re.S)


_ESCAPE = re.compile(r"\\(x[0-9A-Fa-f]+|[0-7]{1,3}|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)", re.S)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "v": "\v", "f": "\f", "a": "\a", "b": "\b", "e": "\x1b"}


def c_unescape(text: str) -> str:
    """A string literal's text as the compiler hands it on: `".s\\x65t"` is `.set` to the assembler, so
    every check of what a literal says reads it decoded."""

    def one(m: re.Match[str]) -> str:
        e = m.group(1)
        if e[0] in "xuU" and len(e) > 1:
            return chr(min(int(e[1:], 16), 0x10FFFF))
        if e[0] in "01234567":
            return chr(int(e, 8))
        return _SIMPLE_ESCAPES.get(e, e)

    return _ESCAPE.sub(one, text)


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
            c = bool(stack and stack[-1][1]) or (
                i >= 2 and toks[i - 1].kind == "str" and toks[i - 1].text == "C" and toks[i - 2].text == "extern"
            )
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
        inner = toks[j + 1 : k]
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
            label = not statement and (
                not literal or _symbol_like(strings) or (i > d.body and _after_declarator(toks, i))
            )
            if label:
                sink.add(
                    "symbol-rename",
                    t.line,
                    f"asm label `{t.text}({shown or '...'})` in a macro renames the symbol of a declaration",
                )
        elif not statement and _after_declarator(toks, i):
            sink.add(
                "symbol-rename", t.line, f'asm label `{t.text}("{shown}")` gives a declaration the symbol `{shown}`'
            )
        elif not in_fn[i]:
            sink.add(
                "symbol-rename", t.line, f"assembler outside a function body (`{shown}`) can define or bind symbols"
            )
        # the template alone: operand constraints and clobbers ("r", "rdi") glued onto it would hide a
        # trailing `@PLT` from the word boundary (`...@PLTrrdi`)
        text = c_unescape("".join(template))
        m = GAS_DIRECTIVE.search(text)
        if m:
            sink.add(
                "symbol-rename",
                t.line,
                f"assembler directive `.{m.group(1)}` in inline assembly defines or binds symbols",
            )
        elif GAS_ASSIGN.search(text):
            sink.add(
                "symbol-rename", t.line, "an assembler assignment (`name = symbol`) in inline assembly binds symbols"
            )
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
            sink.add(
                "symbol-rename", toks[d.start].line, f"#pragma {toks[d.start + 2].text} binds a name to another symbol"
            )
    for i, t in enumerate(toks):
        nxt = toks[i + 1] if i + 1 < len(toks) else Tok("punct", "", 0)
        if t.kind == "inc" and LOOKUP_INC.match(t.text.strip()):
            sink.add(
                "runtime-symbol-lookup",
                t.line,
                f"#include <{t.text.strip()}> walks the loader's or torch's symbol tables",
            )
        elif (
            t.kind == "str"
            and i not in asm_strings
            and not (i >= 1 and toks[i - 1].text == "extern")
            and not (i >= 1 and toks[i - 1].kind == "str")
        ):
            # the literal as the program sees it: adjacent literals joined ("PyRun_" "SimpleString"), escapes
            # decoded ("/proc/s\x65lf/maps")
            value, _ = _literal(toks, i)
            if PROC_SELF.search(value):
                sink.add(
                    "runtime-symbol-lookup", t.line, f'"{value[:40]}" reads the process\'s own memory map or image'
                )
            elif LOOKUP_STRING.match(value.strip()):
                sink.add(
                    "runtime-symbol-lookup",
                    t.line,
                    f'the string "{value.strip()}" names a symbol of the interpreter or the loader',
                )
        elif (
            t.kind == "id"
            and not (i and toks[i - 1].text == "pragma")  # `#pragma weak` is reported above
            and (
                t.text in ("redefine_extname", "extern_prefix")
                or (t.text == "weak" and i and toks[i - 1].text in ("(", ",") and nxt.kind == "id")
            )
        ):
            # a renaming pragma's words as a macro's argument: `#define P(x) _Pragma(#x)` stringizes
            # `P(weak cudaEventElapsedTime = fake)` into a pragma no literal shows
            sink.add(
                "symbol-rename",
                t.line,
                f"`{t.text}` outside #pragma: a stringized _Pragma binds a name to another symbol",
            )
        elif t.kind == "id" and DRIVER_LOOKUP.match(t.text) and not _driver_lookup_ok(toks, i):
            sink.add(
                "runtime-symbol-lookup",
                t.line,
                f"{t.text} finds a driver function by name (only a literal cuTensorMapEncode* name may be looked up)",
            )
        elif (
            t.kind == "id"
            and t.text == "_Pragma"
            and nxt.text == "("
            and i + 2 < len(toks)
            and toks[i + 2].kind == "str"
        ):
            words = toks[i + 2].text.split()
            if words and words[0] in RENAME_PRAGMAS:
                sink.add("symbol-rename", t.line, f'_Pragma("{words[0]} ...") binds a name to another symbol')
        elif t.kind == "id" and t.text in ("__attribute__", "__attribute") and nxt.text == "(":
            for x in toks[i + 2 : _close(toks, i + 1)]:
                if x.kind == "id" and x.text.strip("_") in SYMBOL_ATTRS:
                    sink.add(
                        "symbol-rename",
                        x.line,
                        f"__attribute__(({x.text.strip('_')})) binds the declaration to another symbol or section",
                    )
        elif (
            t.kind == "id"
            and t.text in ("gnu", "__gnu__")
            and nxt.text == "::"
            and i + 2 < len(toks)
            and toks[i + 2].text.strip("_") in SYMBOL_ATTRS
        ):
            sink.add(
                "symbol-rename",
                t.line,
                f"[[gnu::{toks[i + 2].text.strip('_')}]] binds the declaration to another symbol or section",
            )
        elif (
            t.kind == "id"
            and INTERPOSED.match(t.text)
            and nxt.text == "("
            and not skip[i]
            and not in_fn[i]
            and (in_c[i] or _extern_c_head(toks, i))
        ):
            k = _close(toks, i + 1)
            m = k + 1
            while m < len(toks) and toks[m].text in _SPECIFIERS:
                m += 1
            if m < len(toks) and toks[m].text == "{":
                sink.add(
                    "symbol-rename",
                    t.line,
                    f'extern "C" {t.text}() defined here interposes the runtime\'s own function',
                )


def _extern_c_head(toks: list[Tok], i: int) -> bool:
    """Whether the declaration containing token i starts with extern "C"."""
    for k in range(i - 1, max(i - 30, 0) - 1, -1):
        if toks[k].text in (";", "{", "}") and toks[k].kind == "punct":
            return False
        if toks[k].kind == "str" and toks[k].text == "C" and k and toks[k - 1].text == "extern":
            return True
    return False


def _driver_lookup_ok(toks: list[Tok], i: int) -> bool:
    """Whether the driver lookup at i is a call whose name argument is a literal tensor-map encoder's name."""
    if i + 2 >= len(toks) or toks[i + 1].text != "(" or toks[i + 2].kind != "str":
        return False
    name, end = _literal(toks, i + 2)
    return end < len(toks) and toks[end].text == "," and bool(DRIVER_LOOKUP_OK.match(name))


def _literal(toks: list[Tok], i: int) -> tuple[str, int]:
    """The string literal starting at token i as the compiler sees it (adjacent literals joined, escapes
    decoded), and the index of the first token after it."""
    k = i
    while k < len(toks) and toks[k].kind == "str":
        k += 1
    return c_unescape("".join(x.text for x in toks[i:k])), k
