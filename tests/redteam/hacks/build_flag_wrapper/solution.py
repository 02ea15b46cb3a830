"""KernelBench-style single file: an honest relu whose load_inline call passes gcc `-wrapper /usr/bin/env`:
the compiler driver runs every one of its programs under the named one. `env` only passes them on; any
other program (`/bin/sh,-c,...`) would run a command wherever the file is built, before any check of the output."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

relu_cpp = "torch::Tensor relu_cuda(torch::Tensor x);"

relu_cuda_src = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu_cuda(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "relu_cuda: bad input");
  auto y = torch::empty_like(x);
  long long n = x.numel();
  relu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

relu_ext = load_inline(
    name="build_flag_wrapper",
    cpp_sources=relu_cpp,
    cuda_sources=relu_cuda_src,
    functions=["relu_cuda"],
    extra_cflags=["-O3", "-wrapper", "/usr/bin/env"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = relu_ext

    def forward(self, x):
        return self.ext.relu_cuda(x.contiguous())
