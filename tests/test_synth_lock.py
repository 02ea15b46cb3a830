"""The synth filter's per-GPU lock (the evaluator's eval.timing.gpu_lock): a timing (exclusive) gets in while
other jobs keep taking it shared.

On the H200, eight filter jobs per GPU took the shared lock in turns so that one was nearly always
inside, and timings waited past their 60 s budget. Threads stand in for the jobs (flock locks belong
to open file descriptions, so two open() calls in one process conflict as two processes would).
"""

from __future__ import annotations

import threading
import time

from cuda_agent.synth.check_child import State, gpu_lock


def test_an_exclusive_taker_is_not_starved_by_shared_takers_in_turn(tmp_path):
    st = State()
    st.lock_dir, st.lock_key = str(tmp_path), "GPU-0"
    stop = threading.Event()

    def reader(offset: float) -> None:
        time.sleep(offset)
        while not stop.is_set():
            with gpu_lock(st, False):
                time.sleep(0.05)

    readers = [threading.Thread(target=reader, args=(i * 0.0125,), daemon=True) for i in range(4)]
    for t in readers:
        t.start()
    time.sleep(0.2)  # the shared lock now always has a holder
    got = threading.Event()
    inside: list[bool] = []

    def writer() -> None:
        with gpu_lock(st, True):
            got.set()
            inside.append(True)

    w = threading.Thread(target=writer, daemon=True)
    t0 = time.monotonic()
    w.start()
    acquired = got.wait(5.0)
    waited = time.monotonic() - t0
    stop.set()
    for t in readers:
        t.join(2.0)
    w.join(2.0)
    assert acquired, "the exclusive taker waited 5 s behind shared takers that kept coming"
    assert waited < 1.0, f"the exclusive taker waited {waited:.2f} s (the readers' sections are 0.05 s)"


def test_exclusive_excludes_shared(tmp_path):
    st = State()
    st.lock_dir, st.lock_key = str(tmp_path), "GPU-0"
    events: list[str] = []

    def reader() -> None:
        with gpu_lock(st, False):
            events.append("r")

    with gpu_lock(st, True):
        t = threading.Thread(target=reader)
        t.start()
        time.sleep(0.2)
        events.append("w-end")
    t.join(2.0)
    assert events == ["w-end", "r"]


def test_a_filter_timing_waits_for_an_evaluations_untimed_work_on_the_same_gpu(tmp_path):
    from cuda_agent.eval.timing import gpu_lock as eval_lock

    st = State()
    st.lock_dir, st.lock_key = str(tmp_path), "GPU-0"
    got = threading.Event()

    def timing() -> None:
        with gpu_lock(st, True):
            got.set()

    with eval_lock.untimed("GPU-0", wait_s=2, directory=tmp_path) as u:
        assert u.exclusive
        t = threading.Thread(target=timing, daemon=True)
        t.start()
        assert not got.wait(0.3)  # an evaluation is running on the GPU: the filter's timing waits
    assert got.wait(2.0)
    t.join(2.0)
