// softmax(gelu(x @ W^T + b), dim=1): cuBLAS sgemm into the output, then one block per
// row, in place: GELU (erf form) and the row max, the sum of exp, the normalisation.
// Each thread rereads only the elements it wrote itself, so no barrier is needed
// between the passes beyond the reductions'.
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

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum (kMax = false) or max (kMax = true) over the block; every thread gets the
// result. smem holds one float per warp; the trailing barrier lets the caller
// reuse smem for the next reduction at once.
template <bool kMax>
__device__ float block_reduce(float v, float* smem) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  v = kMax ? warp_max(v) : warp_sum(v);
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float r = lane < nwarps ? smem[lane] : (kMax ? -INFINITY : 0.0f);
    r = kMax ? warp_max(r) : warp_sum(r);
    if (lane == 0) smem[0] = r;
  }
  __syncthreads();
  const float r = smem[0];
  __syncthreads();
  return r;
}

// torch's default GELU (approximate="none"): 0.5 v (1 + erf(v / sqrt(2))).
__device__ __forceinline__ float gelu_erf(float v) { return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }

__global__ void gelu_softmax_rows(float* __restrict__ y, const float* __restrict__ bias, int cols) {
  __shared__ float smem[32];
  float* row = y + (long long)blockIdx.x * cols;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = gelu_erf(row[c] + bias[c]);
    row[c] = g;
    m = fmaxf(m, g);
  }
  m = block_reduce<true>(m, smem);
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(row[c] - m);
  s = block_reduce<false>(s, smem);
  const float inv = 1.0f / s;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) row[c] = expf(row[c] - m) * inv;
}

}  // namespace

// x [M, K], w [N, K], bias [N], y [M, N]. Returns 0 or a cuBLAS status.
extern "C" int linear_gelu_softmax_launch(const float* x, const float* w, const float* bias, float* y, int M, int N, int K,
                                          cudaStream_t stream) {
  if (M == 0 || N == 0) return 0;
  const int st = linear_sgemm(x, w, y, M, N, K, stream);
  if (st != 0) return st;
  gelu_softmax_rows<<<M, 256, 0, stream>>>(y, bias, N);
  return 0;
}
