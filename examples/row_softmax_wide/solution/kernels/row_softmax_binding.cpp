#include "binding_registry.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

extern "C" void row_softmax_launch(const float* in, float* out, long long rows, int cols,
                                   cudaStream_t stream);

// softmax over the last dimension of x (any number of leading dimensions)
static torch::Tensor row_softmax(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "row_softmax: x must be on the GPU");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "row_softmax: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "row_softmax: x must be contiguous");
  TORCH_CHECK(x.dim() >= 1, "row_softmax: x must have at least one dimension");
  const int64_t cols = x.size(-1);
  TORCH_CHECK(cols < (1LL << 31), "row_softmax: last dimension too large");
  const c10::cuda::CUDAGuard guard(x.device());
  auto out = torch::empty_like(x);
  if (x.numel() == 0) return out;
  const int64_t rows = x.numel() / cols;
  TORCH_CHECK(rows < (1LL << 31), "row_softmax: too many rows for one grid");
  row_softmax_launch(x.data_ptr<float>(), out.data_ptr<float>(), rows, (int)cols,
                     c10::cuda::getCurrentCUDAStream());
  cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "row_softmax: kernel launch failed: ", cudaGetErrorString(err));
  return out;
}

static void bind_row_softmax(pybind11::module_& m) {
  m.def("row_softmax", &row_softmax, "softmax over the last dimension");
}
REGISTER_BINDING(row_softmax, bind_row_softmax)
