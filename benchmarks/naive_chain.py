"""The naive evaluation chain, for comparison only: what the public CUDA-Agent
scripts do on every call. Delete the build, rebuild everything with
`torch.utils.cpp_extension.load`, then check and profile eager, torch.compile
and the candidate afresh in this one process. Prints one JSON line.

Usage: python benchmarks/naive_chain.py WORKSPACE
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

t_start = time.monotonic()
import torch  # noqa: E402
from torch.utils.cpp_extension import load  # noqa: E402


def import_file(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def bench(fn, inputs, warmup=5, iters=50) -> float:
    for _ in range(warmup):
        fn(*inputs)
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(*inputs)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def main() -> None:
    ws = Path(sys.argv[1]).resolve()
    build_dir = ws / "build_naive"
    shutil.rmtree(build_dir, ignore_errors=True)
    build_dir.mkdir()
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    sources = (
        [str(ws / "binding.cpp")]
        + sorted(str(p) for p in (ws / "kernels").glob("*.cpp"))
        + sorted(str(p) for p in (ws / "kernels").glob("*.cu"))
    )
    t0 = time.monotonic()
    ext = load(
        name="cuda_extension",
        sources=sources,
        extra_include_paths=[str(ws)],
        build_directory=str(build_dir),
        extra_cflags=["-O3"],
        extra_cuda_cflags=["-O3", "--use_fast_math"],
        extra_ldflags=["-lcublas", "-lcublasLt"],
        verbose=False,
    )
    t_build = time.monotonic() - t0
    sys.modules["cuda_extension"] = ext
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    task = import_file("model", ws / "model.py")
    cand = import_file("model_new", ws / "model_new.py")
    torch.manual_seed(0)
    ref = task.Model(*task.get_init_inputs()).cuda()
    new = cand.ModelNew(*task.get_init_inputs()).cuda()
    new.load_state_dict(ref.state_dict())
    ok = True
    with torch.no_grad():
        for s in range(5):
            torch.manual_seed(s)
            inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
            ok &= bool(torch.allclose(ref(*inputs), new(*inputs), atol=1e-2, rtol=1e-2))
        t_eager = bench(ref, inputs)
        t_compile = bench(torch.compile(ref), inputs)
        t_new = bench(new, inputs)
    print(
        json.dumps(
            {
                "build_s": round(t_build, 2),
                "correct": ok,
                "eager_ms": t_eager,
                "compile_ms": t_compile,
                "time_ms": t_new,
                "total_s": round(time.monotonic() - t_start, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
