"""The judgement and its results (the comparison of outputs, run in the reference child, is
`shared/compare.py`).

- `reward.py`     the milestone reward of the paper, a pure function.
- `result.py`     the typed result of one evaluation (`EvalResult`, `Status`, `Finding`).
- `result_key.py` the result cache's key: everything that decides a verdict.
- `cache.py`      the persistent key-value store of baselines and results.
- `render.py`     an `EvalResult` as plain text."""
