"""Decontamination by what a task computes (synth.opgraph, synth.semantic) and the syntactic fallback.

The calibration corpus (tests/fixtures/decontam/corpus, our own restatements of KernelBench tasks and
new compositions) is checked against the op graphs of KernelBench levels 1-3 kept in
tests/fixtures/decontam/kernelbench_graphs.jsonl (no KernelBench code in the repo): every restatement
is a copy of the task it restates, no new composition is a copy of anything. With
CUDA_AGENT_KERNELBENCH set to a checkout, the same runs end to end through the sandboxed tracing
children, and the fixture is checked against a fresh trace. Canonicalisation, the containment search,
the tracing children's failure handling and the reports are tested on small tasks written here.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from cuda_agent.synth.decontam import Decontaminator
from cuda_agent.synth.opgraph import TraceError, trace_source
from cuda_agent.synth.semantic import OpGraph, SemIndex, embeds, similarity
from cuda_agent.synth.stats import compute, markdown
from cuda_agent.synth.tracing import trace_many

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests/fixtures/decontam"
KB = os.environ.get("CUDA_AGENT_KERNELBENCH")
HEAD = re.compile(r"# corpus: (?:copy (\S+)|new)")


def corpus() -> list[tuple[str, str, str | None]]:
    out = []
    for p in sorted((FIX / "corpus").glob("*.py")):
        code = p.read_text()
        m = HEAD.match(code)
        assert m, p
        out.append((p.stem, code, m.group(1)))
    return out


def kb_graphs() -> dict[str, OpGraph]:
    out = {}
    for line in (FIX / "kernelbench_graphs.jsonl").read_text().splitlines():
        d = json.loads(line)
        if "graph" in d:
            out[d["id"]] = OpGraph.from_json(d["graph"])
    return out


def task(forward: str, init: str = "", inputs: str = "torch.randn(8, 16)", head: str = "") -> str:
    return f"""import torch
import torch.nn as nn
import torch.nn.functional as F
{head}

class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init or "        pass"}

    def forward(self, x):
{forward}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""


def graph(code: str) -> OpGraph:
    return OpGraph.from_json(trace_source(code))


def ops(code: str) -> list[str]:
    return graph(code).op_labels()


def test_the_corpus_restatements_are_copies_and_the_new_compositions_are_not():
    refs = kb_graphs()
    assert len(refs) == 248  # 250 tasks; the two Mamba2 tasks need einops, absent here when it was made
    items = corpus()
    copies = [i for i in items if i[2]]
    assert len(copies) >= 38 and len(items) - len(copies) >= 25
    # the restatement kinds issue 30 names, each in some corpus task's first line (its kinds), and near neighbours
    heads = [code.splitlines()[0] for _, code, want in items if want]
    for kind in (
        "docstring removed",
        "folded",
        "super()",
        "renamed",
        "functional",
        "nn.Sequential",
        "helper",
        "hoisted",
        "reordered",
        "in place",
        "trivial",
        "submodule",
        "bmm",
        "einsum",
    ):
        assert any(kind in h for h in heads), f"no restatement of kind {kind!r} in the corpus"
    assert sum("near" in code.splitlines()[0] for _, code, want in items if not want) >= 15
    index = SemIndex.build(list(refs.items()))
    got = index.check([graph(code) for _, code, _ in items])
    for (stem, code, want), match in zip(items, got, strict=True):
        if want:
            assert match.copy_of, f"{stem}: a restatement of {want} not caught (nearest {match.nearest})"
            assert embeds(refs[want], graph(code)), f"{stem} does not contain {want}"
        else:
            assert not match.copy_of, f"{stem}: a new composition called a copy of {match.copy_of}"


def test_level1_policy_another_op_is_another_task_the_sizes_are_not():
    refs = kb_graphs()
    relu = refs["L1-19_ReLU"]
    assert embeds(relu, graph(task("        return torch.relu(x)", inputs="torch.randn(3, 5, 7)")))
    for other in ("F.selu(x)", "F.leaky_relu(x)", "torch.sigmoid(x)", "F.gelu(x)"):
        assert not embeds(relu, graph(task(f"        return {other}")))
    # the example: ReLU and SELU scored 1.00 by the AST measure; by their graphs they share nothing
    assert similarity(relu, refs["L1-27_SELU_"]) == 0.0
    # a reduction's dim is part of the op, the extent of each dim is not
    s1 = refs["L1-47_Sum_reduction_over_a_dimension"]
    assert embeds(s1, graph(task("        return x.sum(1)", inputs="torch.randn(2, 300, 4)")))
    assert not embeds(s1, graph(task("        return x.sum(2)", inputs="torch.randn(2, 3, 4)")))
    # a single op plus another op is a composition, not a copy; plus a scale by a constant it is a copy
    assert not embeds(relu, graph(task("        return torch.tanh(torch.relu(x))")))
    assert embeds(relu, graph(task("        return torch.relu(x) * 2.0 - 1.0")))


