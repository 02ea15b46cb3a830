#include "binding_registry.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <climits>

extern "C" int linear_gelu_softmax_launch(const float* x, const float* w, const float* bias, float* y, int M, int N, int K,
                                          cudaStream_t stream);

static void check_f32(const torch::Tensor& t, const char* what) {
  TORCH_CHECK(t.is_cuda(), "linear_gelu_softmax: ", what, " must be on the GPU");
  TORCH_CHECK(t.scalar_type() == torch::kFloat32, "linear_gelu_softmax: ", what, " must be float32");
  TORCH_CHECK(t.is_contiguous(), "linear_gelu_softmax: ", what, " must be contiguous");
}

// x [M, K], weight [N, K], bias [N] -> [M, N]
static torch::Tensor linear_gelu_softmax(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
  check_f32(x, "x");
  check_f32(weight, "weight");
  check_f32(bias, "bias");
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && bias.dim() == 1, "linear_gelu_softmax: expected x [M, K], weight [N, K], bias [N]");
  TORCH_CHECK(x.size(1) == weight.size(1), "linear_gelu_softmax: x has ", x.size(1), " features, weight expects ", weight.size(1));
  TORCH_CHECK(bias.size(0) == weight.size(0), "linear_gelu_softmax: bias and weight disagree on out_features");
  TORCH_CHECK(x.size(1) > 0, "linear_gelu_softmax: empty reduction dimension");
  TORCH_CHECK(x.size(0) <= INT_MAX && x.size(1) <= INT_MAX && weight.size(0) <= INT_MAX, "linear_gelu_softmax: sizes must fit in int");
  const c10::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty({x.size(0), weight.size(0)}, x.options());
  const int rc = linear_gelu_softmax_launch(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(),
                                            (int)x.size(0), (int)weight.size(0), (int)x.size(1), c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(rc == 0, "linear_gelu_softmax: cuBLAS/CUDA error ", rc);
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "linear_gelu_softmax: kernel launch failed: ", cudaGetErrorString(err));
  return y;
}

static void bind_linear_gelu_softmax(pybind11::module_& m) { m.def("linear_gelu_softmax", &linear_gelu_softmax, "softmax(gelu(x @ W^T + b), dim=1)"); }
REGISTER_BINDING(linear_gelu_softmax, bind_linear_gelu_softmax)
