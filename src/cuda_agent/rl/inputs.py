"""What `rl config` and `rl train` check before verl sees their inputs, each problem as one line.

verl meets a bad input deep inside Hydra, Ray or a worker process and reports it as a traceback
(a model folder whose config.json names no architecture fails in Hydra's instantiate; an
unreachable Ray address waits and then fails inside `ray.init`). These checks come first.

Contract: each function returns None when the input looks usable and otherwise one line saying
what is wrong and what to do.
- `model_problem(path)`: a local folder with a config.json naming exactly one architecture and a
  tokenizer with a chat template (the agent loop renders every turn with it);
- `dataset_problem(path)`: a parquet file with at least one row;
- `ray_problem(address)`: a TCP connection to the Ray head's port opens within a few seconds
  ("auto" and "local" are not checked: Ray resolves them itself).
Not guaranteed: that verl accepts the model (its own loader still runs in `rl config`), that the
rows have the columns a stage needs, or that the Ray cluster has the resources the config asks for.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path


def model_problem(path: str | Path) -> str | None:
    p = Path(path)
    cfg = p / "config.json"
    if not cfg.is_file():
        return f"{path}: not a local model folder with a config.json"
    try:
        data = json.loads(cfg.read_text())
    except (OSError, ValueError) as e:
        return f"{cfg}: unreadable ({e})"
    arch = data.get("architectures")
    if not isinstance(arch, list) or len(arch) != 1:
        return f'{cfg}: `architectures` must name exactly one model class (e.g. ["Qwen2ForCausalLM"]), got {arch!r}'
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(p))
    except Exception as e:  # noqa: BLE001 - any loader failure is the folder's problem, said in one line
        return f"{path}: no usable tokenizer ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
    if not getattr(tok, "chat_template", None):
        return f"{path}: the tokenizer has no chat template (the agent loop renders every turn with it)"
    return None


def dataset_problem(path: str | Path) -> str | None:
    p = Path(path)
    if not p.is_file():
        return f"{path}: no such dataset (write it with `cuda-agent rl prompts`, `rl rft` or `rl vp`)"
    try:
        import pyarrow.parquet as pq

        rows = pq.ParquetFile(str(p)).metadata.num_rows
    except Exception as e:  # noqa: BLE001 - not parquet, truncated, ...: one line
        return f"{path}: not a readable parquet file ({type(e).__name__})"
    if rows == 0:
        return f"{path}: the dataset has no rows"
    return None


def ray_problem(address: str, timeout_s: float = 5.0) -> str | None:
    addr = address.strip()
    if addr in ("auto", "local", ""):
        return None
    hostport = addr.split("://", 1)[-1].rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        return f"--ray-address {address}: expected HOST:PORT (e.g. 10.0.0.1:6379)"
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except OSError as e:
        return f"--ray-address {address}: cannot reach the Ray cluster ({e.strerror or type(e).__name__})"
