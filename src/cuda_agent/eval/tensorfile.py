"""A minimal tensor file format for handing outputs from a child to the parent.

Contract: `save_tensors` writes a JSON header line (dtype, shape per tensor)
followed by the raw bytes of each tensor, contiguous, on the CPU.
`load_tensors` reads it back with `torch.frombuffer`: no pickle, so a hostile
writer cannot execute code in the reader; sizes are checked against the file
and against `max_bytes`. Imports only the standard library and torch (it runs
inside evaluation children too).

Not guaranteed: authenticity. Anyone who can write the file can change its
numbers; the parent names the file in a directory the candidate is not told about.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

_DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float64, torch.float32, torch.float16, torch.bfloat16,
        torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
        torch.complex64, torch.complex128,
    )
}


class TensorFileError(ValueError):
    pass


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def save_tensors(path: str | Path, tensors: list[torch.Tensor]) -> None:
    cpu = [t.detach().contiguous().cpu() for t in tensors]
    header = {"tensors": [{"dtype": dtype_name(t.dtype), "shape": list(t.shape)} for t in cpu]}
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(json.dumps(header).encode() + b"\n")
        for t in cpu:
            if t.numel():
                f.write(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    os.replace(tmp, path)


def load_tensors(path: str | Path, max_bytes: int) -> list[torch.Tensor]:
    size = os.path.getsize(path)
    if size > max_bytes:
        raise TensorFileError(f"output file is {size} bytes, more than the {max_bytes} allowed")
    with open(path, "rb") as f:
        data = f.read()
    nl = data.find(b"\n")
    if nl < 0 or nl > 1 << 20:
        raise TensorFileError("tensor file has no header")
    try:
        header = json.loads(data[:nl])
        specs = header["tensors"]
    except (ValueError, KeyError, TypeError):
        raise TensorFileError("tensor file header is malformed") from None
    out: list[torch.Tensor] = []
    off = nl + 1
    for spec in specs:
        dt = _DTYPES.get(spec.get("dtype")) if isinstance(spec, dict) else None
        shape = spec.get("shape") if isinstance(spec, dict) else None
        if dt is None or not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
            raise TensorFileError(f"tensor file entry is malformed: {spec!r:.200}")
        n = 1
        for s in shape:
            n *= s
        nbytes = n * torch.empty((), dtype=dt).element_size()
        if off + nbytes > len(data):
            raise TensorFileError("tensor file is truncated")
        if n == 0:
            out.append(torch.empty(shape, dtype=dt))
        else:
            buf = bytearray(data[off : off + nbytes])
            out.append(torch.frombuffer(buf, dtype=dt).reshape(shape))
        off += nbytes
    if off != len(data):
        raise TensorFileError("tensor file has trailing bytes")
    return out
