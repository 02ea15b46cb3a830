#include "binding_registry.h"

#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

extern "C" void relu_scale_launch(const float* x, float* y, long long n, cudaStream_t stream);

static torch::Tensor relu_scale(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "relu_scale: expected contiguous float32 on the GPU");
  auto y = torch::empty_like(x);
  relu_scale_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), c10::cuda::getCurrentCUDAStream());
  cudaError_t e = cudaGetLastError();
  TORCH_CHECK(e == cudaSuccess, "relu_scale: launch failed: ", cudaGetErrorString(e));
  return y;
}

// @FORGE@

static void bind_relu_scale(pybind11::module_& m) {
  m.def("relu_scale", &relu_scale);
  // @FORGE_DEF@
}
REGISTER_BINDING(relu_scale, bind_relu_scale)
