"""The named GPU measurements (`python -m benchmarks`), on the CPU: the manifest is well formed and names
only files and options that exist, the runner packs a (fake) measurement's files, output and figures into
one archive and a table, records a step killed at its limit as a timeout (with its process group), and
--list / --dry-run work without a GPU."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from conftest import ROOT

if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # the benchmarks package, as `python -m benchmarks` sees it from the root

from benchmarks import manifest, runner  # noqa: E402
from benchmarks.manifest import MEASUREMENTS, Measurement, Step  # noqa: E402

SAFE = re.compile(r"^[A-Za-z0-9._-]+$")  # what the device tool brings back from $OUT


def test_manifest_is_well_formed():
    names = [m.name for m in MEASUREMENTS]
    assert len(names) == len(set(names))
    for m in MEASUREMENTS:
        assert re.fullmatch(r"[a-z0-9-]+", m.name), m.name
        assert m.what and m.issues and m.steps, m.name
        assert 0 < m.budget_s <= manifest.LIMIT_S, f"{m.name}: {m.budget_s} s is more than one device call holds"
        ids = [s.id for s in m.steps]
        assert len(ids) == len(set(ids)) and all(SAFE.match(i) for i in ids), (m.name, ids)
        re.compile(m.headline)
        for s in m.steps:
            assert s.timeout_s > 0 and s.argv[0] in ("{py}", "bash"), (m.name, s)
        for n in m.needs:
            assert not Path(n).is_absolute() and ".." not in Path(n).parts, (m.name, n)
    for f in (runner.ARCHIVE, runner.TABLE, runner.SUMMARY):
        assert SAFE.match(f)
    # the issue's list, and the issue-28 measurements the old X modes made
    for name in (
        "redteam",
        "faults",
        "examples",
        "turnaround",
        "concurrency",
        "single-file",
        "throughput",
        "defences-cost",
        "synthesis",
        "rl-step",
        "clock-leak",
        "forgery",
        "clock-cold-ab",
    ):
        assert name in manifest.BY_NAME, name


def test_every_script_and_option_named_exists():
    """Each step's program is in the tree, and each --option it passes is one that program defines (read
    from its source: a renamed option fails here, not on the GPU machine)."""
    for m in MEASUREMENTS:
        assert m.scripts, m.name
        for s in m.steps:
            progs = [a for a in s.argv if a.startswith(("benchmarks/", "scripts/", "tests"))]
            for prog in progs:
                assert (ROOT / prog).exists(), f"{m.name}/{s.id}: {prog} is missing"
            prog = ROOT / progs[0]
            if prog.suffix != ".py":
                continue
            text = prog.read_text()
            for opt in (a for a in s.argv if a.startswith("--")):
                assert f'"{opt}"' in text, f"{m.name}/{s.id}: {progs[0]} defines no {opt}"


def test_docs_name_every_measurement():
    doc = (ROOT / "docs" / "measurements.md").read_text()
    for m in MEASUREMENTS:
        assert f"`{m.name}`" in doc, f"docs/measurements.md does not describe {m.name}"
    wrapper = (ROOT / "scripts" / "gpu-session.sh").read_text()
    for mode, name in (("X2", "forgery"), ("X3", "clock-leak"), ("X7", "examples"), ("X8", "clock-cold-ab")):
        assert re.search(rf"^  {mode}\) names=\(.*\b{name}\b", wrapper, re.M), (mode, name)


def _fake(monkeypatch: pytest.MonkeyPatch, name: str, *steps: Step, headline: str = "") -> None:
    monkeypatch.setitem(manifest.BY_NAME, name, Measurement(name, "a test", "33", "", tuple(steps), headline=headline))


def _members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_runner_archives_files_figures_and_a_timeout(monkeypatch, tmp_path):
    monkeypatch.setattr(runner, "KILL_GRACE_S", 0.5)
    write = (
        "import json, os; open(os.path.join(os.environ['OUT'], 'figures.json'), 'w').write(json.dumps({'x': 1}));"
        "print('W0101 noise'); print('figure: 42 per hour'); print(json.dumps({'row': 1}))"
    )
    # ignores SIGTERM and leaves a grandchild: the runner kills the whole group at the limit
    hang = (
        "import signal, subprocess, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        "p = subprocess.Popen(['sleep', '60']); print('grandchild', p.pid, flush=True); time.sleep(60)"
    )
    _fake(
        monkeypatch,
        "fake",
        Step("write", ("{py}", "-c", write), 30),
        Step("hang", ("{py}", "-c", hang), 2),
        headline=r"^figure",
    )
    _fake(monkeypatch, "fake-fail", Step("fail", ("{py}", "-c", "import sys; print('bad'); sys.exit(3)"), 30))
    out, work = tmp_path / "out", tmp_path / "work"
    t0 = time.monotonic()
    rc = runner.run(["fake", "fake-fail"], out, work, probe_env=False)
    assert rc == 1
    assert time.monotonic() - t0 < 25, "the hung step was not killed at its limit"
    assert sorted(p.name for p in out.iterdir()) == sorted([runner.ARCHIVE, runner.TABLE, runner.SUMMARY])
    got = _members(out / runner.ARCHIVE)
    assert {
        "env.json",
        "summary.json",
        "table.txt",
        "fake/write/figures.json",
        "fake/write/output.log",
        "fake/write/result.json",
        "fake/hang/result.json",
        "fake-fail/fail/result.json",
    } <= set(got)
    assert json.loads(got["fake/write/figures.json"]) == {"x": 1}
    write_res = json.loads(got["fake/write/result.json"])
    assert write_res["rc"] == 0 and not write_res["timed_out"]
    assert write_res["headline"] == ["figure: 42 per hour"] and write_res["json_lines"] == [{"row": 1}]
    assert write_res["files"] == ["figures.json"]
    assert b"W0101 noise" in got["fake/write/output.log"]  # kept in the log, not echoed
    hang_res = json.loads(got["fake/hang/result.json"])
    assert hang_res["timed_out"] and hang_res["outcome"].startswith("timeout")
    pid = int(next(ln for ln in hang_res["tail"] if ln.startswith("grandchild")).split()[1])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    assert not _alive(pid), "the step's grandchild outlived its timeout"
    fail_res = json.loads(got["fake-fail/fail/result.json"])
    assert fail_res["rc"] == 3 and fail_res["headline"] == ["bad"]  # no headline pattern: the last lines
    summary = json.loads((out / runner.SUMMARY).read_text())
    assert [(m["name"], m["status"]) for m in summary["measurements"]] == [("fake", "timeout"), ("fake-fail", "failed")]
    text = (out / runner.TABLE).read_text()
    assert re.search(r"^fake +timeout .*hang timeout", text, re.M) and "figure: 42 per hour" in text
    assert re.search(r"^fake-fail +failed .*exit 3", text, re.M) and text.rstrip().endswith("0/2 measurements ok")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")  # a zombie is dead, only not yet reaped (by whoever adopted it)


def test_missing_input_and_spent_limit(monkeypatch, tmp_path):
    _fake(monkeypatch, "needs-kb", Step("x", ("{py}", "-c", "print(1)"), 10))
    monkeypatch.setitem(
        manifest.BY_NAME,
        "needs-kb",
        Measurement("needs-kb", "t", "33", "", manifest.BY_NAME["needs-kb"].steps, needs=("no-such-carried-dir",)),
    )
    _fake(
        monkeypatch,
        "slow",
        Step("a", ("{py}", "-c", "import time; time.sleep(30)"), 30),
        Step("b", ("{py}", "-c", "print(2)"), 30),
    )
    monkeypatch.setattr(runner, "KILL_GRACE_S", 0.5)
    rc = runner.run(["needs-kb", "slow"], tmp_path / "out", tmp_path / "work", limit_s=2, probe_env=False)
    assert rc == 1
    summary = json.loads((tmp_path / "out" / runner.SUMMARY).read_text())
    needs, slow = summary["measurements"]
    assert needs["status"] == "missing" and "no-such-carried-dir" in needs["note"] and not needs["steps"]
    assert slow["status"] == "timeout"
    assert [s["timed_out"] for s in slow["steps"]] == [True, True] and slow["steps"][1]["seconds"] == 0.0


def _python(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return _python("-m", "benchmarks", *args)


def test_list_and_dry_run_without_a_gpu():
    p = _cli("--list")
    assert p.returncode == 0, p.stderr
    for m in MEASUREMENTS:
        assert re.search(rf"^{re.escape(m.name)} ", p.stdout, re.M), m.name
    p = _cli("--dry-run", "forgery", "clock-cold-ab", "throughput")
    assert p.returncode == 0, p.stderr
    assert (
        "benchmarks/forgery_redteam.py --tasks relu_scale --runs 3 --out '$OUT/forgery/forgery_redteam/forgery.json'"
        in p.stdout
    )
    assert p.stdout.count("scripts/gpu_check.py") == 3 and "--clock flush,cold" in p.stdout
    assert "total 1630 s" in p.stdout and "more than one device call" in p.stdout
    p = _cli("no-such-measurement")
    assert p.returncode == 2 and "unknown measurement: no-such-measurement" in p.stderr


def test_the_runner_also_runs_as_a_script():
    p = _python("benchmarks/runner.py", "--list")
    assert p.returncode == 0, p.stderr
    assert re.search(r"^forgery ", p.stdout, re.M)


def test_the_runner_imports_nothing_heavy():
    """--list and --dry-run start in well under a second: the runner and manifest import the standard
    library only (the programs they run import torch, in their own processes)."""
    code = (
        "import sys; import benchmarks.runner; print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'numpy', 'cuda_agent')))"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "[]", p.stdout + p.stderr
