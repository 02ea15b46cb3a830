#include "binding_registry.h"
#include <ATen/cuda/CUDAContext.h>

extern "C" void cmul_launch(const void* a, const void* b, void* y, long long n, cudaStream_t stream);

static torch::Tensor cmul_forward(torch::Tensor a, torch::Tensor b) {
  TORCH_CHECK(a.is_cuda() && a.scalar_type() == torch::kComplexFloat, "cmul_forward: expected complex64 CUDA tensors");
  TORCH_CHECK(b.scalar_type() == torch::kComplexFloat && a.sizes() == b.sizes(), "cmul_forward: b must match a");
  TORCH_CHECK(a.is_contiguous() && b.is_contiguous(), "cmul_forward: expected contiguous tensors");
  auto y = torch::empty_like(a);
  cmul_launch(a.data_ptr(), b.data_ptr(), y.data_ptr(), a.numel(), at::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

static void bind_cmul(pybind11::module_& m) { m.def("cmul_forward", &cmul_forward); }
REGISTER_BINDING(cmul, bind_cmul)
