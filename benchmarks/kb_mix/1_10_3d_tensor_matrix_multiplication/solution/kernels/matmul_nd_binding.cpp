#include "binding_registry.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <climits>

#include <vector>

extern "C" int matmul_nd_launch(const float* A, const float* B, float* C, int rows, int L, int K, cudaStream_t stream);

static void check_f32(const torch::Tensor& t, const char* what) {
  TORCH_CHECK(t.is_cuda(), "matmul_nd: ", what, " must be on the GPU");
  TORCH_CHECK(t.scalar_type() == torch::kFloat32, "matmul_nd: ", what, " must be float32");
  TORCH_CHECK(t.is_contiguous(), "matmul_nd: ", what, " must be contiguous");
}

// A [..., K] @ B [K, L] -> [..., L]
static torch::Tensor matmul_nd(torch::Tensor A, torch::Tensor B) {
  check_f32(A, "A");
  check_f32(B, "B");
  TORCH_CHECK(A.dim() >= 1 && B.dim() == 2 && A.size(A.dim() - 1) == B.size(0), "matmul_nd: expected A [..., K] and B [K, L]");
  const int64_t K = B.size(0), L = B.size(1);
  TORCH_CHECK(K > 0, "matmul_nd: empty reduction dimension");
  const int64_t rows = A.numel() / K;
  TORCH_CHECK(rows <= INT_MAX && K <= INT_MAX && L <= INT_MAX, "matmul_nd: sizes must fit in int");
  std::vector<int64_t> shape;
  for (int64_t d = 0; d + 1 < A.dim(); ++d) shape.push_back(A.size(d));
  shape.push_back(L);
  const c10::cuda::CUDAGuard guard(A.device());
  auto C = torch::empty(shape, A.options());
  const int rc = matmul_nd_launch(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(), (int)rows, (int)L, (int)K,
                                  c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(rc == 0, "matmul_nd: cuBLAS/CUDA error ", rc);
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "matmul_nd: kernel launch failed: ", cudaGetErrorString(err));
  return C;
}

static void bind_matmul_nd(pybind11::module_& m) { m.def("matmul_nd", &matmul_nd, "A [..., K] @ B [K, L]"); }
REGISTER_BINDING(matmul_nd, bind_matmul_nd)
