"""Issue 17 items 2 and 3: `init` never loses the agent's work and never leaves half a workspace.
--force refreshes protected files only; --solution / --reset replace model_new.py and kernels/
as a unit and keep the old ones; a failing init leaves nothing behind."""

from __future__ import annotations

import pytest
from conftest import ROOT

from cuda_agent.cli.main import main
from cuda_agent.task.workspace import META, read_agent_sources, stage

EX = ROOT / "examples" / "diag_matmul"
TASK = str(EX / "task.py")


def _init(*args: str) -> int:
    return main(["init", TASK, *args])


def test_force_refreshes_protected_files_and_keeps_agent_files(tmp_path, cache_env, capsys):
    w = tmp_path / "W"
    assert _init("-o", str(w)) == 0
    (w / "model_new.py").write_text((w / "model_new.py").read_text() + "#mine\n")
    (w / "kernels" / "mine.cu").write_text("// my kernel\n")
    model = w / "model.py"
    model.chmod(0o644)
    model.write_text("# tampered\n")
    assert _init("-o", str(w)) == 2  # not empty, no flag: refused
    assert "--force" in capsys.readouterr().err
    assert _init("-o", str(w), "--force") == 0
    assert "kept" in capsys.readouterr().out
    assert (w / "model_new.py").read_text().endswith("#mine\n") and (w / "kernels" / "mine.cu").is_file()
    assert model.read_text() == EX.joinpath("task.py").read_text()  # protected file refreshed
    assert not stage(w, tmp_path / "staged").findings


def test_solution_replaces_agent_files_as_a_unit_and_keeps_the_old_ones(tmp_path, cache_env, capsys):
    w = tmp_path / "W"
    assert _init("-o", str(w)) == 0
    (w / "model_new.py").write_text("# my model\n")
    (w / "kernels" / "old.cu").write_text("// old kernel\n")
    assert _init("-o", str(w), "--force", "--solution", str(EX / "solution")) == 0
    out = capsys.readouterr().out
    assert sorted(p.name for p in (w / "kernels").iterdir()) == sorted(
        p.name for p in (EX / "solution" / "kernels").iterdir()
    )
    assert read_agent_sources(w)["model_new.py"] == (EX / "solution" / "model_new.py").read_text()
    kept = [p for p in (w / META).parent.iterdir() if p.name.startswith("replaced-")]
    assert len(kept) == 1 and str(kept[0]) in out
    assert (kept[0] / "model_new.py").read_text() == "# my model\n" and (kept[0] / "kernels" / "old.cu").is_file()
    # --reset: back to the template, the solution kept aside too
    assert _init("-o", str(w), "--force", "--reset") == 0
    assert list((w / "kernels").iterdir()) == [] and "NotImplementedError" in (w / "model_new.py").read_text()
    assert len([p for p in (w / META).parent.iterdir() if p.name.startswith("replaced-")]) == 2
    assert not any(p.name.startswith(("incoming-", "old-")) for p in (w / META).parent.iterdir())


def test_nothing_is_left_behind_by_a_failing_init(tmp_path, cache_env, capsys):
    target = tmp_path / "deep" / "er" / "ws"
    assert _init("-o", str(target), "--solution", str(tmp_path / "missing")) == 2
    assert "solution folder not found" in capsys.readouterr().err
    assert not (tmp_path / "deep").exists()
    empty_solution = tmp_path / "sol"
    empty_solution.mkdir()
    assert _init("-o", str(target), "--solution", str(empty_solution)) == 2
    assert not (tmp_path / "deep").exists()


def test_a_failure_midway_removes_the_partial_workspace(tmp_path, cache_env, monkeypatch):
    import cuda_agent.task.workspace as ws_mod

    def broken_copy(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ws_mod.shutil, "copytree", broken_copy)
    target = tmp_path / "new" / "ws"
    with pytest.raises(OSError):
        ws_mod.make_workspace(ws_mod.Task.from_file(TASK), target, solution=EX / "solution")
    assert not (tmp_path / "new").exists()


def test_an_existing_empty_directory_becomes_the_workspace(tmp_path, cache_env):
    w = tmp_path / "empty"
    w.mkdir()
    assert _init("-o", str(w), "--solution", str(EX / "solution")) == 0
    assert (w / "kernels" / "diag_scale.cu").is_file() and (w / "model.py").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".empty.init-")]


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["init", str(EX), "-o", "/tmp/never"], "is a directory; give the task file (did you mean"),
        (["init", TASK, "-o", "/tmp/never", "--reset", "--solution", str(EX / "solution")], "give one"),
    ],
)
def test_init_bad_input_says_what_is_wrong(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1


def test_workspaces_made_from_many_threads_at_once_all_succeed(tmp_path, cache_env):
    """The RL rollout resets several environments of one task at once in a thread pool; each
    reset records the pristine task in the shared cache. Threads of one process once shared a
    temporary file name there, so one thread's rename removed another's (CI saw the crash)."""
    import threading

    from cuda_agent.task import Task
    from cuda_agent.task.workspace import init_workspace, pristine_dir

    task = Task.from_file(TASK)
    errors: list[BaseException] = []
    start = threading.Barrier(12)

    def one(i: int) -> None:
        try:
            start.wait()
            init_workspace(task, tmp_path / f"w{i}")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    for _round in range(5):
        import shutil

        shutil.rmtree(pristine_dir(task.hash), ignore_errors=True)
        for p in tmp_path.glob("w*"):
            shutil.rmtree(p)
        threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[:1]
        assert (pristine_dir(task.hash) / "model.py").read_text() == task.source
    assert not list(pristine_dir(task.hash).glob("*.tmp"))
