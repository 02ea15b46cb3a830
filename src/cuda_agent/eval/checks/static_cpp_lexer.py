"""The C++/CUDA lexer of the static checks: a token stream without comments, string literals kept apart.

Contract: `lex_cpp(text)` returns `Tok`s (kind, text, line); a comment or a message string that names a
forbidden function therefore never triggers a finding. Standard library only.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class Tok(NamedTuple):
    kind: str  # id num str chr punct inc hash
    text: str
    line: int


_PUNCT3 = ("<<=", ">>=", "...", "->*", "<<<", ">>>")
_PUNCT2 = (
    "::",
    "->",
    "##",
    "++",
    "--",
    "<<",
    ">>",
    "<=",
    ">=",
    "==",
    "!=",
    "&&",
    "||",
    "+=",
    "-=",
    "*=",
    "/=",
    "%=",
    "&=",
    "|=",
    "^=",
    ".*",
)
_STR_PREFIX = {"L", "u", "U", "u8", "R", "LR", "uR", "UR", "u8R"}


def lex_cpp(text: str) -> list[Tok]:
    """Tokens of C++/CUDA source without comments; string literals are one token each (their
    text unquoted), `#include` targets are `inc` tokens, `#` (or its digraph `%:`) at the start of a line is
    `hash`. Backslash-newlines inside names and string literals are joined first, as the compiler does."""
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
        if (c == "#" or text.startswith("%:", i)) and bol:  # `%:` is the digraph of `#`
            toks.append(Tok("hash", "#", line))
            bol = False
            m = re.compile(r"(?:#|%:)[ \t]*(include|include_next|import|embed)[ \t]*([<\"])").match(text, i)
            if m:
                close = ">" if m.group(2) == "<" else '"'
                j = text.find(close, m.end())
                eol = text.find("\n", m.end())
                eol = n if eol < 0 else eol
                if j < 0 or j > eol:
                    j = eol
                toks.append(Tok("id", m.group(1), line))
                toks.append(Tok("inc", text[m.end() : j], line))
                i = j + 1
                continue
            i += 1 if c == "#" else 2
            continue
        bol = False
        if c.isalpha() or c == "_":
            j = i + 1
            # a backslash-newline inside a name joins it (P\<newline>yRun_... is PyRun_...)
            while j < n and (text[j].isalnum() or text[j] == "_" or text.startswith("\\\n", j)):
                j += 2 if text[j] == "\\" else 1
            word = text[i:j].replace("\\\n", "")
            start, line = line, line + text.count("\n", i, j)  # the name's token keeps the line it starts on
            if j < n and text[j] in "\"'" and word in _STR_PREFIX:
                if word.endswith("R") and text[j] == '"':
                    k = text.find("(", j)
                    delim = text[j + 1 : k]
                    end = text.find(")" + delim + '"', k)
                    end = n if end < 0 else end
                    toks.append(Tok("str", text[k + 1 : end], line))
                    line += text.count("\n", j, end)
                    i = end + len(delim) + 2
                    continue
                i = j
                continue  # the quote is lexed next
            toks.append(Tok("id", word, start))
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
            # a backslash-newline inside the literal joins its lines before anything reads it
            toks.append(Tok("str" if c == '"' else "chr", text[i + 1 : j].replace("\\\n", ""), line))
            line += text.count("\n", i, j)
            i = j + 1
            continue
        if text.startswith("%:%:", i):  # the digraph of `##`
            toks.append(Tok("punct", "##", line))
            i += 4
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
