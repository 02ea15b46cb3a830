// sigmoid(y) * scaling_factor + y with y = x @ W^T + b: cuBLAS sgemm, then one
// elementwise pass over the output.
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

// y[M, N] = x[M, K] @ w[N, K]^T, all row-major (nn.Linear's layout). cuBLAS is
// column-major, and a row-major [R, C] buffer is the column-major [C, R]
// matrix, so y^T (N x M, ld N) = (w as K x N, ld K)^T * (x as K x M, ld K).
int linear_sgemm(const float* x, const float* w, float* y, int M, int N, int K, cudaStream_t stream) {
  int status = 0;
  cublasHandle_t h = sgemm_handle(&status);
  if (h == nullptr) return status;
  const cublasStatus_t st = cublasSetStream(h, stream);
  if (st != CUBLAS_STATUS_SUCCESS) return (int)st;
  const float alpha = 1.0f, beta = 0.0f;
  return (int)cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, w, K, x, K, &beta, y, N);
}

// Grid-stride loops: enough blocks to fill every SM several times over, not one
// block per 256 elements of a 100M-element output.
int grid_for(long long n, int threads) {
  const long long want = (n + threads - 1) / threads;
  const long long cap = 132LL * 16;
  return (int)(want < 1 ? 1 : (want > cap ? cap : want));
}

__device__ __forceinline__ float sigmoid_f(float v) { return 1.0f / (1.0f + expf(-v)); }

__device__ __forceinline__ float epilogue(float v, float scaling_factor) {
  return sigmoid_f(v) * scaling_factor + v;
}

// In place over y = x @ w^T: y[r, c] = epilogue(y[r, c] + bias[c]).
__global__ void epilogue_kernel(float* __restrict__ y, const float* __restrict__ bias, long long total,
                                int cols, float scaling_factor) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int c = (int)(i % cols);
    y[i] = epilogue(y[i] + bias[c], scaling_factor);
  }
}

}  // namespace

// x [M, K], w [N, K], bias [N], y [M, N]; fp32, contiguous, on the current device.
// Returns 0, or a cuBLAS status (-1: no CUDA device).
extern "C" int linear_sigmoid_scale_residual_launch(const float* x, const float* w, const float* bias, float* y, int M, int N,
                                                    int K, float scaling_factor, cudaStream_t stream) {
  if (M == 0 || N == 0) return 0;
  const int st = linear_sgemm(x, w, y, M, N, K, stream);
  if (st != 0) return st;
  const long long total = (long long)M * N;
  epilogue_kernel<<<grid_for(total, 256), 256, 0, stream>>>(y, bias, total, N, scaling_factor);
  return 0;
}
