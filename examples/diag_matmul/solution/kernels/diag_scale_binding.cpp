#include "binding_registry.h"

#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>

extern "C" void diag_scale_rows_launch(const float* a, const float* b, float* out,
                                       long long rows, long long cols, cudaStream_t stream);

static torch::Tensor diag_scale_rows(torch::Tensor a, torch::Tensor B) {
  TORCH_CHECK(a.is_cuda() && B.is_cuda(), "diag_scale_rows: tensors must be on the GPU");
  TORCH_CHECK(a.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32,
              "diag_scale_rows: expected float32 tensors");
  TORCH_CHECK(a.dim() == 1 && B.dim() == 2, "diag_scale_rows: expected a [N] and B [N, M]");
  TORCH_CHECK(a.size(0) == B.size(0), "diag_scale_rows: a has ", a.size(0), " entries but B has ",
              B.size(0), " rows");
  TORCH_CHECK(a.is_contiguous() && B.is_contiguous(), "diag_scale_rows: tensors must be contiguous");
  TORCH_CHECK(a.device() == B.device(), "diag_scale_rows: tensors on different devices");

  const c10::cuda::CUDAGuard guard(B.device());
  auto out = torch::empty_like(B);
  diag_scale_rows_launch(a.data_ptr<float>(), B.data_ptr<float>(), out.data_ptr<float>(),
                         B.size(0), B.size(1), c10::cuda::getCurrentCUDAStream());
  cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "diag_scale_rows: kernel launch failed: ", cudaGetErrorString(err));
  return out;
}

static void bind_diag_scale(pybind11::module_& m) {
  m.def("diag_scale_rows", &diag_scale_rows, "out[i, j] = a[i] * B[i, j]");
}
REGISTER_BINDING(diag_scale, bind_diag_scale)
