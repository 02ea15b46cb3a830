"""Task synthesis on the CPU: crawl, compose (deterministic and LLM), similarity, dedup, re-shaping,
output schema and statistics. The filter's device stages are in test_synth_filter.py."""

from __future__ import annotations

import itertools
import json
import random
import re
from collections import Counter
from pathlib import Path

import pytest
import torch.nn as nn
from fake_openai_server import reply, serving

from cuda_agent.synth import records
from cuda_agent.synth.astsim import Program, assignment_max, features, model_class, parse_model, similarity, upper_bound
from cuda_agent.synth.compose import PAPER_MIX, DeterministicComposer, Planner, parse_mix, rejects_path, run_compose
from cuda_agent.synth.crawl import _function_target, _module_target, crawl, probe_target
from cuda_agent.synth.dataset import read_tasks, write_tasks
from cuda_agent.synth.decontam import RefIndex, normalized_key
from cuda_agent.synth.probe import run_task_code
from cuda_agent.synth.records import Candidate, Seed
from cuda_agent.synth.reshape import batch_site, scale_batch
from cuda_agent.task.suites import load_suite
from cuda_agent.task.taskfile import Task

ROOT = Path(__file__).resolve().parents[1]
MODULES = [
    "ReLU",
    "GELU",
    "Tanh",
    "Sigmoid",
    "Conv2d",
    "Linear",
    "LayerNorm",
    "BatchNorm2d",
    "Dropout",
    "Embedding",
    "Softmax",
    "MaxPool2d",
    "GroupNorm",
    "Hardtanh",
]
FUNCTIONS = [
    ("torch", "relu"),
    ("torch", "relu_"),
    ("torch", "argmax"),
    ("torch", "exp"),
    ("torch", "cumsum"),
    ("torch", "matmul"),
    ("torch", "mul"),
    ("F", "silu"),
    ("F", "softplus"),
    ("torch", "zeros_like"),
    ("torch", "tanh"),
    ("torch", "abs"),
]


def subset_targets():
    return [(_module_target(n, getattr(nn, n)), "torch") for n in MODULES] + [
        (_function_target(p, n), "torch") for p, n in FUNCTIONS
    ]


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> list[Seed]:
    path = tmp_path_factory.mktemp("crawl") / "seeds.jsonl"
    return crawl(path, subset_targets())


def by_id(seeds: list[Seed]) -> dict[str, Seed]:
    return {s.id: s for s in seeds}


def test_crawl_labels_what_cannot_be_composed_and_keeps_it(seeds):
    s = by_id(seeds)
    assert len(s) == len(MODULES) + len(FUNCTIONS)
    assert "stochastic" in s["nn.Dropout"].labels
    assert "in_place" in s["torch.relu_"].labels
    assert "non_float_output" in s["torch.argmax"].labels
    assert "integer_inputs" in s["nn.Embedding"].labels
    assert "input_independent" in s["torch.zeros_like"].labels
    clean = [x for x in seeds if x.composable]
    assert {"nn.Conv2d", "nn.Linear", "torch.relu", "torch.cumsum", "F.silu"} <= {x.id for x in clean}
    assert s["nn.Conv2d"].ranks == [4] and s["nn.Conv2d"].anchor
    assert s["torch.matmul"].spec.param == "matrix"


def test_every_seed_that_runs_is_a_task_that_loads_and_runs(seeds):
    for seed in seeds:
        if not seed.runs:
            continue
        Task.from_source(seed.code, name=seed.id)
        got = run_task_code(seed.code)
        assert list(got["out"].shape) == seed.out_shape, seed.id


def test_crawl_resumes_and_records_an_op_that_crashed_the_last_run(tmp_path):
    path = tmp_path / "seeds.jsonl"
    targets = subset_targets()[:4]
    crawl(path, targets, limit=2)
    assert len(records.read(path, Seed)) == 2
    Path(str(path) + ".inflight").write_text(targets[2][0].id)  # as if the process died probing it
    out = crawl(path, targets)
    assert [s.id for s in out] == [t.id for t, _ in targets]
    assert out[2].labels == ["crashed"] and not out[3].labels == ["crashed"]


