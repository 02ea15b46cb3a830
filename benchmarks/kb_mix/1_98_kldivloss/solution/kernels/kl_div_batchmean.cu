// kl_div(log(p), t, reduction="batchmean") = sum over all elements of
// t * (log t - log p), divided by the batch size (p.size(0)); t = 0 contributes 0
// (torch's xlogy). Stage 1: a grid-stride pass, each block's sum in double into
// partial[block]; stage 2: one block adds the partial sums and scales.
#include <cuda_runtime.h>
#include <math.h>

namespace {

// Grid-stride loops: enough blocks to fill every SM several times over, not one
// block per 256 elements of a 100M-element output.
int grid_for(long long n, int threads) {
  const long long want = (n + threads - 1) / threads;
  const long long cap = 132LL * 16;
  return (int)(want < 1 ? 1 : (want > cap ? cap : want));
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

__global__ void kl_partials(const float* __restrict__ p, const float* __restrict__ t, double* __restrict__ partial,
                            long long n) {
  __shared__ double smem[32];
  const long long stride = (long long)gridDim.x * blockDim.x;
  double s = 0.0;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float tv = t[i];
    if (tv > 0.0f) s += (double)(tv * (logf(tv) - logf(p[i])));
  }
  s = block_sum_d(s, smem);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void kl_finish(const double* __restrict__ partial, int parts, float* __restrict__ out, double scale) {
  __shared__ double smem[32];
  double s = 0.0;
  for (int i = threadIdx.x; i < parts; i += blockDim.x) s += partial[i];
  s = block_sum_d(s, smem);
  if (threadIdx.x == 0) out[0] = (float)(s * scale);
}

}  // namespace

// Number of stage-1 blocks (and of doubles the caller allocates for partial) for n elements.
extern "C" int kl_div_batchmean_parts(long long n) { return grid_for(n, 256); }

// p, t: [n] fp32 (any shape, flattened); out: one float; partial: kl_div_batchmean_parts(n) doubles.
extern "C" void kl_div_batchmean_launch(const float* p, const float* t, double* partial, float* out, long long n, long long batch,
                                        cudaStream_t stream) {
  const int parts = kl_div_batchmean_parts(n);
  kl_partials<<<parts, 256, 0, stream>>>(p, t, partial, n);
  kl_finish<<<1, 1024, 0, stream>>>(partial, parts, out, 1.0 / (double)batch);
}
