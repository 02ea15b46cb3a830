#include "binding_registry.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <climits>

#include <cstdint>

extern "C" void cross_entropy_launch(const float* logits, const int64_t* target, float* loss, float* out, long long B, int C,
                                     cudaStream_t stream);

static void check_f32(const torch::Tensor& t, const char* what) {
  TORCH_CHECK(t.is_cuda(), "cross_entropy: ", what, " must be on the GPU");
  TORCH_CHECK(t.scalar_type() == torch::kFloat32, "cross_entropy: ", what, " must be float32");
  TORCH_CHECK(t.is_contiguous(), "cross_entropy: ", what, " must be contiguous");
}

// mean cross-entropy of predictions [B, C] against targets [B] -> a 0-dim tensor
static torch::Tensor cross_entropy(torch::Tensor predictions, torch::Tensor targets) {
  check_f32(predictions, "predictions");
  TORCH_CHECK(targets.is_cuda() && targets.scalar_type() == torch::kInt64 && targets.is_contiguous(),
              "cross_entropy: targets must be contiguous int64 on the GPU");
  TORCH_CHECK(predictions.dim() == 2 && targets.dim() == 1 && targets.size(0) == predictions.size(0),
              "cross_entropy: expected predictions [B, C] and targets [B]");
  TORCH_CHECK(predictions.size(0) > 0 && predictions.size(0) <= 2147483647LL, "cross_entropy: bad batch size");
  TORCH_CHECK(predictions.size(1) > 0 && predictions.size(1) <= INT_MAX, "cross_entropy: bad number of classes");
  const c10::cuda::CUDAGuard guard(predictions.device());
  auto loss = torch::empty({predictions.size(0)}, predictions.options());  // per-row losses, scratch
  auto out = torch::empty({}, predictions.options());
  cross_entropy_launch(predictions.data_ptr<float>(), targets.data_ptr<int64_t>(), loss.data_ptr<float>(), out.data_ptr<float>(),
                       predictions.size(0), (int)predictions.size(1), c10::cuda::getCurrentCUDAStream());
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "cross_entropy: kernel launch failed: ", cudaGetErrorString(err));
  return out;
}

static void bind_cross_entropy(pybind11::module_& m) { m.def("cross_entropy", &cross_entropy, "mean cross-entropy of logits against class indices"); }
REGISTER_BINDING(cross_entropy, bind_cross_entropy)
