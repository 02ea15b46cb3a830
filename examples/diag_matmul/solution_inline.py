"""diag(a) @ B as a row scaling, in KernelBench's single-file solution style:
the CUDA source is a string compiled with torch.utils.cpp_extension.load_inline
when this module is imported. Same rules as the workspace solution: forward
only allocates/inspects tensors and calls the compiled function."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <cstdint>

__global__ void row_scale_vec4(const float* __restrict__ a, const float4* __restrict__ b,
                               float4* __restrict__ out, long long n_vec, long long vec_per_row) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x; v < n_vec; v += stride) {
    const float s = __ldg(a + v / vec_per_row);
    float4 t = __ldg(b + v);
    t.x *= s; t.y *= s; t.z *= s; t.w *= s;
    out[v] = t;
  }
}

__global__ void row_scale_scalar(const float* __restrict__ a, const float* __restrict__ b,
                                 float* __restrict__ out, long long n, long long cols) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = __ldg(a + i / cols) * __ldg(b + i);
}

torch::Tensor diag_scale_rows(torch::Tensor a, torch::Tensor B) {
  TORCH_CHECK(a.is_cuda() && B.is_cuda(), "diag_scale_rows: tensors must be on the GPU");
  TORCH_CHECK(a.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32,
              "diag_scale_rows: expected float32");
  TORCH_CHECK(a.dim() == 1 && B.dim() == 2 && a.size(0) == B.size(0),
              "diag_scale_rows: expected a [N] and B [N, M]");
  TORCH_CHECK(a.is_contiguous() && B.is_contiguous(), "diag_scale_rows: tensors must be contiguous");
  const c10::cuda::CUDAGuard guard(B.device());
  auto out = torch::empty_like(B);
  const long long rows = B.size(0), cols = B.size(1), n = rows * cols;
  if (n == 0) return out;
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int threads = 256;
  const float* bp = B.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const bool aligned = ((reinterpret_cast<uintptr_t>(bp) | reinterpret_cast<uintptr_t>(op)) & 15u) == 0;
  if (cols % 4 == 0 && aligned) {
    const long long n_vec = n / 4;
    long long blocks = (n_vec + threads - 1) / threads;
    if (blocks > 132LL * 16) blocks = 132LL * 16;
    row_scale_vec4<<<(int)blocks, threads, 0, stream>>>(a.data_ptr<float>(),
        reinterpret_cast<const float4*>(bp), reinterpret_cast<float4*>(op), n_vec, cols / 4);
  } else {
    long long blocks = (n + threads - 1) / threads;
    if (blocks > 132LL * 16) blocks = 132LL * 16;
    row_scale_scalar<<<(int)blocks, threads, 0, stream>>>(a.data_ptr<float>(), bp, op, n, cols);
  }
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "diag_scale_rows: kernel launch failed: ", cudaGetErrorString(err));
  return out;
}
"""

_CPP_SRC = "torch::Tensor diag_scale_rows(torch::Tensor a, torch::Tensor B);"

_ext = load_inline(
    name="diag_scale_inline",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["diag_scale_rows"],
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, B):
        return _ext.diag_scale_rows(a.contiguous(), B.contiguous())
