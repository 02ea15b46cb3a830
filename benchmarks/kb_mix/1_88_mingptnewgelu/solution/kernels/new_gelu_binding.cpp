#include "binding_registry.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <climits>

extern "C" void new_gelu_launch(const float* x, float* y, long long n, cudaStream_t stream);

static void check_f32(const torch::Tensor& t, const char* what) {
  TORCH_CHECK(t.is_cuda(), "new_gelu: ", what, " must be on the GPU");
  TORCH_CHECK(t.scalar_type() == torch::kFloat32, "new_gelu: ", what, " must be float32");
  TORCH_CHECK(t.is_contiguous(), "new_gelu: ", what, " must be contiguous");
}

static torch::Tensor new_gelu(torch::Tensor x) {
  check_f32(x, "x");
  const c10::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty_like(x);
  new_gelu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), c10::cuda::getCurrentCUDAStream());
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "new_gelu: kernel launch failed: ", cudaGetErrorString(err));
  return y;
}

static void bind_new_gelu(pybind11::module_& m) { m.def("new_gelu", &new_gelu, "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))"); }
REGISTER_BINDING(new_gelu, bind_new_gelu)