def test_transformers_blocks_load_and_run():
    pytest.importorskip("transformers")
    from cuda_agent.synth.crawl_hf import hf_targets

    targets = hf_targets()
    want = {
        "transformers.act.gelu_new",
        "transformers.LlamaRMSNorm",
        "transformers.LlamaMLP",
        "transformers.LlamaAttention",
        "transformers.GPT2Attention",
    }
    picked = [t for t in targets if t.id in want]
    assert len(targets) >= 25 and len(picked) == len(want)
    for t in picked:
        seed = probe_target(t, "transformers")
        assert seed.runs and not seed.labels, (seed.id, seed.labels, seed.error)
        assert seed.out_shape == [2, 8, 64]


def small(code: str) -> str:
    """The candidate at batch 1, for running on the CPU in a test."""
    site = batch_site(code)
    assert site is not None
    return scale_batch(code, 1 / site.value)[0] if site.value > 1 else code


def test_deterministic_composer_makes_tasks_that_load_and_run(seeds):
    comp = DeterministicComposer(Planner(seeds, seed=3))
    cands = [comp.compose(i) for i in range(40)]
    ok = [c for c in cands if isinstance(c, Candidate)]
    assert len(ok) >= 35
    sources = Counter(c.data_source for c in ok)
    assert sources["torch#2"] > len(ok) / 2 and "transformers" not in sources  # no blocks in this seed set
    for c in ok:
        task = Task.from_source(c.code, name=c.id)
        assert task.precision == "fp32" and len(c.ops) == int(c.data_source.split("#")[1])
    for c in ok[:8]:
        got = run_task_code(small(c.code))
        assert got["out"].is_floating_point()
    again = DeterministicComposer(Planner(seeds, seed=3)).compose(7)
    assert again == cands[7]  # attempt i depends only on (seed, i)
    other = DeterministicComposer(Planner(seeds, seed=4))
    assert [other.compose(i) for i in range(5)] != cands[:5]


def test_planner_draws_the_papers_mix():
    rows = [
        Seed("a", records.OpSpec("torch.relu", call="torch.relu({x})"), "torch", "tensor", [2, 3, 4, 5]),
        Seed("b", records.OpSpec("transformers.X", init="nn.Identity()"), "transformers", "block", [3]),
    ]
    planner = Planner(rows, seed=0)
    rng_cats = Counter()
    for i in range(3000):
        r = planner.rng(i)
        cats, w = zip(*planner.mix.items(), strict=True)
        rng_cats[r.choices(cats, weights=w)[0]] += 1
    assert abs(rng_cats["2"] / 3000 - PAPER_MIX["2"] / 100) < 0.03
    assert 0 < rng_cats["transformers"] < 3000 * 0.03
    assert parse_mix("1:1,2:3") == {"1": 1.0, "2": 3.0}
    with pytest.raises(ValueError):
        parse_mix("7:1")
    assert "transformers" not in Planner(rows[:1]).mix  # without blocks their share goes to torch


def test_run_compose_resumes_to_the_same_file(seeds, tmp_path):
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    run_compose(DeterministicComposer(Planner(seeds, seed=5)), 12, one)
    run_compose(DeterministicComposer(Planner(seeds, seed=5)), 5, two)
    run_compose(DeterministicComposer(Planner(seeds, seed=5)), 12, two)  # the "killed" run continues
    assert [c["id"] for c in records.read_dicts(one)] == [c["id"] for c in records.read_dicts(two)]
    assert one.read_text() == two.read_text()


