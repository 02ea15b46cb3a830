"""The parent's side of the channel to its evaluation children.

- `messages.py`   the message types: one typed, validated request and reply per command (shared with the children).
- `tensorfile.py` the tensor file format outputs travel in (shared with the children).
- `processes.py`  the subprocesses the parent runs: compilers and evaluation children (`Child`).
- `children.py`   an evaluation's two children, their dirs and environment, and a spare pair started ahead.
- `exchange.py`   the typed sends and receives, the wait each books, and how each failure ends an evaluation."""
