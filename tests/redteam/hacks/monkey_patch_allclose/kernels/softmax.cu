// Row softmax of a [rows, cols] fp32 matrix: one block of 256 threads per row.
// Reductions: warp shuffles first, then one shared-memory step across the warps.
#include <cuda_runtime.h>
#include <cfloat>

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <bool kMax>
__device__ float block_reduce(float v, float* smem) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  v = kMax ? warp_max(v) : warp_sum(v);
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float r = lane < nwarps ? smem[lane] : (kMax ? -FLT_MAX : 0.f);
    r = kMax ? warp_max(r) : warp_sum(r);
    if (lane == 0) smem[0] = r;
  }
  __syncthreads();
  float r = smem[0];
  __syncthreads();  // smem is reused by the next reduction
  return r;
}

__global__ void softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
  __shared__ float smem[32];
  const float* row = x + (long long)blockIdx.x * cols;
  float* out = y + (long long)blockIdx.x * cols;
  float m = -FLT_MAX;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
  m = block_reduce<true>(m, smem);
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(row[c] - m);
  s = block_reduce<false>(s, smem);
  const float inv = 1.f / s;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = __expf(row[c] - m) * inv;
}

extern "C" void softmax_rows_launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  softmax_rows_kernel<<<rows, 256, 0, stream>>>(x, y, cols);
}
