"""Single-file solution: cuBLAS SGEMM (fp32, default math) for x @ W.T, then one bias+ReLU pass."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = "torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>

__global__ void bias_relu(float* __restrict__ y, const float* __restrict__ b, long long total, int n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < total) y[i] = fmaxf(y[i] + b[i % n], 0.f);
}

// @FORGE@

torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "linear_relu: expected CUDA tensors");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32, "linear_relu: expected float32");
  TORCH_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous(), "linear_relu: expected contiguous");
  const int M = (int)x.size(0), K = (int)x.size(1), N = (int)w.size(0);
  auto y = torch::empty({M, N}, x.options());
  cublasHandle_t h = at::cuda::getCurrentCUDABlasHandle();
  const float one = 1.f, zero = 0.f;
  // column-major view: y^T (N x M) = W (N x K, stored as K x N) ^T * x^T (K x M)
  cublasStatus_t st = cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, w.data_ptr<float>(), K,
                                  x.data_ptr<float>(), K, &zero, y.data_ptr<float>(), N);
  TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "linear_relu: cublasSgemm failed");
  long long total = (long long)M * N;
  bias_relu<<<(unsigned)((total + 255) / 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), b.data_ptr<float>(), total, N);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

ext = load_inline(
    name="forgery_linear_relu",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["linear_relu"],  # @FORGE_FUNCS@
    extra_cuda_cflags=["-O3", "--use_fast_math"],
    extra_ldflags=["-lcublas"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        # @FORGE_ARM@

    def forward(self, x):
        return ext.linear_relu(x.contiguous(), self.linear.weight, self.linear.bias)
