"""The evaluator's code fingerprint (the result cache's key part that says which evaluator produced a result)."""

from __future__ import annotations

import shutil
from pathlib import Path

from cuda_agent.eval import pipeline


def test_a_folder_beside_the_templates_does_not_break_every_evaluation():
    # compileall, or pip's byte-compilation on a non-editable install, leaves __pycache__ beside the templates
    # (model_new.py is one): the fingerprint must hash files and pass over folders, not raise IsADirectoryError
    templates = Path(pipeline.__file__).resolve().parents[1] / "task" / "templates"
    made = templates / "__pycache__"
    existed = made.exists()
    made.mkdir(exist_ok=True)
    try:
        pipeline.evaluator_fingerprint.cache_clear()
        fp = pipeline.evaluator_fingerprint()
        assert len(fp) == 12 and int(fp, 16) >= 0
    finally:
        pipeline.evaluator_fingerprint.cache_clear()
        if not existed:
            shutil.rmtree(made)


def test_the_fingerprint_follows_the_evaluators_code(monkeypatch, tmp_path):
    # a copy of the package with one changed line in a nested eval module gets another fingerprint
    pkg = Path(pipeline.__file__).resolve().parents[1]
    copy = tmp_path / "cuda_agent"
    shutil.copytree(pkg, copy, ignore=shutil.ignore_patterns("__pycache__"))
    fake = copy / "eval" / "pipeline.py"
    monkeypatch.setattr(pipeline, "__file__", str(fake))
    pipeline.evaluator_fingerprint.cache_clear()
    before = pipeline.evaluator_fingerprint()
    clock = copy / "eval" / "timing" / "clock.py"
    clock.write_text(clock.read_text() + "\n# changed\n")
    pipeline.evaluator_fingerprint.cache_clear()
    after = pipeline.evaluator_fingerprint()
    pipeline.evaluator_fingerprint.cache_clear()
    assert before != after