def test_llm_composer_against_a_scripted_server_counts_a_malformed_reply(seeds, tmp_path):
    from cuda_agent.llm.client import ChatClient, ClientConfig
    from cuda_agent.synth.compose_llm import LLMComposer

    planner = Planner(seeds, seed=9)
    det = DeterministicComposer(planner)
    attempts = itertools.count()

    def good(body):  # the model "writes" the planned layer (the deterministic rendering of the same plan)
        i = next(attempts)
        ops = re.search(r"Operators: (.*)", body["messages"][0]["content"]).group(1).split(", ")
        cand = det.compose(i)
        assert cand.ops == ops
        return reply(f"Here it is:\n```python\n{cand.code}```\n")

    def malformed(body):
        next(attempts)
        return reply("I cannot help with that.")

    out = tmp_path / "llm.jsonl"
    with serving([good, malformed, good]) as server:
        client = ChatClient(ClientConfig(model="fake", base_url=server.base_url, max_retries=0))
        ok, bad = run_compose(LLMComposer(planner, client, "fake"), 2, out, parallel=1)
    assert (ok, bad) == (2, 1)
    rej = records.read_dicts(rejects_path(out))
    assert rej[0]["id"] == "cand-000001" and "malformed reply" in rej[0]["reason"]
    cands = records.read(out, Candidate)
    assert [c.composer for c in cands] == ["llm:fake"] * 2 and [c.id for c in cands] == ["cand-000000", "cand-000002"]


def test_llm_reply_validation_names_the_problem():
    from cuda_agent.synth.compose_llm import extract_code, validate

    code = (ROOT / "examples/linear_bias_relu/task.py").read_text()
    assert validate(extract_code(f"```python\n{code}```"), ["nn.Linear"]) is None
    assert "does not use" in validate(code, ["torch.cumsum"])
    assert "no python code block" in validate(extract_code("no code here"), ["nn.Linear"])
    assert "missing" in validate("import torch\nx = 1\n", [])


def test_ast_similarity_ignores_names_and_its_bound_holds(seeds):
    a = (ROOT / "examples/linear_bias_relu/task.py").read_text()
    renamed = a.replace("self.linear", "self.proj").replace("def forward(self, x)", "def forward(self, inp)")
    renamed = renamed.replace("(x)", "(inp)")
    pa, pr = Program.parse(model_class(a)), Program.parse(model_class(renamed))
    assert similarity(pa, pr) == 1.0
    other = Program.parse(model_class((ROOT / "tests/redteam/tasks/softmax.py").read_text()))
    assert 0.0 < similarity(pa, other) < 0.9
    comp = DeterministicComposer(Planner(seeds, seed=1))
    progs = [
        Program.parse(model_class(c.code)) for c in (comp.compose(i) for i in range(40)) if isinstance(c, Candidate)
    ]
    rng = random.Random(0)
    for _ in range(300):
        x, y = rng.sample(progs, 2)
        s = similarity(x, y)
        assert 0.0 <= s <= upper_bound(features(x), features(y)) + 1e-9
        assert s == similarity(y, x)


def test_assignment_max_is_the_best_pairing():
    rng = random.Random(1)
    for _ in range(60):
        r, c = rng.randint(1, 5), rng.randint(1, 5)
        m = [[rng.randint(0, 9) for _ in range(c)] for _ in range(r)]
        best = max(
            sum(m[i][j] for i, j in zip(rows, cols, strict=False))
            for rows in itertools.permutations(range(r), min(r, c))
            for cols in itertools.permutations(range(c), min(r, c))
        )
        assert assignment_max(m) == best


def test_nearest_reference_is_the_brute_force_maximum(seeds):
    comp = DeterministicComposer(Planner(seeds, seed=2))
    cands = [c.code for c in (comp.compose(i) for i in range(60)) if isinstance(c, Candidate)]
    refs = [(p.parent.name, p.read_text()) for p in sorted(ROOT.glob("examples/*/task.py"))]
    refs += [(f"c{i}", code) for i, code in enumerate(cands[:12])]
    index = RefIndex.build(refs)
    got = index.nearest(cands[12:])
    for code, near in zip(cands[12:], got, strict=True):
        p = parse_model(code)
        brute = max(similarity(p, q) for q in index.programs)
        assert near.similarity == brute and near.exact_evals <= len(refs)
    assert sum(n.exact_evals for n in got) < len(got) * len(refs)  # the bound pruned something


