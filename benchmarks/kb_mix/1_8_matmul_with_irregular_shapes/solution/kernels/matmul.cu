// C = A @ B for fp32 matrices of any (odd) sizes: one cuBLAS sgemm, default math (no TF32);
// cuBLAS handles sizes that are not multiples of its tiles.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>

namespace {

// One cuBLAS handle per device for the life of the process: creating one costs
// milliseconds and allocates device memory, so it is not done per call.
// CUBLAS_DEFAULT_MATH: plain fp32 arithmetic, no TF32 (the task is fp32).
cublasHandle_t sgemm_handle(int* status) {
  static cublasHandle_t handles[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    *status = -1;
    return nullptr;
  }
  if (handles[dev] == nullptr) {
    const cublasStatus_t st = cublasCreate(&handles[dev]);
    if (st != CUBLAS_STATUS_SUCCESS) {
      handles[dev] = nullptr;
      *status = (int)st;
      return nullptr;
    }
    cublasSetMathMode(handles[dev], CUBLAS_DEFAULT_MATH);
  }
  *status = 0;
  return handles[dev];
}

// c[M, N] = a[M, K] @ b[K, N], all row-major. cuBLAS is column-major, and a
// row-major [R, C] buffer is the column-major [C, R] matrix, so
// c^T (N x M, ld N) = (b as N x K, ld N) * (a as K x M, ld K): no transposes.
int matmul_sgemm(const float* a, const float* b, float* c, int M, int N, int K, cudaStream_t stream) {
  int status = 0;
  cublasHandle_t h = sgemm_handle(&status);
  if (h == nullptr) return status;
  const cublasStatus_t st = cublasSetStream(h, stream);
  if (st != CUBLAS_STATUS_SUCCESS) return (int)st;
  const float alpha = 1.0f, beta = 0.0f;
  return (int)cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, b, N, a, K, &beta, c, N);
}

}  // namespace

// A [M, K], B [K, N], C [M, N]; fp32, contiguous, on the current device.
// Returns 0, or a cuBLAS status (-1: no CUDA device).
extern "C" int matmul_launch(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream) {
  if (M == 0 || N == 0) return 0;
  const int st = matmul_sgemm(A, B, C, M, N, K, stream);
  if (st != 0) return st;
  return 0;
}
