#include "binding_registry.h"
#include <ATen/cuda/CUDAContext.h>

extern "C" void softmax_rows_launch(const float* x, float* y, int rows, int cols, cudaStream_t stream);

static torch::Tensor softmax_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "softmax_forward: expected a float32 CUDA tensor");
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), "softmax_forward: expected a contiguous 2-D tensor");
  auto y = torch::empty_like(x);
  softmax_rows_launch(x.data_ptr<float>(), y.data_ptr<float>(), (int)x.size(0), (int)x.size(1),
                      at::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

static void bind_softmax(pybind11::module_& m) { m.def("softmax_forward", &softmax_forward); }
REGISTER_BINDING(softmax, bind_softmax)
