#include "binding_registry.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <climits>

extern "C" int gemm_sigmoid_gemm_lse_launch(const float* x, const float* w1, const float* b1, const float* w2, const float* b2, float* h,
                                            float* z, float* out, int M, int K, int H, int O, cudaStream_t stream);

static void check_f32(const torch::Tensor& t, const char* what) {
  TORCH_CHECK(t.is_cuda(), "gemm_sigmoid_gemm_lse: ", what, " must be on the GPU");
  TORCH_CHECK(t.scalar_type() == torch::kFloat32, "gemm_sigmoid_gemm_lse: ", what, " must be float32");
  TORCH_CHECK(t.is_contiguous(), "gemm_sigmoid_gemm_lse: ", what, " must be contiguous");
}

// x [M, K], w1 [H, K], b1 [H], w2 [O, H], b2 [O] -> [M]
static torch::Tensor gemm_sigmoid_gemm_lse(torch::Tensor x, torch::Tensor w1, torch::Tensor b1, torch::Tensor w2, torch::Tensor b2) {
  check_f32(x, "x");
  check_f32(w1, "w1");
  check_f32(b1, "b1");
  TORCH_CHECK(x.dim() == 2 && w1.dim() == 2 && b1.dim() == 1, "gemm_sigmoid_gemm_lse: expected x [M, K], w1 [N, K], b1 [N]");
  TORCH_CHECK(x.size(1) == w1.size(1), "gemm_sigmoid_gemm_lse: x has ", x.size(1), " features, w1 expects ", w1.size(1));
  TORCH_CHECK(b1.size(0) == w1.size(0), "gemm_sigmoid_gemm_lse: b1 and w1 disagree on out_features");
  TORCH_CHECK(x.size(1) > 0, "gemm_sigmoid_gemm_lse: empty reduction dimension");
  TORCH_CHECK(x.size(0) <= INT_MAX && x.size(1) <= INT_MAX && w1.size(0) <= INT_MAX, "gemm_sigmoid_gemm_lse: sizes must fit in int");
  check_f32(w2, "w2");
  check_f32(b2, "b2");
  TORCH_CHECK(w2.dim() == 2 && b2.dim() == 1 && w2.size(1) == w1.size(0) && b2.size(0) == w2.size(0),
              "gemm_sigmoid_gemm_lse: expected w2 [O, H] and b2 [O] after w1 [H, K]");
  TORCH_CHECK(w2.size(0) > 0 && w2.size(0) <= INT_MAX, "gemm_sigmoid_gemm_lse: bad output size");
  const c10::cuda::CUDAGuard guard(x.device());
  auto h = torch::empty({x.size(0), w1.size(0)}, x.options());  // hidden activations, scratch
  auto z = torch::empty({x.size(0), w2.size(0)}, x.options());  // second GEMM's output, scratch
  auto out = torch::empty({x.size(0)}, x.options());
  const int rc = gemm_sigmoid_gemm_lse_launch(x.data_ptr<float>(), w1.data_ptr<float>(), b1.data_ptr<float>(), w2.data_ptr<float>(),
                                              b2.data_ptr<float>(), h.data_ptr<float>(), z.data_ptr<float>(), out.data_ptr<float>(),
                                              (int)x.size(0), (int)x.size(1), (int)w1.size(0), (int)w2.size(0),
                                              c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(rc == 0, "gemm_sigmoid_gemm_lse: cuBLAS/CUDA error ", rc);
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "gemm_sigmoid_gemm_lse: kernel launch failed: ", cudaGetErrorString(err));
  return out;
}

static void bind_gemm_sigmoid_gemm_lse(pybind11::module_& m) { m.def("gemm_sigmoid_gemm_lse", &gemm_sigmoid_gemm_lse, "logsumexp(sigmoid(x @ W1^T + b1) @ W2^T + b2, dim=1)"); }
REGISTER_BINDING(gemm_sigmoid_gemm_lse, bind_gemm_sigmoid_gemm_lse)
