// Mean cross-entropy of logits [B, C] against class indices [B] (int64):
//   loss_r = logsumexp(logits[r, :]) - logits[r, target[r]], out = mean_r loss_r.
// One block per row for the loss, then one block sums the B losses in double.
// A target outside [0, C) makes that row's loss NaN, so the output is visibly
// wrong rather than read out of bounds (torch raises there).
#include <cuda_runtime.h>
#include <math.h>
#include <cstdint>

namespace {

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

__device__ __forceinline__ double warp_sum_d(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block in double; every thread gets the result (see block_reduce).
__device__ double block_sum_d(double v, double* smem) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  v = warp_sum_d(v);
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  if (warp == 0) {
    double r = lane < nwarps ? smem[lane] : 0.0;
    r = warp_sum_d(r);
    if (lane == 0) smem[0] = r;
  }
  __syncthreads();
  const double r = smem[0];
  __syncthreads();
  return r;
}

__global__ void row_losses(const float* __restrict__ logits, const int64_t* __restrict__ target,
                           float* __restrict__ loss, int cols) {
  __shared__ float smem[32];
  const float* row = logits + (long long)blockIdx.x * cols;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
  m = block_reduce<true>(m, smem);
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(row[c] - m);
  s = block_reduce<false>(s, smem);
  if (threadIdx.x == 0) {
    const int64_t t = target[blockIdx.x];
    loss[blockIdx.x] = (t < 0 || t >= cols) ? NAN : (m + logf(s)) - row[t];
  }
}

__global__ void mean_of(const float* __restrict__ loss, float* __restrict__ out, long long n) {
  __shared__ double smem[32];
  double s = 0.0;
  for (long long i = threadIdx.x; i < n; i += blockDim.x) s += loss[i];
  s = block_sum_d(s, smem);
  if (threadIdx.x == 0) out[0] = (float)(s / (double)n);
}

}  // namespace

// logits [B, C] fp32, target [B] int64, loss: scratch [B], out: one float.
extern "C" void cross_entropy_launch(const float* logits, const int64_t* target, float* loss, float* out, long long B, int C,
                                     cudaStream_t stream) {
  row_losses<<<(unsigned)B, 256, 0, stream>>>(logits, target, loss, C);
  mean_of<<<1, 1024, 0, stream>>>(loss, out, B);
}
