#include "binding_registry.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

extern "C" void rmsnorm_launch(const float* x, const float* w, float* y, long long rows, int cols,
                               float eps, cudaStream_t stream);

// RMSNorm over the last dimension of x with weight [x.size(-1)]
static torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor weight, double eps) {
  TORCH_CHECK(x.is_cuda() && weight.is_cuda(), "rmsnorm: tensors must be on the GPU");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32,
              "rmsnorm: expected float32 tensors");
  TORCH_CHECK(x.is_contiguous() && weight.is_contiguous(), "rmsnorm: tensors must be contiguous");
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 1 && weight.size(0) == x.size(-1),
              "rmsnorm: weight must have x.size(-1) entries");
  TORCH_CHECK(x.device() == weight.device(), "rmsnorm: tensors on different devices");
  const int64_t cols = x.size(-1);
  TORCH_CHECK(cols < (1LL << 31), "rmsnorm: last dimension too large");
  const c10::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty_like(x);
  if (x.numel() == 0) return y;
  const int64_t rows = x.numel() / cols;
  TORCH_CHECK(rows < (1LL << 31), "rmsnorm: too many rows for one grid");
  rmsnorm_launch(x.data_ptr<float>(), weight.data_ptr<float>(), y.data_ptr<float>(), rows, (int)cols,
                 (float)eps, c10::cuda::getCurrentCUDAStream());
  cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "rmsnorm: kernel launch failed: ", cudaGetErrorString(err));
  return y;
}

static void bind_rmsnorm(pybind11::module_& m) {
  m.def("rmsnorm", &rmsnorm, "x * rsqrt(mean(x^2, -1) + eps) * weight");
}
REGISTER_BINDING(rmsnorm, bind_rmsnorm)
