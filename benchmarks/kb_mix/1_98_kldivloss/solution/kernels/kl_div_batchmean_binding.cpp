#include "binding_registry.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <climits>

extern "C" int kl_div_batchmean_parts(long long n);
extern "C" void kl_div_batchmean_launch(const float* p, const float* t, double* partial, float* out, long long n, long long batch,
                                        cudaStream_t stream);

static void check_f32(const torch::Tensor& t, const char* what) {
  TORCH_CHECK(t.is_cuda(), "kl_div_batchmean: ", what, " must be on the GPU");
  TORCH_CHECK(t.scalar_type() == torch::kFloat32, "kl_div_batchmean: ", what, " must be float32");
  TORCH_CHECK(t.is_contiguous(), "kl_div_batchmean: ", what, " must be contiguous");
}

// kl_div(log(predictions), targets, reduction="batchmean") -> a 0-dim tensor
static torch::Tensor kl_div_batchmean(torch::Tensor predictions, torch::Tensor targets) {
  check_f32(predictions, "predictions");
  check_f32(targets, "targets");
  TORCH_CHECK(predictions.dim() >= 1 && predictions.dim() == targets.dim() && predictions.numel() == targets.numel(),
              "kl_div_batchmean: predictions and targets must have the same shape");
  for (int64_t d = 0; d < predictions.dim(); ++d)
    TORCH_CHECK(predictions.size(d) == targets.size(d), "kl_div_batchmean: predictions and targets must have the same shape");
  TORCH_CHECK(predictions.size(0) > 0, "kl_div_batchmean: empty batch");
  const c10::cuda::CUDAGuard guard(predictions.device());
  const int64_t n = predictions.numel();
  auto partial = torch::empty({(int64_t)kl_div_batchmean_parts(n)}, predictions.options().dtype(torch::kFloat64));
  auto out = torch::empty({}, predictions.options());
  kl_div_batchmean_launch(predictions.data_ptr<float>(), targets.data_ptr<float>(), partial.data_ptr<double>(), out.data_ptr<float>(),
                          n, predictions.size(0), c10::cuda::getCurrentCUDAStream());
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "kl_div_batchmean: kernel launch failed: ", cudaGetErrorString(err));
  return out;
}

static void bind_kl_div_batchmean(pybind11::module_& m) { m.def("kl_div_batchmean", &kl_div_batchmean, "kl_div(log(p), t, reduction='batchmean')"); }
REGISTER_BINDING(kl_div_batchmean, bind_kl_div_batchmean)
