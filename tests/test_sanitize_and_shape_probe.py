"""Two defences added for the H200 corpus run's misses, on the CPU: the compute-sanitizer
lane (wrapper argv, report parsing, the CLI flag, a stand-in tool run through the real
pipeline, the no-GPU path) and the shape probe (input growth, when it decides)."""

from __future__ import annotations

import pytest
from test_pipeline_cpu import cpu_cfg, make_ws

from cuda_agent.eval.api import evaluate_workspace
from cuda_agent.eval.checks import sanitize
from cuda_agent.eval.judge.result import Status

MEMCHECK_BAD = """========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at softmax_rows(const float *, float *, int, int)+0x2d0
=========     by thread (255,0,0) in block (3,0,0)
=========     Address 0x7f0000400000 is out of bounds
========= ERROR SUMMARY: 12 errors
"""
MEMCHECK_CLEAN = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
RACE_BAD = """========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at softmax_rows+0x1a0
=========     and Read access at softmax_rows+0x1f0 [1024 hazards]
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""
RACE_WARN_ONLY = "========= RACECHECK SUMMARY: 2 hazards displayed (0 errors, 2 warnings)\n"


@pytest.mark.parametrize(
    "check,text,errors",
    [
        ("memcheck", MEMCHECK_BAD, 12),
        ("memcheck", MEMCHECK_CLEAN, 0),
        ("racecheck", RACE_BAD, 1),
        ("racecheck", RACE_WARN_ONLY, 0),
        ("memcheck", "target crashed\n", None),
    ],
)
def test_reports_are_parsed_into_error_counts(check, text, errors):
    r = sanitize.parse(check, text)
    assert r.errors == errors
    if errors:
        assert r.excerpt and ("Invalid" in r.excerpt[0] or "Race" in r.excerpt[0])


def test_wrapper_names_the_check_and_log_and_refuses_unknown_checks(tmp_path):
    argv = sanitize.wrap("/opt/cs", "racecheck", tmp_path / "r.log")
    assert argv[:3] == ["/opt/cs", "--tool", "racecheck"] and str(tmp_path / "r.log") in argv
    assert "--leak-check" in sanitize.wrap("/opt/cs", "memcheck", tmp_path / "m.log")
    with pytest.raises(ValueError):
        sanitize.wrap("/opt/cs", "initcheck_typo", tmp_path / "x.log")


@pytest.mark.slow
def test_without_a_gpu_the_lane_warns_and_the_verdict_stands(tmp_path, cache_env):
    plain = evaluate_workspace(make_ws(tmp_path), config=cpu_cfg(), phase="verify")
    lane = evaluate_workspace(make_ws(tmp_path, name="ws2"), config=cpu_cfg(sanitize=True), phase="verify")
    assert plain.status is lane.status is Status.OK and lane.correct
    assert lane.defences["sanitize"].startswith("unavailable")
    assert any(f.rule == "sanitizer-unavailable" for f in lane.findings)
    assert "sanitize" not in plain.defences


def test_cli_accepts_the_flag():
    import argparse

    from cuda_agent.cli import cmd_eval

    p = argparse.ArgumentParser()
    cmd_eval.add_arguments(p)
    assert p.parse_args(["ws", "--sanitize"]).sanitize and not p.parse_args(["ws"]).sanitize


STAND_IN = '''#!{python}
"""Stand-in for compute-sanitizer: runs the command (or, with die, lets it die at once, as a kernel
aborted by memcheck ends the call), then writes a summary with {errors} errors."""
import subprocess, sys
args, log, check = sys.argv[1:], None, None
while args and args[0].startswith("--"):
    opt, val, args = args[0], args[1], args[2:]
    log = val if opt == "--log-file" else log
    check = val if opt == "--tool" else check
rc = 1 if {die} else subprocess.run(args, close_fds=False).returncode
with open(log, "w") as f:
    f.write("========= Invalid __global__ read of size 4 bytes\\n" if {errors} else "")
    f.write("========= ERROR SUMMARY: {errors} errors\\n" if check == "memcheck" else
            "========= RACECHECK SUMMARY: {errors} hazards displayed ({errors} errors, 0 warnings)\\n")
sys.exit(rc)
'''


def _stand_in(tmp_path, errors: int, die: bool = False):
    import sys

    tool = tmp_path / f"sanitizer_{errors}{'_dying' if die else ''}"
    tool.write_text(STAND_IN.format(python=sys.executable, errors=errors, die=die))
    tool.chmod(0o755)
    return tool


@pytest.mark.slow
def test_lane_runs_the_candidate_under_the_tool_and_rejects_on_errors(tmp_path, cache_env, monkeypatch):
    monkeypatch.setenv(sanitize.OVERRIDE, str(_stand_in(tmp_path, 0)))
    clean = evaluate_workspace(make_ws(tmp_path), config=cpu_cfg(sanitize=True), phase="verify")
    assert clean.status is Status.OK and clean.correct, (clean.message, clean.log[-1500:])
    assert clean.defences["sanitize"] == "memcheck clean, racecheck clean"
    assert clean.phases_s["sanitize_memcheck"] > 0 and clean.phases_s["sanitize_racecheck"] > 0
    monkeypatch.setenv(sanitize.OVERRIDE, str(_stand_in(tmp_path, 3)))
    bad = evaluate_workspace(
        make_ws(tmp_path, name="ws2"), config=cpu_cfg(sanitize=True, reuse_results=False), phase="verify"
    )
    assert bad.status is Status.REJECTED and bad.reward == -1 and not bad.correct
    assert "sanitizer-memcheck" in bad.message and "3 error" in bad.message
    assert any(f.rule == "sanitizer-memcheck" and f.severity.value == "reject" for f in bad.findings)


def test_grow_inputs_doubles_the_batch_like_dimension_only():
    import torch

    from cuda_agent.eval.child.main import grow_inputs

    a = [torch.ones(3, 5), torch.ones(5, 2), torch.ones(3), 7]
    b = [torch.zeros(3, 5), torch.zeros(5, 2), torch.zeros(3), 9]
    g = grow_inputs(a, b)
    assert [tuple(x.shape) for x in g[:3]] == [(6, 5), (5, 2), (6,)] and g[3] == 7
    assert g[0][:3].eq(1).all() and g[0][3:].eq(0).all() and g[1].eq(1).all()
    with pytest.raises(ValueError):
        grow_inputs([2.0], [3.0])


@pytest.mark.slow
@pytest.mark.parametrize(
    "errors,status,needle",
    [(2, Status.REJECTED, "sanitizer-memcheck"), (0, Status.RUNTIME_ERROR, "failed under compute-sanitizer")],
)
def test_a_target_that_dies_under_the_tool_is_judged_by_the_report(
    tmp_path, cache_env, monkeypatch, errors, status, needle
):
    monkeypatch.setenv(sanitize.OVERRIDE, str(_stand_in(tmp_path, errors, die=True)))
    r = evaluate_workspace(make_ws(tmp_path), config=cpu_cfg(sanitize=True, reuse_results=False), phase="verify")
    assert r.status is status and r.reward == -1, (r.status, r.message)
    assert needle in r.message


class _Ref:
    role = "reference"

    def __init__(self, ok: bool):
        self.ok = ok

    def request(self, msg, timeout):
        from cuda_agent.eval.channel import messages as P

        return (
            P.RunReply([P.OutputRecord([])])
            if self.ok
            else P.ErrorReply("RuntimeError: mat1 and mat2 shapes cannot be multiplied")
        )


@pytest.mark.parametrize(
    "ref_ok,cand,verdict",
    [
        (True, "OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB", "skipped"),
        (False, "RuntimeError: whatever", "skipped"),
        (True, "RuntimeError: expected 1024 rows", "failed"),
    ],
)
def test_shape_probe_decides_only_when_the_reference_takes_the_doubled_set(ref_ok, cand, verdict):
    from conftest import FIXTURES

    from cuda_agent.eval import pipeline
    from cuda_agent.eval.config import EvalConfig
    from cuda_agent.eval.judge.result import EvalResult
    from cuda_agent.task import Task

    task = Task.from_file(FIXTURES / "cpu_lane" / "task.py")
    res = EvalResult(status=Status.OK, reward=3, correct=True)
    from cuda_agent.eval.channel import messages as P
    from cuda_agent.eval.channel.exchange import Stop

    grow = P.Run([1], "grow", out_dir="/nonexistent", grow_seed=2)
    if verdict == "failed":
        with pytest.raises(Stop) as stop:
            pipeline._shape_probe(_Ref(ref_ok), res, EvalConfig(), task, cand, grow, 1 << 20)
        assert stop.value.result.status is Status.INCORRECT and stop.value.result.reward == -1
        assert "doubled" in stop.value.result.message
    else:
        pipeline._shape_probe(_Ref(ref_ok), res, EvalConfig(), task, cand, grow, 1 << 20)
        assert res.status is Status.OK and res.reward == 3
    assert res.defences["shape_probe"].startswith(verdict)


@pytest.mark.slow
def test_a_single_file_solution_builds_under_the_lane_in_its_private_dirs(tmp_path, cache_env, monkeypatch):
    # load_inline inside a sanitizer child: its only writable dirs are its own (fs_lock), so its
    # extension cache must be private there as it is for the plain candidate child
    from conftest import FIXTURES

    from cuda_agent.eval.api import evaluate_single_file
    from cuda_agent.task import Task

    monkeypatch.setenv(sanitize.OVERRIDE, str(_stand_in(tmp_path, 0)))
    lane = FIXTURES / "cpu_lane"
    r = evaluate_single_file(
        Task.from_file(lane / "task.py"),
        lane / "solution_inline.py",
        config=cpu_cfg(sanitize=True, reuse_results=False, load_timeout=600, sanitize_timeout=600),
        phase="verify",
    )
    assert r.status is Status.OK, (r.message, r.log[-1500:])
    assert r.defences["sanitize"] == "memcheck clean, racecheck clean"
