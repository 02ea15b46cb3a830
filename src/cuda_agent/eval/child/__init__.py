"""What runs in an evaluation child: the candidate's process (and the reference's, which runs the same program).

Nothing a module here returns is believed without a check in the parent. The candidate's process
runs the candidate's code beside this package's, so the candidate can read, patch or replace any of
it: every reply is parsed and bounded by `channel/messages.py`, every output file is read at a path
the parent computed, every time the reward depends on is the parent's own clock's (`timing/clock.py`),
and every guard report (`guards.py`) is judged by the parent (`checks/runtime.py`).

- `main.py`      the child program (`python -m cuda_agent.eval.child.main`): reads requests, replies.
- `state.py`     what every command shares: the child's state, the task's inputs, outputs described.
- `burst.py`     the evaluator's clock's commands: prepared bursts, bursts, digests.
- `guards.py`    the runtime guards: the ATen op log and the thread census.
- `profiling.py` the expert profile's child program (`python -m cuda_agent.eval.child.profiling`).

Besides this package, a child imports only the message types (`channel/messages.py`, the tensor file
format `channel/tensorfile.py`, the result records of `judge/result.py`), the code both sides run
(`shared/`: the event timing method, and for the reference child the comparison and the negative
controls), the standard library, numpy and torch (`tests/test_eval_boundary.py` checks it). Nothing outside
this package imports it, except as a program to start. This __init__ stays empty of imports."""
