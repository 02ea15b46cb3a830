"""Layer 1: the trusted evaluator. Import the entry points from `cuda_agent.eval.api`.

The layout is the trust boundary (ARCHITECTURE.md draws it; tests/test_eval_boundary.py enforces it):

- `child/`    runs in the evaluation children, the candidate's process among them: nothing it
              returns is believed without a check in the parent.
- `channel/`  the parent's side of the channel: the message types, the child processes, the warm
              spares, the tensor files, the typed exchanges and how each failure ends an evaluation.
- `build/`    the build: a workspace, a single file's `load_inline`, the split of its CUDA text.
- `shared/`   what runs on both sides: the event timing method, the output comparison, the negative
              controls; it imports nothing of the parent's but the message types.
- `checks/`   the static rules, the built objects' symbols, the runtime guards' verdict, the task
              lint, the speed-of-light flag, the sanitizer lane.
- `timing/`   the evaluator's clock and its verdict, the timed half, the GPU lock, baselines.
- `judge/`    the judgement and results: reward, result, the result cache and its key, render.
- `profile/`  the expert profile (never part of a result).
- `api.py` the entry points, `config.py` the settings, `pipeline.py` one evaluation's phases,
  `gpu.py` the parent's GPU identity, `progress.py` the phase announced to a terminal.

This package's __init__ (and every subpackage's) stays empty of imports: the child process imports
`cuda_agent.eval.child.main`, which must pull in only the standard library and torch."""
