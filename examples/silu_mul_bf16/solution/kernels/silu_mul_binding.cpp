#include "binding_registry.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

extern "C" void silu_mul_launch(const void* a, const void* b, void* out, long long n, cudaStream_t stream);

static torch::Tensor silu_mul(torch::Tensor a, torch::Tensor b) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda(), "silu_mul: a and b must be on the GPU");
  TORCH_CHECK(a.scalar_type() == torch::kBFloat16 && b.scalar_type() == torch::kBFloat16,
              "silu_mul: a and b must be bfloat16");
  TORCH_CHECK(a.sizes() == b.sizes(), "silu_mul: a and b must have the same shape");
  TORCH_CHECK(a.is_contiguous() && b.is_contiguous(), "silu_mul: a and b must be contiguous");
  const c10::cuda::CUDAGuard guard(a.device());
  auto out = torch::empty_like(a);
  silu_mul_launch(a.data_ptr(), b.data_ptr(), out.data_ptr(), a.numel(), c10::cuda::getCurrentCUDAStream());
  cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "silu_mul: kernel launch failed: ", cudaGetErrorString(err));
  return out;
}

static void bind_silu_mul(pybind11::module_& m) {
  m.def("silu_mul", &silu_mul, "silu(a) * b for bf16 tensors of one shape");
}
REGISTER_BINDING(silu_mul, bind_silu_mul)
