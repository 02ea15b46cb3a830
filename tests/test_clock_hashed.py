"""The evaluator's clock's lighter loop (`child.hashed`): counter-based draws (`EvalConfig.clock_draws =
"fast"`) and sign digests (`clock_digest = "hash"`).

What must hold for them to stand in for torch's draws and the dense digest: the draws keep the task's
shapes, dtypes and distributions and follow the burst's salt (the same salt, the same numbers; another
salt, others); anything the patch does not make falls through to torch unchanged, and torch is restored
after it; a sign digest's variance over its key is the error's squared norm (the tolerance scales keep
their meaning), a wrong or skipped output is caught (both beside the other digests, in
tests/test_clock_digest.py), an error on one element moves it by exactly that error; both children compute the same digests for the same salt (the burst and the eager sequence).
The CPU lane computes the same hash with torch's integer ops; the GPU kernels' agreement with it, and
whether the loop gets lighter, are GPU figures (tests/test_gpu_clock_hashed.py, benchmarks/clock_placement.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from cuda_agent.eval.channel import messages as P
from cuda_agent.eval.child import hashed
from cuda_agent.eval.child.burst import (
    DIGESTS_PER_OUTPUT,
    HashKey,
    Plan,
    _run,
    _sequence_digests,
    _weight_buffers,
)
from cuda_agent.eval.config import clock_opt_ins
from cuda_agent.eval.shared import lightloop

CPU = torch.device("cpu")
N = 100_003


def _key(a: int, b: int) -> torch.Tensor:
    return torch.tensor([a, b], dtype=torch.int32)


def _fmix(h: int) -> int:
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    return h ^ (h >> 16)


def test_the_cpu_hash_is_the_kernels_hash_written_in_python():
    """murmur3's finaliser twice, keyed, in plain Python integers: torch's int64 version wraps as uint32 does
    (its products overflow int64 for large words, and only their low 32 bits may count)."""
    k0, k1 = 0x7FFFFFFF, 0x12345678
    idx = [0, 1, 2, 77, (1 << 31) + 5, 0xFFFFFFFE]
    want = [_fmix((_fmix(i ^ k0) + k1) & 0xFFFFFFFF) for i in idx]
    got = [int(hashed._hash_cpu(_key(k0, k1), i, 1)[0]) for i in idx]
    assert got == want
    for name in ("ca_fmix", "0x85ebca6bu", "0xc2b2ae35u", "h >> 13"):  # the kernel spells the same hash
        assert name in lightloop.CUDA_SRC


def _nvrtc_here() -> bool:
    try:
        lightloop.find_nvrtc()
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _nvrtc_here(), reason="no NVRTC library on this machine")
def test_the_kernels_compile_with_nvrtc_and_no_headers():
    ptx = lightloop.nvrtc_ptx(lightloop.CUDA_SRC, "compute_90").rstrip(b"\0").decode()
    assert ".entry ca_draw(" in ptx and ".entry ca_digest(" in ptx and ".entry ca_reduce(" in ptx
    assert "lg2.approx" in ptx and "sin.approx" in ptx  # the fast intrinsics, not libdevice's accurate ones
    with pytest.raises(RuntimeError, match="NVRTC compile failed"):
        lightloop.nvrtc_ptx("this is not CUDA {", "compute_90")


def test_normal_and_uniform_draws_have_their_distributions():
    t = hashed.fill(torch.empty(400_001), _key(11, 22), "normal", 0.0, 1.0).double()
    assert torch.isfinite(t).all()
    kurt = float(((t - t.mean()) ** 4).mean() / t.var() ** 2)
    assert abs(float(t.mean())) < 0.01 and abs(float(t.std()) - 1) < 0.01 and abs(kurt - 3) < 0.05
    q = torch.quantile(t[:100_000].float(), torch.tensor([0.025, 0.5, 0.975]))
    assert torch.allclose(q, torch.tensor([-1.96, 0.0, 1.96]), atol=0.03), q
    s = hashed.fill(torch.empty(10_000), _key(11, 22), "normal", 3.0, 0.5)
    assert abs(float(s.mean()) - 3) < 0.02 and abs(float(s.std()) - 0.5) < 0.02
    u = hashed.fill(torch.empty(400_000), _key(5, 6), "uniform", -2.0, 4.0)
    assert float(u.min()) >= -2 and float(u.max()) < 2 and abs(float(u.mean())) < 0.02
    assert abs(float(u.double().var()) - 16 / 12) < 0.02
    assert torch.histc(u, bins=8, min=-2, max=2).min() > 0.97 * 50_000  # flat: each eighth within 3 %


def test_the_key_decides_every_draw():
    a = hashed.fill(torch.empty(1000), _key(1, 2), "normal", 0.0, 1.0)
    assert torch.equal(a, hashed.fill(torch.empty(1000), _key(1, 2), "normal", 0.0, 1.0))
    for other in (_key(1, 3), _key(2, 2)):
        b = hashed.fill(torch.empty(1000), other, "normal", 0.0, 1.0)
        assert abs(float(torch.corrcoef(torch.stack([a, b]))[0, 1])) < 0.15


def test_half_precision_draws_are_the_float_draws_rounded():
    full = hashed.fill(torch.empty(5000), _key(9, 9), "normal", 0.0, 1.0)
    for dtype in (torch.float16, torch.bfloat16):
        half = hashed.fill(torch.empty(5000, dtype=dtype), _key(9, 9), "normal", 0.0, 1.0)
        assert half.dtype == dtype and torch.equal(half, full.to(dtype))
        u = hashed.fill(torch.empty(1 << 16, dtype=dtype), _key(9, 9), "uniform", 0.0, 1.0)
        assert float(u.max()) < 1.0 and float(u.min()) >= 0.0  # one that rounds up to 1 is stored as 0, as torch does


def test_the_patch_serves_torchs_float_draws_from_the_salt_and_leaves_the_rest():
    before = (torch.randn, torch.rand, torch.randn_like, torch.rand_like, torch.Tensor.normal_, torch.Tensor.uniform_)
    torch.manual_seed(5)
    with hashed.patched(CPU):
        a = torch.randn(3, 4)
        b = torch.rand((2, 5), dtype=torch.bfloat16)
        c = torch.randn_like(a)
        z = torch.empty(2000).uniform_(-2, 2)
        m = torch.empty(2000).normal_(10.0, 0.1)
        ints = torch.randint(0, 7, (50,))
        explicit = torch.randn(3, generator=torch.Generator().manual_seed(1))
        doubles = torch.randn(4, dtype=torch.float64)
        with hashed.patched(CPU):  # nested: the outer patch stays in force
            inner = torch.randn(2)
        after_inner = torch.randn(2)
    assert (
        torch.randn,
        torch.rand,
        torch.randn_like,
        torch.rand_like,
        torch.Tensor.normal_,
        torch.Tensor.uniform_,
    ) == before
    torch.manual_seed(5)
    assert torch.equal(a, hashed.fill(torch.empty(3, 4), hashed.fresh_key(CPU), "normal", 0.0, 1.0))
    assert b.shape == (2, 5) and b.dtype == torch.bfloat16 and float(b.min()) >= 0 and c.shape == a.shape
    assert float(z.min()) >= -2 and float(z.max()) < 2 and abs(float(m.mean()) - 10) < 0.01
    assert ints.dtype == torch.int64 and 0 <= int(ints.min()) and int(ints.max()) < 7
    assert torch.equal(explicit, torch.randn(3, generator=torch.Generator().manual_seed(1)))  # torch's own
    assert doubles.dtype == torch.float64 and inner.shape == after_inner.shape == (2,)


def test_one_element_moves_a_sign_digest_by_exactly_its_error():
    """(Its variance over the key, and its catch rate, are tested beside the other digests': tests/test_clock_digest.py.)"""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, generator=g)
    base, moved = torch.empty(2), torch.empty(2)
    hashed.digest_into(x, _key(3, 4), base)
    y = x.clone()
    y[4321] += 2.5
    hashed.digest_into(y, _key(3, 4), moved)
    assert torch.allclose((moved - base).abs(), torch.full((2,), 2.5), atol=1e-6)


def test_half_precision_outputs_are_digested_in_their_own_dtype():
    x = torch.randn(N).to(torch.bfloat16)
    native, widened = torch.empty(2), torch.empty(2)
    hashed.digest_into(x, _key(8, 8), native)
    hashed.digest_into(x.float(), _key(8, 8), widened)
    assert torch.allclose(native, widened, rtol=1e-6, atol=1e-6)
    ints, as_float = torch.empty(2), torch.empty(2)
    hashed.digest_into(torch.arange(1000), _key(8, 8), ints)  # another dtype: copied to fp32 first
    hashed.digest_into(torch.arange(1000).float(), _key(8, 8), as_float)
    assert torch.equal(ints, as_float)


def test_the_burst_loop_and_the_eager_sequence_agree_under_fast_draws_and_sign_digests():
    """What the reference digests for the sampled calls equals what the candidate's burst computed, call by
    call, for the same salt; a different salt draws other inputs and keys; the draws are not torch's."""

    def get_inputs():
        return [torch.randn(N), torch.rand(N // 2, dtype=torch.bfloat16)]

    st = SimpleNamespace(device=CPU, task=SimpleNamespace(get_inputs=get_inputs))

    def fn(x, y):
        return [torch.relu(x) * 1.5, y * 2]

    numels = [N, N // 2]
    weights = _weight_buffers(numels, CPU, "hash")
    assert all(isinstance(w, HashKey) for w in weights)
    plan = Plan(fn, 3, numels, weights, digest="hash", draws="fast")
    got = _run(st, plan, 1234, 2)  # type: ignore[arg-type]
    want, kept = _sequence_digests(st, fn, 1234, 3, 2, numels, digest="hash", draws="fast")  # type: ignore[arg-type]
    n_dig = 2 * DIGESTS_PER_OUTPUT
    assert not torch.isnan(got[:, :n_dig]).any() and torch.equal(got[:, :n_dig], want[:, :n_dig])
    other = _run(st, plan, 1235, 2)  # type: ignore[arg-type]
    assert not torch.allclose(other[:, :n_dig], got[:, :n_dig])
    torch_drawn, _ = _sequence_digests(st, fn, 1234, 3, 2, numels, digest="hash")  # type: ignore[arg-type]
    assert not torch.allclose(torch_drawn[:, :n_dig], want[:, :n_dig])
    assert kept[0][1].dtype == torch.bfloat16


def test_the_draws_travel_in_both_requests_and_the_opt_ins_name_them():
    for req in (
        P.BurstPrepare(8, "model", True, False, False, "hash", False, "fast"),
        P.Digests(9, [1, 2], 1e-2, 1e-2, "hash", "fast"),
    ):
        assert P.request_from_wire(P.to_wire(req)) == req and req.draws == "fast" and req.digest == "hash"
    assert P.BurstPrepare(8).draws == "torch" and P.Digests(9, [1], 1e-2, 1e-2).draws == "torch"
    opts = clock_opt_ins("hash,fast")
    assert opts["clock_digest"] == "hash" and opts["clock_draws"] == "fast"
    assert clock_opt_ins("")["clock_draws"] == "auto" and clock_opt_ins("")["clock_digest"] == "auto"
    old = clock_opt_ins("dense,torch,fresh")
    assert (old["clock_digest"], old["clock_draws"], old["clock_fresh_baselines"]) == ("dense", "torch", True)
    for both in ("rank1,hash", "dense,hash", "torch,fast"):
        with pytest.raises(ValueError, match="one digest"):
            clock_opt_ins(both)
    with pytest.raises(ValueError, match="unknown --clock name"):
        clock_opt_ins("hash,fastt")


def test_the_gpus_default_loop_is_the_lighter_one_where_this_machine_can_build_it(monkeypatch):
    """ "auto" (the default): the lighter loop on a GPU when shared.lightloop can build it, the loop before it
    where it cannot (with no error: every evaluation would fail otherwise) and on the CPU lane; explicit
    names win; a misspelt one is a ValueError. The burst requests, the warm-up and trusted_mode follow it."""
    from cuda_agent.eval import config as C
    from cuda_agent.eval.channel.children import _light_loop
    from cuda_agent.eval.timing.timed import _clock_opt_ins

    monkeypatch.setattr(C, "light_loop_unavailable", lambda: None)
    gpu = C.EvalConfig()
    assert (gpu.clock_digest, gpu.clock_draws) == ("auto", "auto")
    assert gpu.clock_loop() == ("hash", "fast") and _light_loop(gpu) and _clock_opt_ins(gpu) == ["hash", "fast"]
    assert C.cpu_lane().clock_loop() == ("dense", "torch") and not _light_loop(C.cpu_lane())
    assert C.EvalConfig(clock_digest="rank1").clock_loop() == ("rank1", "fast")
    old = C.EvalConfig(**C.clock_opt_ins("dense,torch"))
    assert old.clock_loop() == ("dense", "torch") and not _light_loop(old) and _clock_opt_ins(old) == []
    monkeypatch.setattr(C, "light_loop_unavailable", lambda: "no NVRTC")
    assert C.EvalConfig().clock_loop() == ("dense", "torch") and _clock_opt_ins(C.EvalConfig()) == []
    # the children are started before "auto" is resolved (that imports torch): they warm it if they can
    monkeypatch.setattr(C, "light_loop_unavailable", lambda: pytest.fail("resolved while starting children"))
    assert _light_loop(C.EvalConfig()) and not _light_loop(C.cpu_lane())
    assert C.EvalConfig(clock_digest="hash", clock_draws="fast").clock_loop() == ("hash", "fast")  # asked: its error
    with pytest.raises(ValueError, match="clock_draws='quick'"):
        C.EvalConfig(clock_draws="quick").clock_loop()


def test_the_parents_probe_compiles_the_kernels_here_and_says_why_not_without_nvrtc(monkeypatch):
    """The parent's probe (shared.lightloop.unavailable) compiles the same source with NVRTC (found here in
    the pip nvidia/cu13 folder) without a GPU; without NVRTC it returns the reason, never raises."""
    from cuda_agent.eval.shared import lightloop as L

    L.unavailable.cache_clear()
    try:
        try:
            L.find_nvrtc()
        except OSError:
            pytest.skip("no NVRTC library on this machine")
        from torch.cuda import _utils as cu

        assert (L.unavailable() is None) == hasattr(cu, "_cuda_load_module")

        def missing():
            raise OSError("no NVRTC library (libnvrtc.so) found")

        L.unavailable.cache_clear()
        monkeypatch.setattr(L, "find_nvrtc", missing)
        why = L.unavailable()
        assert why is not None and "could not be built" in why and "libnvrtc" in why
        if hasattr(cu, "_CudaKernel"):  # a torch whose loaded kernels have no handle for the driver's launch

            class NoHandle:
                def __init__(self, func, module):
                    self.module = module

            L.unavailable.cache_clear()
            monkeypatch.setattr(cu, "_CudaKernel", NoHandle)
            why = L.unavailable()
            assert why is not None and "no function handle" in why
    finally:
        L.unavailable.cache_clear()


def test_without_nvrtc_a_gpu_burst_says_why(monkeypatch):
    """No NVRTC (or a failing one): `available` gives the reason, once, and nothing is raised there."""
    monkeypatch.setattr(hashed, "_kernels", {})
    monkeypatch.setattr(hashed, "_unavailable", None)

    def missing():
        raise OSError("no NVRTC library (libnvrtc.so) found")

    monkeypatch.setattr(lightloop, "find_nvrtc", missing)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (9, 0))
    why = hashed.available(torch.device("cuda"))
    assert why is not None and "could not be built" in why and "libnvrtc" in why
    assert hashed.available(torch.device("cuda")) == why and hashed.available(CPU) is None
    with pytest.raises(RuntimeError, match="could not be built"):
        hashed.ready(torch.device("cuda"))


@pytest.mark.slow
def test_the_lighter_loop_runs_end_to_end_on_the_cpu_lane(tmp_path, cache_env):
    """clock_draws="fast" and clock_digest="hash" through a whole evaluation in real children (the CPU
    lane): the candidate's burst digests must match the reference's for the sampled calls, or the
    evaluation ends INCORRECT ("wrong output in the back-to-back calls"). The verdict is not asserted
    (the CPU lane's host clock follows the machine's load; see tests/test_clock_digest.py)."""
    import shutil

    from conftest import FIXTURES, cpu_cfg

    from cuda_agent.eval.api import evaluate_workspace
    from cuda_agent.eval.judge.result import Status
    from cuda_agent.task import Task
    from cuda_agent.task.workspace import init_workspace

    lane = FIXTURES / "cpu_lane"
    src = (lane / "task.py").read_text()
    assert "torch.randn(" in src
    ws = init_workspace(Task.from_source(src, name="relu2_fast"), tmp_path / "ws")
    shutil.copytree(lane / "kernels", ws / "kernels", dirs_exist_ok=True)
    shutil.copy(lane / "model_new.py", ws / "model_new.py")
    r = evaluate_workspace(ws, config=cpu_cfg(reuse_results=False, clock_digest="hash", clock_draws="fast"))
    assert r.status is Status.OK or (r.status is Status.REJECTED and "timing-forged" in r.message), (
        r.message,
        r.log[-1500:],
    )
    assert "burst_check" in r.phases_s and r.trusted_mode == "host+hash+fast" and r.trusted_ms is not None


def test_children_compile_the_lighter_loop_at_cuda_start_only_when_it_is_asked_for():
    """NVRTC's compile belongs with CUDA's start (a spare does it while its caller is idle), not in a
    burst's prepare; an evaluation that does not ask for the lighter loop never pays it."""
    from cuda_agent.eval.channel import children
    from cuda_agent.eval.config import EvalConfig

    assert not children._light_loop(EvalConfig(device="cuda", clock_digest="dense", clock_draws="torch"))
    assert children._light_loop(EvalConfig(device="cuda", clock_digest="dense", clock_draws="fast"))
    assert children._light_loop(EvalConfig(device="cuda", clock_digest="hash", clock_draws="torch"))
    assert not children._light_loop(EvalConfig(device="cpu", clock_draws="fast", clock_digest="hash"))


class _Refusing:
    """A child whose burst prepare raises the reason the lighter loop cannot be built (as hashed.ready does)."""

    def __init__(self, role: str):
        self.role = role

    def send(self, req):
        return None

    def receive(self, timeout, cmd):
        return P.ErrorReply(f"RuntimeError: {lightloop.UNAVAILABLE}: OSError: no NVRTC library (libnvrtc.so) found")

    def kill(self):
        pass

    def log_tail(self):
        return ""


def test_a_machine_that_cannot_build_the_lighter_loop_is_an_env_error_only_on_the_references_word():
    """The reference (our harness alone) failing to build the lighter loop ends the evaluation as ENV_ERROR
    (no reward, not cached) with the way out; the same text from the candidate's process is the candidate's
    failure (-1): it could raise it to escape its reward."""
    from cuda_agent.eval.channel.exchange import Stop
    from cuda_agent.eval.config import EvalConfig
    from cuda_agent.eval.judge.result import EvalResult, Status
    from cuda_agent.eval.timing import timed

    cfg = EvalConfig(clock_digest="hash", clock_draws="fast")
    for role, status, reward in (("reference", Status.ENV_ERROR, None), ("candidate", Status.RUNTIME_ERROR, -1)):
        res = EvalResult(Status.OK, None, True)
        with pytest.raises(Stop) as stop:
            timed._prepare(_Refusing(role), res, cfg, 8, "draws", True, True)  # type: ignore[arg-type]
        r = stop.value.result
        assert (r.status, r.reward) == (status, reward), (role, r.message)
        assert lightloop.UNAVAILABLE in r.message and ("--clock dense,torch" in r.message) == (role == "reference")


def _parameters(src: str) -> dict[str, str]:
    """Each kernel's parameter kinds as the launcher spells them (p pointer, i int, d double), read off the source."""
    import re

    kinds: dict[str, str] = {}
    for name, params in re.findall(r'extern "C" __global__ void (\w+)\(([^)]*)\)', src):
        kinds[name] = "".join(
            "p" if "*" in p else "d" if p.split()[-2] == "double" else "i" if p.split()[-2] == "int" else "?"
            for p in params.split(",")
        )
    return kinds


def test_the_launchers_signatures_are_the_kernels_own():
    """A launcher that passed a double where the kernel reads an int would draw other numbers: the
    declared kinds must be the source's, kernel by kernel, and every kernel the source has is loaded."""
    assert _parameters(lightloop.CUDA_SRC) == hashed._ARGS
    assert set(hashed._ARGS) == {"ca_draw", "ca_digest", "ca_reduce"}


def test_the_launcher_fills_one_argument_block_and_launches_on_the_current_stream(monkeypatch):
    """The launch without torch's wrapper (built once, values set per launch): what the driver reads
    through the block is each argument, a tensor as its address; a driver error raises."""
    import ctypes

    seen: list[tuple] = []

    def launch(func, gx, gy, gz, bx, by, bz, shared, stream, argv, extra):
        values = []
        for kind, slot in zip("ppiiiidd", range(8), strict=True):
            addr = argv[slot]
            ctype = {"p": ctypes.c_void_p, "i": ctypes.c_int, "d": ctypes.c_double}[kind]
            values.append(ctype.from_address(addr).value)
        seen.append((func.value, (gx, gy, gz), (bx, by, bz), shared, stream, values, extra))
        return 0 if len(seen) < 3 else 700

    monkeypatch.setattr(hashed, "_raw_stream", lambda device: 0xABC)
    k = hashed._Kernel(SimpleNamespace(func=ctypes.c_void_p(0x1234)), "ppiiiidd", launch)
    out, key = torch.empty(10), torch.empty(2, dtype=torch.int32)
    k(CPU, 7, 256, out, key, 2, 1, 10, 5, 0.5, 2.0)
    k(CPU, 3, 64, key, out, 0, 0, 4, 0, -1.0, 3.5)
    assert seen[0] == (
        0x1234,
        (7, 1, 1),
        (256, 1, 1),
        0,
        0xABC,
        [out.data_ptr(), key.data_ptr(), 2, 1, 10, 5, 0.5, 2.0],
        None,
    )
    assert seen[1][5] == [key.data_ptr(), out.data_ptr(), 0, 0, 4, 0, -1.0, 3.5] and seen[1][1:3] == (
        (3, 1, 1),
        (64, 1, 1),
    )
    with pytest.raises(RuntimeError, match="CUDA error 700"):
        k(CPU, 1, 32, out, key, 0, 0, 1, 0, 0.0, 1.0)
    with pytest.raises(TypeError, match="7 arguments for 8"):
        k(CPU, 1, 32, out, key, 0, 0, 1, 0, 0.0)


def test_without_torchs_function_handle_the_lighter_loop_is_unavailable_with_the_reason():
    """torch's loader is private: a torch whose loaded kernel has no function handle cannot be launched
    by the driver directly, and `available` (inside whose try this runs) then gives the reason."""
    import ctypes

    for kernel in (SimpleNamespace(), SimpleNamespace(func=ctypes.c_void_p()), SimpleNamespace(func=1234)):
        with pytest.raises(RuntimeError, match="no function handle"):
            hashed._Kernel(kernel, "pii", lambda *a: 0)


def test_the_patch_is_made_once_and_restores_what_it_found(monkeypatch):
    """Entering the patch swaps six attributes (its functions made once per device); a draw it does not
    serve goes to whatever torch had when it was entered, and that is what it puts back."""
    seen: list[tuple] = []

    def spy(*args, **kwargs):
        seen.append((args, kwargs))
        return "spied"

    monkeypatch.setattr(torch, "randn", spy)
    with hashed.patched(CPU):
        first = torch.randn
        assert torch.randn(3, dtype=torch.float64) == "spied"  # not served: to what was there
        assert torch.randn(3).shape == (3,) and seen == [((3,), {"dtype": torch.float64})]
    assert torch.randn is spy
    with hashed.patched(CPU):
        assert torch.randn is first  # the same functions: made once
    assert torch.randn is spy and not hashed._ORIGINAL


# (clock.PROTOCOL, the first 16 hex digits of sha256(lightloop.CUDA_SRC)) for every loop the cache has known
_LOOP_SOURCES = {("burst-v9", "f5c7d2c72923a18a")}


def test_a_change_to_the_loops_kernels_comes_with_a_new_protocol():
    """Cached baselines carry the loop's fitted cost per call under PROTOCOL's key: kernels that change
    under the same PROTOCOL would take one loop's cost out of another's bursts. Changing CUDA_SRC means
    bumping clock.PROTOCOL and recording the new pair above."""
    import hashlib

    from cuda_agent.eval.timing import clock as tt

    digest = hashlib.sha256(lightloop.CUDA_SRC.encode()).hexdigest()[:16]
    assert (tt.PROTOCOL, digest) in _LOOP_SOURCES, (
        f"the lighter loop's kernels are {digest} under {tt.PROTOCOL}: bump clock.PROTOCOL if they changed, "
        "then add the pair to _LOOP_SOURCES"
    )


def test_a_device_context_first_used_under_the_patch_still_routes_torchs_own_draws_after_it():
    """torch's `with torch.device(...)` lists its constructors once per process, on first use: listed while
    the patch stood, it would hold the wrappers, and after the patch torch.randn under a device context
    would land on the CPU (from the CPU's generator: the clock's check then could not jump by the GPU
    generator's offset, and every later input set would be drawn on the CPU and copied). A fresh process:
    the list is process-wide and this suite's earlier tests have made it."""
    code = (
        "import torch\n"
        "from cuda_agent.eval.child import hashed\n"
        "with hashed.patched(torch.device('cpu')):\n"
        "    with torch.device('meta'):\n"
        "        torch.empty(1)\n"
        "with torch.device('meta'):\n"
        "    print(torch.randn(3).device, torch.rand(2).device, torch.randn_like(torch.empty(1)).device)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["meta", "meta", "meta"]
