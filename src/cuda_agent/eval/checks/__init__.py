"""The checks a candidate must pass besides being correct and fast, all decided in the trusted parent.

- `static.py`        the static rules over the candidate's sources: the entry points, and in modules of
                     their own the rules' table (`static_rules.py`), Python (`static_python_names.py`,
                     `static_python.py`), C++/CUDA (`static_cpp_lexer.py`, `static_cpp.py`) and symbol
                     binding (`static_cpp_symbols.py`).
- `gate.py`           the pipeline's (and `cuda-agent check`'s) way into the static rules and the form checks.
- `solution_form.py`  is this a solution at all (checks that need no GPU and no build).
- `symbols.py`        the built objects' undefined symbols against the pristine binding's.
- `runtime.py`        the verdict on the runtime guards' report (the allow-list; `child/guards.py` logs).
- `speed_of_light.py` a time no correct kernel can reach on this device.
- `lint_task.py`      weak-task lint: would trivial outputs pass this task's correctness check? (the
                      controls themselves are `shared/negative_controls.py`)
- `sanitize.py`       the opt-in compute-sanitizer lane."""
