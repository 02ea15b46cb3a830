"""Timing, and the evaluator's clock with its verdict (the event timing method the children run is
`shared/events.py`).

- `clock.py`        the reward's time: the evaluator's own clock, and its verdict on the candidate's figure.
- `timed.py`        the timed half of an evaluation: the candidate's timing, its timed outputs checked, the
                    clock's bursts, the baselines, the speed-of-light flag.
- `gpu_lock.py`     one timing at a time per physical GPU, across every process of the machine.
- `baseline_set.py` the baselines a candidate is compared with, and its speedup against the best.
- `baselines.py`    a task's baselines timed ahead of any candidate, into the evaluator's cache."""