def test_canonical_graph_sees_through_views_inplace_scalars_biases_and_dead_code():
    base = ops(task("        return torch.relu(self.fc(x)) / 2.0", "        self.fc = nn.Linear(16, 4)"))
    assert base == ["matmul", "relu", "mul.s"]
    same = [
        task(
            "        y = x.view(8, 16).contiguous().clone()\n        y = self.fc(y)\n        y.relu_()\n"
            "        y *= 0.5\n        return y",
            "        self.fc = nn.Linear(16, 4)",
        ),
        task(
            "        unused = torch.tanh(x)\n        return F.relu(x @ self.w.t() + self.b) * 0.5",
            "        self.w = nn.Parameter(torch.randn(4, 16))\n        self.b = nn.Parameter(torch.randn(4))",
        ),
        task(
            "        return torch.clamp(F.linear(x, self.w), min=0) / 2",
            "        self.w = nn.Parameter(torch.randn(4, 16))",
        ),
    ]
    for code in same:
        assert ops(code) == base, code
    assert ops(task("        return F.silu(x)")) == ops(task("        return x * torch.sigmoid(x)"))
    assert ops(task("        return F.mish(x)")) == ops(task("        return x * torch.tanh(F.softplus(x))"))
    assert ops(task("        return F.relu6(x)")) == ops(task("        return x.clamp(0, 6)")) == ["clamp"]
    assert ops(task("        return F.selu(x)")) == ["selu"] and ops(task("        return F.elu(x)")) == ["elu"]
    # instance norm is not batch norm; a recurrent layer is one node, traced in well under a second
    x4 = "torch.randn(2, 3, 8, 8)"
    assert ops(task("        return F.instance_norm(x)", inputs=x4)) == ["instance_norm"]
    assert ops(task("        return F.batch_norm(x, None, None, training=True)", inputs=x4)) == ["batch_norm"]
    t = time.perf_counter()
    lstm = task(
        "        return self.rnn(x)[0]",
        "        self.rnn = nn.LSTM(16, 32, 4, bidirectional=True, batch_first=True)",
        inputs="torch.randn(8, 2000, 16)",
    )
    assert ops(lstm) == ["lstm.bi"] and time.perf_counter() - t < 5.0


def test_tracing_allocates_nothing_even_for_huge_inputs():
    # 2**36 floats (256 GiB) as input and a 64 GiB weight: the meta device holds no data
    huge = task(
        "        return torch.relu(self.fc(x))",
        "        self.fc = nn.Linear(1 << 16, 1 << 18)",
        inputs="torch.randn(1 << 20, 1 << 16)",
    )
    assert ops(huge) == ["matmul", "relu"]


def test_untraceable_tasks_say_why():
    with pytest.raises(TraceError, match="meta"):
        trace_source(task("        return x * x.sum().item()"))
    with pytest.raises(TraceError, match="building"):
        trace_source(task("        return x", head="import not_a_module_here"))


def test_containment_is_about_dataflow_not_op_counts():
    chain = graph(task("        return torch.tanh(torch.relu(self.fc(x)))", "        self.fc = nn.Linear(16, 16)"))
    swapped = graph(task("        return torch.relu(torch.tanh(self.fc(x)))", "        self.fc = nn.Linear(16, 16)"))
    assert sorted(chain.op_labels()) == sorted(swapped.op_labels())
    assert not embeds(chain, swapped) and not embeds(swapped, chain)
    # a scalar op inserted in the middle is a trivial addition; a real op there is a new composition
    inserted = graph(
        task("        return torch.tanh(torch.relu(self.fc(x)) * 3.0)", "        self.fc = nn.Linear(16, 16)")
    )
    assert embeds(chain, inserted)
    other = graph(
        task("        return torch.tanh(torch.sigmoid(torch.relu(self.fc(x))))", "        self.fc = nn.Linear(16, 16)")
    )
    assert not embeds(chain, other)
    # commutative operands may be swapped; distinct sources stay distinct
    xy = "torch.randn(8, 16), torch.randn(8, 16)"
    add_xy = task("        return torch.relu(x + y)", inputs=xy).replace(
        "def forward(self, x)", "def forward(self, x, y)"
    )
    add_yx = add_xy.replace("x + y", "y + x")
    add_xx = add_xy.replace("x + y", "x + x")
    assert embeds(graph(add_xy), graph(add_yx))
    assert not embeds(graph(add_xy), graph(add_xx))
    # a non-commutative op's operands keep their places
    assert not embeds(graph(task("        return torch.relu(x) - x")), graph(task("        return x - torch.relu(x)")))
    # the reference may sit after a prefix of the candidate's
    prefixed = graph(
        task("        return torch.tanh(torch.relu(self.fc(torch.sigmoid(x))))", "        self.fc = nn.Linear(16, 16)")
    )
    assert not embeds(chain, prefixed)  # sigmoid is an added non-trivial op: no allowance for 3 ops
    assert embeds(chain, prefixed, alpha=0.34)


