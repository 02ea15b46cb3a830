"""Compose seeds into candidate tasks: an op-count mix, a shape-aware planner, two composers.

Contract:
- `PAPER_MIX` is Ops-6K's composition table (1-5 torch ops, transformers blocks
  alone); `parse_mix("1:3.4,2:83.8,...,transformers:1.2")` reads a custom one.
- `Planner(seeds, mix, seed)` draws, for attempt i, a category from the mix and
  (for torch#K) a chain of K composable seeds with a starting shape, traced on
  the meta device so every step accepts the previous step's output
  (`codegen.trace`). Attempt i depends only on (seed, i), so a resumed or
  parallel run draws the same plan for the same attempt. The first op is a
  heavy op (weights or a matrix operand) with probability `anchor_p`.
- A composer turns attempt i into a `Candidate` or a rejection reason (str):
  `DeterministicComposer` renders the planned chain itself (no LLM: the whole
  pipeline runs offline); `compose_llm.LLMComposer` asks a model to stack the
  planned ops into one layer and validates its reply.
- `run_compose(composer, n, path)` appends accepted candidates to `path` and
  rejections to `<path>.rejects.jsonl` until `path` holds n candidates.
  Resumable: attempts already in either file are not made again.
Not guaranteed: that candidates run on a real device or are good tasks (the
filter decides); the realised mix of the accepted tasks drifts from the
drawn mix when one category is rejected more often.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from cuda_agent.synth import records
from cuda_agent.synth.codegen import Step, TraceError, render, trace
from cuda_agent.synth.records import Candidate, Seed, Verdict

PAPER_MIX: dict[str, float] = {"1": 3.40, "2": 83.77, "3": 7.62, "4": 2.80, "5": 1.23, "transformers": 1.18}

# Starting shapes per input rank: sizes in the range of KernelBench level 1-2 tasks, so that most
# compositions land near the 1-100 ms window on a data-centre GPU before any re-shaping.
_SIZES: dict[int, list[tuple[int, ...]]] = {
    2: [(b, f) for b in (64, 128, 256, 512) for f in (512, 1024, 2048, 4096)],
    3: [(b, c, n) for b in (8, 16, 32) for c in (16, 32, 64, 128) for n in (256, 512, 1024, 2048)],
    4: [(b, c, h, h) for b in (8, 16, 32) for c in (16, 32, 64) for h in (32, 64, 128)],
    5: [(b, c, d, h, h) for b in (4, 8) for c in (8, 16, 32) for d in (8, 16) for h in (16, 32, 64)],
}
_BLOCK_SIZES = [(b, s, h) for b in (2, 4, 8) for s in (128, 256, 512) for h in (512, 1024, 2048)]


def parse_mix(text: str) -> dict[str, float]:
    mix: dict[str, float] = {}
    for part in text.split(","):
        key, _, val = part.partition(":")
        key = key.strip()
        if key not in PAPER_MIX:
            raise ValueError(f"mix keys are 1-5 and transformers (got {key!r})")
        mix[key] = float(val)
    if not mix or sum(mix.values()) <= 0 or min(mix.values()) < 0:
        raise ValueError(f"a mix needs non-negative weights that sum above 0 (got {text!r})")
    return mix


class Plan:
    def __init__(
        self, attempt: int, category: str, seeds: list[Seed], steps: list[Step], shapes: list[tuple[int, ...]]
    ):
        self.attempt, self.category, self.seeds, self.steps, self.shapes = attempt, category, seeds, steps, shapes

    @property
    def data_source(self) -> str:
        return "transformers" if self.category == "transformers" else f"torch#{len(self.steps)}"


class Planner:
    def __init__(
        self,
        seeds: list[Seed],
        mix: dict[str, float] | None = None,
        seed: int = 0,
        *,
        anchor_p: float = 0.7,
        tries: int = 60,
    ):
        self.ops = [s for s in seeds if s.composable]
        self.anchors = [s for s in self.ops if s.anchor]
        self.blocks = [s for s in seeds if s.source == "transformers" and not s.labels]
        mix = dict(PAPER_MIX if mix is None else mix)
        if not self.blocks:
            mix.pop("transformers", None)  # no transformers installed: the torch shares, renormalised
        if not self.ops:
            raise ValueError("no composable torch seeds (crawl first)")
        self.mix = mix
        self.seed, self.anchor_p, self.tries = seed, anchor_p, tries

    def rng(self, attempt: int) -> random.Random:
        return random.Random(f"{self.seed}:{attempt}")

    def plan(self, attempt: int) -> Plan | str:
        rng = self.rng(attempt)
        cats, weights = zip(*self.mix.items(), strict=True)
        category = rng.choices(cats, weights=weights)[0]
        for _ in range(self.tries):
            got = self._block(rng, attempt) if category == "transformers" else self._chain(rng, attempt, int(category))
            if isinstance(got, Plan):
                return got
        return f"no traceable {category}-op chain in {self.tries} tries"

    def _block(self, rng: random.Random, attempt: int) -> Plan | None:
        seed = rng.choice(self.blocks)
        shape = rng.choice(_BLOCK_SIZES)
        step = Step(seed.spec, shape[-1] * 4)
        try:
            shapes = trace([step], shape)
        except TraceError:
            return None
        return Plan(attempt, "transformers", [seed], [step], shapes)

    def _chain(self, rng: random.Random, attempt: int, k: int) -> Plan | None:
        first_pool = self.anchors if self.anchors and rng.random() < self.anchor_p else self.ops
        first = rng.choice(first_pool)
        ranks = [r for r in first.ranks if r in _SIZES]
        if not ranks:
            return None
        shape = rng.choice(_SIZES[rng.choice(ranks)])
        chosen, steps, shapes = [first], [], [shape]
        for i in range(k):
            if not shapes[-1]:
                return None  # a scalar (a loss) can only end a chain
            for _ in range(12):
                seed = (
                    chosen[i]
                    if i < len(chosen)
                    else rng.choice([s for s in self.ops if len(shapes[-1]) in s.ranks] or self.ops)
                )
                base = shapes[-1][1] if "{c}" in seed.spec.init and len(shapes[-1]) > 1 else shapes[-1][-1]
                step = Step(seed.spec, max(1, rng.choice([base, base * 2, base // 2])))
                try:
                    got = trace([step], shapes[-1], seed.spec.in_dtype)
                except TraceError:
                    if i == 0:
                        return None
                    continue
                if i == len(chosen):
                    chosen.append(seed)
                steps.append(step)
                shapes.append(got[-1])
                break
            else:
                return None
        return Plan(attempt, str(k), chosen, steps, shapes)


class Composer(Protocol):
    name: str

    def compose(self, attempt: int) -> Candidate | str: ...


class DeterministicComposer:
    def __init__(self, planner: Planner):
        self.planner = planner
        self.name = f"deterministic:{planner.seed}"

    def compose(self, attempt: int) -> Candidate | str:
        plan = self.planner.plan(attempt)
        if isinstance(plan, str):
            return plan
        code = render(plan.steps, plan.shapes, doc=" -> ".join(s.spec.op for s in plan.steps))
        return Candidate(
            candidate_id(attempt),
            code,
            [s.spec.op for s in plan.steps],
            plan.data_source,
            [s.id for s in plan.seeds],
            self.name,
        )


def candidate_id(attempt: int) -> str:
    return f"cand-{attempt:06d}"


def attempt_of(cid: str) -> int:
    return int(cid.rsplit("-", 1)[1])


def rejects_path(path: Path) -> Path:
    return Path(str(path) + ".rejects.jsonl")


def run_compose(
    composer: Composer,
    n: int,
    path: Path,
    *,
    parallel: int = 1,
    on_result: Callable[[Candidate | Verdict], None] | None = None,
) -> tuple[int, int]:
    """Compose until `path` holds n candidates. Returns (accepted, rejected) in the files."""
    path = Path(path)
    accepted = {c["id"] for c in records.read_dicts(path)}
    rejected = {v["id"] for v in records.read_dicts(rejects_path(path))}
    done = {attempt_of(i) for i in accepted | rejected}
    todo = (i for i in itertools.count() if i not in done)

    def one(i: int) -> Candidate | Verdict:
        try:
            got = composer.compose(i)
        except Exception as e:  # noqa: BLE001 - an endpoint that fails for good is a rejection of this attempt
            got = f"composer failed: {type(e).__name__}: {e}"[:500]
        return got if isinstance(got, Candidate) else Verdict(candidate_id(i), "compose", False, got)

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as ex:
        while len(accepted) < n:
            batch = list(itertools.islice(todo, max(1, min(parallel, n - len(accepted)))))
            for res in ex.map(one, batch):
                if isinstance(res, Candidate):
                    records.append(path, res)
                    accepted.add(res.id)
                else:
                    records.append(rejects_path(path), res)
                    rejected.add(res.id)
                if on_result is not None:
                    on_result(res)
    return len(accepted), len(rejected)
