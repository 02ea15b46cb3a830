"""The lighter loop's GPU kernels (`child.hashed`, NVRTC) against the CPU lane's torch version of the same
hash, and inside a CUDA graph as a burst captures them. Skips without a CUDA GPU. How much lighter the
loop gets is a GPU figure printed by benchmarks/clock_placement.py, not asserted here."""

from __future__ import annotations

import pytest
import torch

from cuda_agent.eval.child import hashed

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

GPU = torch.device("cuda")


def _keys() -> tuple[torch.Tensor, torch.Tensor]:
    k = torch.tensor([0x7FFF1234, 0x00ABCDEF], dtype=torch.int32)
    return k, k.to(GPU)


def test_the_kernels_compile_and_match_the_cpu_hash():
    assert hashed.available(GPU) is None
    k_cpu, k_gpu = _keys()
    n = (1 << 20) + 3  # odd: the last pair writes one element
    u_gpu = hashed.fill(torch.empty(n, device=GPU), k_gpu, "uniform", 0.0, 1.0).cpu()
    u_cpu = hashed.fill(torch.empty(n), k_cpu, "uniform", 0.0, 1.0)
    assert torch.equal(u_gpu, u_cpu)  # 24 bits of the same hash, scaled by a power of two: exact
    z_gpu = hashed.fill(torch.empty(n, device=GPU), k_gpu, "normal", 0.0, 1.0).cpu()
    z_cpu = hashed.fill(torch.empty(n), k_cpu, "normal", 0.0, 1.0)
    assert torch.isfinite(z_gpu).all()
    # the GPU's fast log and sincos: their absolute error (~2^-22) is up to ~5e-4 of a normal where u is
    # within 2^-20 of 1 (r = sqrt(-2 log u) is tiny there), far less elsewhere
    assert torch.allclose(z_gpu, z_cpu, rtol=1e-4, atol=1e-3)
    assert float((z_gpu - z_cpu).abs().median()) < 1e-5
    for dtype in (torch.float16, torch.bfloat16):
        half = hashed.fill(torch.empty(n, dtype=dtype, device=GPU), k_gpu, "normal", 0.0, 1.0).cpu()
        full = hashed.fill(torch.empty(n, device=GPU), k_gpu, "normal", 0.0, 1.0).cpu()
        assert torch.equal(half, full.to(dtype)), dtype  # rounded to nearest even, as torch rounds
        u_half = hashed.fill(torch.empty(n, dtype=dtype, device=GPU), k_gpu, "uniform", 0.0, 1.0).cpu()
        assert torch.equal(u_half, hashed.fill(torch.empty(n, dtype=dtype), k_cpu, "uniform", 0.0, 1.0)), dtype


def test_the_sign_digest_kernel_matches_the_cpu_sum_in_every_dtype():
    k_cpu, k_gpu = _keys()
    x = torch.randn((1 << 22) + 17)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        xs = x.to(dtype)
        got, want = torch.empty(2, device=GPU), torch.empty(2)
        hashed.digest_into(xs.to(GPU), k_gpu, got)
        hashed.digest_into(xs, k_cpu, want)
        # fp32 partial sums against the CPU's fp64 sum: within 1e-5 of the sum of |x|
        assert torch.allclose(got.cpu(), want, atol=1e-5 * float(xs.float().abs().sum())), dtype
    strided, packed = torch.empty(2, device=GPU), torch.empty(2, device=GPU)  # a 1-D view with a stride
    hashed.digest_into(x.to(GPU)[::2], k_gpu, strided)
    hashed.digest_into(x[::2].contiguous().to(GPU), k_gpu, packed)
    assert torch.equal(strided, packed)


def test_a_graph_replays_the_salts_draws_and_digests_as_the_eager_sequence():
    """What a burst relies on: under a CUDA graph the draws' keys come from torch's generator, so each
    replay continues the salt's sequence exactly as eager calls would, and two replays differ."""
    hashed.warm(GPU)
    n = 1 << 20
    key = torch.empty(2, dtype=torch.int32, device=GPU)
    out = torch.empty(3, 2, device=GPU)

    def body():
        with hashed.patched(GPU):
            for i in range(3):
                x = torch.randn(n, device=GPU)
                hashed.digest_into(torch.relu(x), key, out[i])

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        body()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        body()
    torch.cuda.manual_seed(77)
    key.random_()
    g.replay()
    g.replay()
    second = out.clone()
    torch.cuda.manual_seed(77)
    key.random_()
    body()
    body()
    torch.cuda.synchronize()
    assert torch.equal(out, second)
    torch.cuda.manual_seed(77)
    key.random_()
    g.replay()
    first = out.clone()
    assert not torch.equal(first, second)


def test_the_digests_own_sum_accumulates_and_a_row_of_another_kind_still_gets_it():
    """The block sums' kernel (a warp per digest, fixed order): it sets or adds to dst as asked (a tensor
    past the 32-bit index is digested in pieces, each added); a dst that is not a plain fp32 pair gets
    the same digest through a copy; and the driver launch and torch's agree exactly."""
    hashed.warm(GPU)
    blocks = 1500
    partial = torch.randn(2 * blocks, device=GPU)
    dst = torch.tensor([10.0, -20.0], device=GPU)
    hashed._kernels["ca_reduce"](GPU, 1, 64, partial, blocks, dst, 1)
    want = partial.view(blocks, 2).double().sum(dim=0).cpu() + torch.tensor([10.0, -20.0], dtype=torch.float64)
    assert torch.allclose(dst.cpu().double(), want, atol=1e-3)
    hashed._kernels["ca_reduce"](GPU, 1, 64, partial, blocks, dst, 0)
    assert torch.allclose(dst.cpu().double(), want - torch.tensor([10.0, -20.0], dtype=torch.float64), atol=1e-3)
    _, k_gpu = _keys()
    x = torch.randn((1 << 21) + 5, device=GPU)
    plain, wide = torch.empty(2, device=GPU), torch.empty(4, dtype=torch.float64, device=GPU)[::2]
    hashed.digest_into(x, k_gpu, plain)
    hashed.digest_into(x, k_gpu, wide)
    assert torch.equal(wide.float(), plain)
    digest_k, reduce_k = hashed._kernels["ca_digest"].torch_kernel, hashed._kernels["ca_reduce"].torch_kernel
    by_torch, partial = torch.empty(2, device=GPU), hashed._partial(GPU)
    b = hashed._blocks(x.numel())  # the same two kernels launched through torch's wrapper
    digest_k(grid=(b, 1, 1), block=(256, 1, 1), args=[x, 0, x.numel(), 0, k_gpu, partial])
    reduce_k(grid=(1, 1, 1), block=(64, 1, 1), args=[partial, b, by_torch, 0])
    assert torch.equal(by_torch, plain)
