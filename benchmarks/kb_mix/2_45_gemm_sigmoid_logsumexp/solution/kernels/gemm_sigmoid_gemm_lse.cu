// out[r] = logsumexp_c (sigmoid(x @ W1^T + b1) @ W2^T + b2)[r, c]: two cuBLAS sgemms,
// the sigmoid as one elementwise pass over the hidden activations between them, and
// one block per row for the logsumexp.
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

__device__ __forceinline__ float sigmoid_f(float v) { return 1.0f / (1.0f + expf(-v)); }

__global__ void bias_sigmoid(float* __restrict__ h, const float* __restrict__ bias, long long total, int cols) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride)
    h[i] = sigmoid_f(h[i] + bias[i % cols]);
}

__global__ void lse_rows(const float* __restrict__ z, const float* __restrict__ bias, float* __restrict__ out, int cols) {
  __shared__ float smem[32];
  const float* row = z + (long long)blockIdx.x * cols;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c] + bias[c]);
  m = block_reduce<true>(m, smem);
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(row[c] + bias[c] - m);
  s = block_reduce<false>(s, smem);
  if (threadIdx.x == 0) out[blockIdx.x] = m + logf(s);
}

}  // namespace

// x [M, K], w1 [H, K], b1 [H], w2 [O, H], b2 [O]; h: scratch [M, H]; z: scratch [M, O];
// out [M]. Returns 0 or a cuBLAS status.
extern "C" int gemm_sigmoid_gemm_lse_launch(const float* x, const float* w1, const float* b1, const float* w2, const float* b2, float* h,
                                            float* z, float* out, int M, int K, int H, int O, cudaStream_t stream) {
  if (M == 0) return 0;
  int st = linear_sgemm(x, w1, h, M, H, K, stream);
  if (st != 0) return st;
  const long long total = (long long)M * H;
  bias_sigmoid<<<grid_for(total, 256), 256, 0, stream>>>(h, b1, total, H);
  st = linear_sgemm(h, w2, z, M, O, H, stream);
  if (st != 0) return st;
  lse_rows<<<M, 256, 0, stream>>>(z, b2, out, O);
  return 0;
}