def test_the_syntactic_fallback_ignores_docstrings_comments_names_and_folding():
    from cuda_agent.synth.astsim import parse_model
    from cuda_agent.synth.astsim import similarity as ast_similarity

    head = "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
    init = (
        "    def __init__(self, c_in, c_out, k, bias_shape):\n        super({}__init__(){}\n"
        "        self.conv = nn.Conv2d(c_in, c_out, k)\n        self.bias = nn.Parameter(torch.randn(bias_shape))\n\n"
    )
    a = (
        head
        + '    """Conv, ReLU, bias add."""\n\n'
        + init.format("Model, self).", "")
        + '    def forward(self, x):\n        """x: (N, C, H, W)."""\n        x = self.conv(x)\n'
        "        x = torch.relu(x)\n        x = x + self.bias\n        return x\n"
    )
    b = (
        head
        + init.format(").", "  # a comment")
        + "    def forward(self, inp):\n        h = torch.relu(self.conv(inp))\n        return h + self.bias\n"
    )
    assert ast_similarity(parse_model(a), parse_model(b)) == 1.0
    # what is called is not a name: ReLU is not SELU (the raw measure scored them 1.00)
    assert ast_similarity(parse_model(a), parse_model(a.replace("torch.relu", "torch.selu"))) < 0.95


def test_op_graphs_from_a_child_are_validated():
    good = {"nodes": [["in", []], ["relu", [[0, 0, "f"]]]], "outputs": [[1, 0]]}
    assert OpGraph.from_json(good).op_labels() == ["relu"]
    for bad in (
        {"nodes": [["relu", [[0, 0, "f"]]]], "outputs": [[0, 0]]},  # an edge to itself
        {"nodes": [["in", []], ["relu", [[0, 0, "x"]]]], "outputs": [[1, 0]]},  # a bad role
        {"nodes": [["in", []], ["relu", []]], "outputs": [[1, 0]]},  # an op without inputs
        {"nodes": [["in", []]], "outputs": []},
        [],
        {"nodes": [["in", [[0, 0, "f"]]]], "outputs": [[0, 0]]},
    ):
        with pytest.raises(ValueError):
            OpGraph.from_json(bad)


@pytest.mark.slow
def test_tracing_children_survive_hangs_and_deaths_and_cache_references(tmp_path):
    ok = task("        return torch.tanh(x)")
    hang = task("        while True:\n            pass")
    dies = task("        import os\n        os._exit(3)")
    t = time.perf_counter()
    got = trace_many([hang, ok, dies, ok], workers=1, timeout_s=2.0, sandbox="off", cache=tmp_path / "c")
    assert time.perf_counter() - t < 120
    assert "ran past" in got[0].error and got[1].graph is not None and got[3].graph is not None
    assert "tracing child" in got[2].error and got[1].graph.op_labels() == ["tanh"]
    # graphs and deterministic errors are cached, a dead child is not
    again = trace_many([hang, ok, dies], workers=1, timeout_s=2.0, sandbox="off", cache=tmp_path / "c")
    assert [a.cached for a in again] == [True, True, False]
    assert len(list((tmp_path / "c").glob("*.json"))) == 2


@pytest.mark.slow
def test_a_timeout_neither_poisons_the_child_nor_spends_the_import_of_the_next_task():
    # tracing's first call imports torch._dynamo (~3 s here); the child pays it before its first task,
    # so a 1 s budget suffices from the first task on (before, an alarm inside that import left the
    # module half-built and every later task failed with a circular-import error)
    ok = task("        return torch.tanh(x)")
    assert trace_many([ok], workers=1, timeout_s=1.0, sandbox="off")[0].graph.op_labels() == ["tanh"]
    # a task that patches torch and then hangs: the next task runs in a fresh child, unpatched
    patch_and_hang = task("        torch.tanh = torch.sigmoid\n        while True:\n            pass")
    got = trace_many([patch_and_hang, ok], workers=1, timeout_s=1.0, sandbox="off")
    assert "ran past" in got[0].error
    assert got[1].graph is not None and got[1].graph.op_labels() == ["tanh"], got[1]


