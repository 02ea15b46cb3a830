"""The judgement and its results.

- `compare.py`    candidate outputs against the reference's (run in the reference child, on the GPU).
- `reward.py`     the milestone reward of the paper, a pure function.
- `result.py`     the typed result of one evaluation (`EvalResult`, `Status`, `Finding`).
- `result_key.py` the result cache's key: everything that decides a verdict.
- `cache.py`      the persistent key-value store of baselines and results.
- `render.py`     an `EvalResult` as plain text."""
