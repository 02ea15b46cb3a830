#include "binding_registry.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <cstddef>

extern "C" size_t linear_bias_relu_workspace_bytes();
extern "C" int linear_bias_relu_launch(const float* x, const float* w, const float* bias, float* y,
                                       void* workspace, size_t workspace_bytes, int M, int N, int K,
                                       cudaStream_t stream, char* err, int err_len);

static void check_f32_cuda(const torch::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda(), "linear_bias_relu: ", name, " must be on the GPU");
  TORCH_CHECK(t.scalar_type() == torch::kFloat32, "linear_bias_relu: ", name, " must be float32");
  TORCH_CHECK(t.is_contiguous(), "linear_bias_relu: ", name, " must be contiguous");
}

// relu(x @ weight.T + bias): x [M, K], weight [N, K], bias [N] -> [M, N]
static torch::Tensor linear_bias_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
  check_f32_cuda(x, "x");
  check_f32_cuda(weight, "weight");
  check_f32_cuda(bias, "bias");
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && bias.dim() == 1,
              "linear_bias_relu: expected x [M, K], weight [N, K], bias [N]");
  TORCH_CHECK(x.size(1) == weight.size(1), "linear_bias_relu: x has ", x.size(1),
              " features, weight expects ", weight.size(1));
  TORCH_CHECK(bias.size(0) == weight.size(0), "linear_bias_relu: bias/weight size mismatch");
  TORCH_CHECK(x.device() == weight.device() && x.device() == bias.device(),
              "linear_bias_relu: tensors on different devices");
  TORCH_CHECK(x.size(0) < (1LL << 31) && x.size(1) < (1LL << 31) && weight.size(0) < (1LL << 31),
              "linear_bias_relu: sizes must fit in int32");
  TORCH_CHECK(x.size(1) > 0, "linear_bias_relu: empty reduction dimension");

  const c10::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty({x.size(0), weight.size(0)}, x.options());
  const size_t ws_bytes = linear_bias_relu_workspace_bytes();
  auto ws = torch::empty({(int64_t)ws_bytes}, x.options().dtype(torch::kUInt8));
  char err[512];
  int rc = linear_bias_relu_launch(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(),
                                   y.data_ptr<float>(), ws.data_ptr(), ws_bytes, (int)x.size(0),
                                   (int)weight.size(0), (int)x.size(1),
                                   c10::cuda::getCurrentCUDAStream(), err, (int)sizeof(err));
  TORCH_CHECK(rc == 0, "linear_bias_relu: cuBLASLt error: ", err);
  cudaError_t ce = cudaGetLastError();
  TORCH_CHECK(ce == cudaSuccess, "linear_bias_relu: launch failed: ", cudaGetErrorString(ce));
  return y;
}

static void bind_linear_bias_relu(pybind11::module_& m) {
  m.def("linear_bias_relu", &linear_bias_relu,
        "relu(x @ weight.T + bias) as one cuBLASLt fp32 GEMM with a bias+ReLU epilogue");
}
REGISTER_BINDING(linear_bias_relu, bind_linear_bias_relu)