@pytest.mark.slow
def test_decontaminator_uses_the_syntactic_measure_only_where_a_graph_is_missing(tmp_path, cache_env):
    refs = [(p.parent.name, p.read_text()) for p in sorted(ROOT.glob("examples/*/task.py"))]
    # a reference that cannot be traced here (a missing module): only the AST measure can compare with it
    untraceable = task("        return torch.cos(x) * torch.sin(x) + torch.tanh(x)", head="import not_a_module_here")
    refs.append(("needs_a_module", untraceable))
    index = Decontaminator.build(refs, workers=2)
    assert [n for n, _ in index.untraced] == ["needs_a_module"]
    linear = (ROOT / "examples/linear_bias_relu/task.py").read_text()
    functional = linear.replace(
        "torch.relu(self.linear(x))", "F.relu(F.linear(x, self.linear.weight, self.linear.bias))"
    )
    functional = functional.replace("import torch.nn as nn", "import torch.nn as nn\nimport torch.nn.functional as F")
    # the same Model class, inputs that need data (no meta tensor has a list of values)
    untraced_copy = linear.replace(
        "    return [torch.randn(BATCH, IN_FEATURES)]",
        "    x = torch.randn(BATCH, IN_FEATURES)\n    assert x.tolist()\n    return [x]",
    )
    assert untraced_copy != linear
    restated = untraceable.replace("import not_a_module_here", "")
    new = task("        return torch.cumsum(torch.sigmoid(x), dim=1)")
    d = index.check([functional, untraced_copy, restated, new])
    assert (d[0].copy, d[0].measure, d[0].ref) == (True, "semantic", "linear_bias_relu")
    assert d[0].semantic == 1.0 and "semantic copy of linear_bias_relu" in d[0].reason
    assert d[1].copy and d[1].measure == "syntactic" and d[1].ref == "linear_bias_relu" and d[1].trace_error
    assert d[2].copy and d[2].measure == "syntactic" and d[2].ref == "needs_a_module" and not d[2].trace_error
    assert not d[3].copy and d[3].semantic is not None and d[3].semantic < 1.0 and d[3].semantic_ref
    # the references' graphs are cached by content: a second build traces nothing
    assert list((cache_env / "synth-opgraph").glob("*.json"))
    t = time.perf_counter()
    Decontaminator.build(refs, workers=1)
    assert time.perf_counter() - t < 30


def test_stats_report_removals_per_measure_and_the_closest_kept_tasks():
    rows = [
        {
            "id": f"t{i}",
            "ops": "[]",
            "data_source": "torch#2",
            "max_similarity": 0.1 * i,
            "nearest_ref": f"A{i}",
            "semantic_similarity": 0.2 * i,
            "semantic_ref": f"S{i}",
        }
        for i in range(4)
    ]
    rej = [
        {"id": "x", "stage": "decontam", "measure": "semantic"},
        {"id": "y", "stage": "decontam", "measure": "semantic"},
        {"id": "z", "stage": "decontam", "measure": "syntactic"},
        {"id": "w", "stage": "runs"},
    ]
    s = compute(rows, rej)
    assert s.removed == {"semantic": 2, "syntactic": 1}
    assert [c[0] for c in s.closest] == ["t3", "t2", "t1", "t0"]
    md = markdown(s)
    assert "| semantic | 2 |" in md and "| t3 | 0.600 | S3 | 0.300 | A3 |" in md
    assert "removals unknown" in markdown(compute(rows))


@pytest.mark.skipif(not KB, reason="set CUDA_AGENT_KERNELBENCH to a KernelBench checkout")
def test_against_a_kernelbench_checkout_end_to_end(cache_env):
    from cuda_agent.task.suites import load_suite

    refs = [(i.task_id, i.task.source) for i in load_suite(KB)]
    index = Decontaminator.build(refs, workers=2)
    fresh = dict(zip(index.sem.names, index.sem.graphs, strict=True))
    fixed = kb_graphs()
    stale = sorted(n for n in fixed if n not in fresh or fresh[n].key != fixed[n].key)
    assert not stale, f"kernelbench_graphs.jsonl is stale for {stale[:5]} (see tests/fixtures/decontam/README.md)"
    items = corpus()
    for (stem, _, want), d in zip(items, index.check([code for _, code, _ in items]), strict=True):
        assert d.copy == bool(want), (stem, d.reason, d.semantic_ref, d.semantic)
        if want:
            assert d.measure == "semantic", stem
