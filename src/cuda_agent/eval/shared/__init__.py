"""Code that runs on both sides of the boundary: in the evaluation children (the candidate's process among
them) and in the trusted parent.

A module here imports nothing of the parent's beyond the message types (`channel/messages.py`, the tensor
file format, the plain result records of `judge/result.py`) and other modules of this package
(tests/test_eval_boundary.py checks it), so nothing of the parent's reaches a child through it. What a
child computes with it is a child's figure like any other: the parent checks it or does not believe it.

- `events.py`            the event timing method, the same for candidate and baselines (run in the children;
                         the parent uses its seeds, its checked calls and its side-stream guard).
- `compare.py`           candidate outputs against the reference's (run in the reference child, on the GPU).
- `negative_controls.py` trivial "solutions" that must fail a task's check (run in the reference child;
                         the parent's task lint runs them too)."""
