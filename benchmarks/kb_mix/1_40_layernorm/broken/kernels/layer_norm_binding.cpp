#include "binding_registry.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <climits>

extern "C" int layer_norm_chunks(long long D);
extern "C" void layer_norm_launch(const float* x, const float* w, const float* b, float* y, double* partial, float* stats,
                                  long long rows, long long D, double eps, cudaStream_t stream);

static void check_f32(const torch::Tensor& t, const char* what) {
  TORCH_CHECK(t.is_cuda(), "layer_norm: ", what, " must be on the GPU");
  TORCH_CHECK(t.scalar_type() == torch::kFloat32, "layer_norm: ", what, " must be float32");
  TORCH_CHECK(t.is_contiguous(), "layer_norm: ", what, " must be contiguous");
}

// LayerNorm of x over its trailing weight.dim() dims (weight's shape), with weight and bias.
static torch::Tensor layer_norm(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
  check_f32(x, "x");
  check_f32(weight, "weight");
  check_f32(bias, "bias");
  TORCH_CHECK(weight.numel() == bias.numel() && weight.dim() == bias.dim(), "layer_norm: weight and bias differ in shape");
  const int64_t nd = weight.dim();
  TORCH_CHECK(x.dim() >= nd, "layer_norm: x has fewer dims than the normalized shape");
  for (int64_t d = 0; d < nd; ++d)
    TORCH_CHECK(x.size(x.dim() - nd + d) == weight.size(d), "layer_norm: x's trailing dims differ from the normalized shape");
  const int64_t D = weight.numel();
  TORCH_CHECK(D > 0, "layer_norm: empty normalized shape");
  const int64_t rows = x.numel() / D;
  TORCH_CHECK(rows <= 2147483647LL, "layer_norm: too many rows");
  const c10::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty_like(x);
  auto partial = torch::empty({rows * layer_norm_chunks(D) * 2}, x.options().dtype(torch::kFloat64));
  auto stats = torch::empty({rows * 2}, x.options());
  layer_norm_launch(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(),
                    partial.data_ptr<double>(), stats.data_ptr<float>(), rows, D, eps, c10::cuda::getCurrentCUDAStream());
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "layer_norm: kernel launch failed: ", cudaGetErrorString(err));
  return y;
}

static void bind_layer_norm(pybind11::module_& m) { m.def("layer_norm", &layer_norm, "LayerNorm over the trailing dims of weight's shape"); }
REGISTER_BINDING(layer_norm, bind_layer_norm)
