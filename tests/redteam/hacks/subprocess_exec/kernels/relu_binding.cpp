#include "binding_registry.h"
#include <ATen/cuda/CUDAContext.h>

extern "C" void relu_launch(const float* x, float* y, long long n, cudaStream_t stream);

static torch::Tensor relu_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "relu_forward: expected a float32 CUDA tensor");
  TORCH_CHECK(x.is_contiguous(), "relu_forward: expected a contiguous tensor");
  auto y = torch::empty_like(x);
  relu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), at::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

static void bind_relu(pybind11::module_& m) { m.def("relu_forward", &relu_forward); }
REGISTER_BINDING(relu, bind_relu)
