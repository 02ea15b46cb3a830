#include "binding_registry.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <climits>

extern "C" int linear_lse_mish_launch(const float* x, const float* w, const float* bias, float* y, float* out, int M, int N, int K,
                                      float scale, float lo, float hi, cudaStream_t stream);

static void check_f32(const torch::Tensor& t, const char* what) {
  TORCH_CHECK(t.is_cuda(), "linear_lse_mish: ", what, " must be on the GPU");
  TORCH_CHECK(t.scalar_type() == torch::kFloat32, "linear_lse_mish: ", what, " must be float32");
  TORCH_CHECK(t.is_contiguous(), "linear_lse_mish: ", what, " must be contiguous");
}

// x [M, K], weight [N, K], bias [N] -> [M, 1]
static torch::Tensor linear_lse_mish(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double scale, double lo, double hi) {
  check_f32(x, "x");
  check_f32(weight, "weight");
  check_f32(bias, "bias");
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && bias.dim() == 1, "linear_lse_mish: expected x [M, K], weight [N, K], bias [N]");
  TORCH_CHECK(x.size(1) == weight.size(1), "linear_lse_mish: x has ", x.size(1), " features, weight expects ", weight.size(1));
  TORCH_CHECK(bias.size(0) == weight.size(0), "linear_lse_mish: bias and weight disagree on out_features");
  TORCH_CHECK(x.size(1) > 0, "linear_lse_mish: empty reduction dimension");
  TORCH_CHECK(x.size(0) <= INT_MAX && x.size(1) <= INT_MAX && weight.size(0) <= INT_MAX, "linear_lse_mish: sizes must fit in int");
  TORCH_CHECK(weight.size(0) > 0, "linear_lse_mish: logsumexp over zero features");
  const c10::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty({x.size(0), weight.size(0)}, x.options());  // the GEMM's output, scratch
  auto out = torch::empty({x.size(0), 1}, x.options());
  const int rc = linear_lse_mish_launch(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(),
                                        out.data_ptr<float>(), (int)x.size(0), (int)weight.size(0), (int)x.size(1), (float)scale,
                                        (float)lo, (float)hi, c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(rc == 0, "linear_lse_mish: cuBLAS/CUDA error ", rc);
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "linear_lse_mish: kernel launch failed: ", cudaGetErrorString(err));
  return out;
}

static void bind_linear_lse_mish(pybind11::module_& m) { m.def("linear_lse_mish", &linear_lse_mish, "l * mish(l), l = logsumexp(clamp(2 * scale * (x @ W^T + b)))"); }
REGISTER_BINDING(linear_lse_mish, bind_linear_lse_mish)
