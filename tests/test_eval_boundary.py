"""The evaluator's trust boundary, as its layout draws it, checked on the syntax tree (no imports executed).

`cuda_agent.eval.child` is what runs in the evaluation children, the candidate's process among them: nothing
it returns is believed without a check in the parent. `cuda_agent.eval.shared` is the code both sides run.
Everything else in `cuda_agent.eval` is the parent's. A child imports its own package, the shared one and,
of the parent's side, only the message types below; the shared package imports only itself and the message
types; the message types import nothing of the parent's but each other. So nothing of the parent's reaches
a child. The parent starts the children's programs by module name and never imports them."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
EVAL = SRC / "cuda_agent" / "eval"
CHILD = "cuda_agent.eval.child"

# The message types: what travels between parent and child, the one part of the parent's side a child
# imports, and why.
MESSAGE_TYPES = {
    "cuda_agent.eval.channel.messages": "the requests and replies, parsed and checked by both sides",
    "cuda_agent.eval.channel.tensorfile": "the format outputs travel in, at paths the parent computes",
    "cuda_agent.eval.judge.result": "the plain records (CheckRecord, Finding) the messages carry",
}
SHARED = "cuda_agent.eval.shared"  # the code both sides run: event timing, output comparison, negative controls
# Outside the evaluator, other layers' own child processes use the op log as a tool.
OTHER_USERS_OF_CHILD = {"cuda_agent.synth.check_child", "cuda_agent.synth.probe"}
TOP_LEVEL = {"__init__", "api", "config", "pipeline", "gpu", "progress"}
SUBPACKAGES = {"child", "shared", "channel", "build", "checks", "timing", "judge", "profile"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str) -> bool:
    p = SRC.joinpath(*name.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def imported_modules(path: Path) -> set[str]:
    """The cuda_agent modules (or packages) a file imports, resolved: `from pkg import mod` names pkg.mod."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("cuda_agent"))
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import"
            mod = node.module or ""
            if not mod.startswith("cuda_agent"):
                continue
            for a in node.names:
                out.add(f"{mod}.{a.name}" if _is_module(f"{mod}.{a.name}") else mod)
    return out


def _eval_files() -> list[Path]:
    return sorted(EVAL.rglob("*.py"))


def _is_package(name: str) -> bool:
    return (SRC.joinpath(*name.split(".")) / "__init__.py").is_file()


def test_layout_is_the_drawn_one():
    top = {p.stem for p in EVAL.glob("*.py")}
    subs = {p.name for p in EVAL.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert top == TOP_LEVEL, "a new module of the evaluator goes into the folder of the side it runs on"
    assert subs == SUBPACKAGES
    for sub in subs:
        assert (EVAL / sub / "__init__.py").is_file(), sub
    assert all(_is_module(m) for m in MESSAGE_TYPES), "a message type moved: update MESSAGE_TYPES and ARCHITECTURE.md"


def test_package_inits_import_nothing():
    """A child imports `cuda_agent.eval` and `cuda_agent.eval.child` on its way to its program: they must stay empty."""
    for init in [EVAL / "__init__.py", *sorted(EVAL.glob("*/__init__.py"))]:
        body = ast.parse(init.read_text()).body
        assert all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body), init


def test_child_package_says_nothing_it_returns_is_believed():
    doc = ast.get_docstring(ast.parse((EVAL / "child" / "__init__.py").read_text())) or ""
    assert "Nothing a module here returns is believed without a check in the parent" in doc


def test_parent_never_imports_the_child_side():
    bad = []
    for path in sorted((SRC / "cuda_agent").rglob("*.py")):
        me = _module_name(path)
        if me.startswith(CHILD) or me in OTHER_USERS_OF_CHILD:
            continue
        bad += [f"{me} imports {m}" for m in imported_modules(path) if m == CHILD or m.startswith(CHILD + ".")]
    assert not bad, "the parent's side imports the child's:\n" + "\n".join(bad)


def _inside(m: str, pkg: str) -> bool:
    return m == pkg or m.startswith(pkg + ".")


def _may_import(me: str, m: str, own: tuple[str, ...]) -> bool:
    """Its own packages, the message types, or a package __init__ on the way (they are all empty)."""
    return any(_inside(m, p) for p in own) or m in MESSAGE_TYPES or (_is_package(m) and me.startswith(m))


def _bad_imports(own: tuple[str, ...]) -> list[str]:
    bad = []
    for path in _eval_files():
        me = _module_name(path)
        if _inside(me, own[0]):
            bad += [f"{me} imports {m}" for m in imported_modules(path) if not _may_import(me, m, own)]
    return bad


def test_child_imports_only_itself_the_shared_code_and_the_message_types():
    bad = _bad_imports((CHILD, SHARED))
    assert not bad, "a child module imports the parent's side:\n" + "\n".join(bad)


def test_shared_code_imports_only_itself_and_the_message_types():
    bad = _bad_imports((SHARED,))
    assert not bad, "the shared code reaches into the parent:\n" + "\n".join(bad)


def test_message_types_import_nothing_of_the_parent():
    bad = []
    for name in MESSAGE_TYPES:
        path = SRC.joinpath(*name.split(".")).with_suffix(".py")
        for m in imported_modules(path):
            if m not in MESSAGE_TYPES and not (_is_package(m) and m.startswith("cuda_agent.eval")):
                bad.append(f"{name} imports {m}")
    assert not bad, "a message type reaches into the parent:\n" + "\n".join(bad)


def test_op_log_and_allow_list_agree_on_copies():
    """The child's op log labels a dtype-changing copy; the parent's allow-list admits same-dtype copies: one set."""
    from cuda_agent.eval.checks import runtime
    from cuda_agent.eval.child import guards

    assert guards.COPIES == runtime.COPIES
