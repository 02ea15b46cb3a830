#include "binding_registry.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <climits>

extern "C" int matmul_bt_launch(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream);

static void check_f32(const torch::Tensor& t, const char* what) {
  TORCH_CHECK(t.is_cuda(), "matmul_bt: ", what, " must be on the GPU");
  TORCH_CHECK(t.scalar_type() == torch::kFloat32, "matmul_bt: ", what, " must be float32");
  TORCH_CHECK(t.is_contiguous(), "matmul_bt: ", what, " must be contiguous");
}

// A [M, K] @ B[N, K]^T -> [M, N]
static torch::Tensor matmul_bt(torch::Tensor A, torch::Tensor B) {
  check_f32(A, "A");
  check_f32(B, "B");
  TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && A.size(1) == B.size(1), "matmul_bt: expected A [M, K] and B [N, K]");
  TORCH_CHECK(A.size(0) <= INT_MAX && A.size(1) <= INT_MAX && B.size(0) <= INT_MAX, "matmul_bt: sizes must fit in int");
  TORCH_CHECK(A.size(1) > 0, "matmul_bt: empty reduction dimension");
  const c10::cuda::CUDAGuard guard(A.device());
  auto C = torch::empty({A.size(0), B.size(0)}, A.options());
  const int rc = matmul_bt_launch(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(), (int)A.size(0),
                                  (int)B.size(0), (int)A.size(1), c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(rc == 0, "matmul_bt: cuBLAS/CUDA error ", rc);
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "matmul_bt: kernel launch failed: ", cudaGetErrorString(err));
  return C;
}

static void bind_matmul_bt(pybind11::module_& m) { m.def("matmul_bt", &matmul_bt, "A @ B^T"); }
REGISTER_BINDING(matmul_bt, bind_matmul_bt)