def test_normalized_key_sees_through_renames_only():
    a = (ROOT / "examples/linear_bias_relu/task.py").read_text()
    renamed = '"""another docstring"""\n' + a.replace("self.linear", "self.fc").replace("in_features", "d_in")
    assert normalized_key(a) == normalized_key(renamed)
    assert normalized_key(a) != normalized_key(a.replace("torch.relu", "torch.tanh"))
    assert normalized_key("def (") is None


def test_scale_batch_rewrites_only_the_batch_dimension():
    code = (
        "import torch\nbatch_size = 16  # rows\nN = 16\n\ndef get_inputs():\n    return [torch.randn(batch_size, N)]\n"
    )
    new, old, got = scale_batch(code, 4)
    assert (old, got) == (16, 64) and "batch_size = 64  # rows\nN = 16\n" in new
    lit = "import torch\ndef get_inputs():\n    return [torch.rand(8, 3), torch.randn(8, 3)]\n"
    assert scale_batch(lit, 0.5)[0].count("torch.rand(4, 3)") == 1
    assert scale_batch("def get_inputs():\n    return []\n", 2) is None
    assert scale_batch(code, 1.01) is None  # no change


def test_output_schema_round_trip_and_reads_as_a_suite(tmp_path):
    pytest.importorskip("pyarrow")
    code = (ROOT / "tests/redteam/tasks/elementwise_relu.py").read_text()
    rows = [
        {
            "ops": ["torch.relu"],
            "data_source": "torch#1",
            "code": code,
            "id": "cand-000001",
            "seed_ids": ["torch.relu"],
            "composer": "deterministic:0",
            "eager_ms": 1.5,
            "compile_ms": 1.2,
            "max_similarity": 0.42,
            "nearest_ref": "L1-19_ReLU",
            "reshapes": [],
            "pipeline_version": "synth-1",
        },
        {
            "ops": ["transformers.LlamaMLP"],
            "data_source": "transformers",
            "code": code,
            "id": "cand-000002",
            "seed_ids": [],
            "composer": "llm:x",
            "eager_ms": None,
            "compile_ms": None,
            "max_similarity": None,
            "nearest_ref": "",
            "reshapes": [{"batch": [2, 8], "eager_ms": 0.1}],
            "pipeline_version": "synth-1",
        },
    ]
    written = write_tasks(rows, tmp_path / "tasks.parquet")
    assert [p.name for p in written] == ["tasks.parquet", "tasks.jsonl"]
    for path in written:
        back = read_tasks(path)
        assert list(back[0])[:3] == ["ops", "data_source", "code"]
        assert json.loads(back[0]["ops"]) == ["torch.relu"] and back[1]["eager_ms"] is None
        assert json.loads(back[1]["reshapes"]) == [{"batch": [2, 8], "eager_ms": 0.1}]
        assert back[0]["max_similarity"] == 0.42
        suite = load_suite(path)
        assert suite.kind == "ops6k" and suite.counts() == {"torch#1": (1, 0), "transformers": (1, 0)}


def test_stats_compare_the_mix_with_the_paper(tmp_path):
    from cuda_agent.synth import stats

    rows = [{"ops": json.dumps(["a", "b"]), "data_source": "torch#2", "eager_ms": 2.0, "max_similarity": 0.3}] * 3
    rows += [{"ops": json.dumps(["c"]), "data_source": "torch#1", "eager_ms": 50.0, "max_similarity": 0.7}]
    s = stats.compute(rows)
    assert s.mix["2"][:2] == (3, 75.0) and s.mix["1"][:2] == (1, 25.0)
    assert abs(s.mix["2"][2] - 83.77) < 0.01 and s.mix["transformers"][0] == 0
    assert s.ops[0] == ("a", 3) and s.sim_max == 0.7 and s.sim_share_above_half == 0.25
    md = stats.markdown(s)
    assert "| torch#2 | 3 | 75.00 % | 83.77 % |" in md and "| 0.70-0.75 | 1 |" in md
    paths = stats.write(s, tmp_path / "st")
    assert paths[0].read_text() == md
    if len(paths) > 1:
        assert paths[1].stat().st_size > 10_000
