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
    header = {"tensors": [{"dtype": dtype_name(t.dtype), "shape": list(t.shape)} for t in tensors]}
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(json.dumps(header).encode() + b"\n")
        for t in tensors:
            if t.numel():
                # one device-to-host copy, then the bytes go straight to the file
                flat = t.detach().contiguous().reshape(-1).view(torch.uint8).cpu()
                f.write(memoryview(flat.numpy()))
    os.replace(tmp, path)


def load_tensors(path: str | Path, max_bytes: int) -> list[torch.Tensor]:
    size = os.path.getsize(path)
    if size > max_bytes:
        raise TensorFileError(f"output file is {size} bytes, more than the {max_bytes} allowed")
    with open(path, "rb") as f:
        line = f.readline(1 << 20)
        if not line.endswith(b"\n"):
            raise TensorFileError("tensor file has no header")
        try:
            specs = json.loads(line)["tensors"]
        except (ValueError, KeyError, TypeError):
            raise TensorFileError("tensor file header is malformed") from None
        if not isinstance(specs, list):
            raise TensorFileError("tensor file header is malformed")
        out: list[torch.Tensor] = []
        left = size - len(line)
        for spec in specs:
            dt = _DTYPES.get(spec.get("dtype")) if isinstance(spec, dict) else None
            shape = spec.get("shape") if isinstance(spec, dict) else None
            if dt is None or not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
                raise TensorFileError(f"tensor file entry is malformed: {spec!r:.200}")
            n = 1
            for s in shape:
                n *= s
            nbytes = n * torch.empty((), dtype=dt).element_size()
            if nbytes > left:
                raise TensorFileError("tensor file is truncated")
            # read straight into the tensor's memory: no intermediate copies
            buf = torch.empty(nbytes, dtype=torch.uint8)
            if nbytes and f.readinto(memoryview(buf.numpy())) != nbytes:
                raise TensorFileError("tensor file is truncated")
            left -= nbytes
            out.append(buf.view(dt).reshape(shape) if nbytes else torch.empty(shape, dtype=dt))
        if left != 0:
            raise TensorFileError("tensor file has trailing bytes")
    return out
