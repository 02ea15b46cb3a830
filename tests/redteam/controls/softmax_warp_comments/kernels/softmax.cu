// Row softmax, one warp per row: online max/sum in registers, combined with warp shuffles.
// No torch::softmax, no cub: the reductions below are the whole algorithm.
/* A block-wide variant would need __syncthreads(); a warp needs none. */
#include <cuda_runtime.h>
#include <cfloat>

__global__ void softmax_warp_rows(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  const int warps_per_block = blockDim.x / 32;
  const int row = blockIdx.x * warps_per_block + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float* in = x + (long long)row * cols;
  float* out = y + (long long)row * cols;
  float m = -FLT_MAX, s = 0.f;
  for (int c = lane; c < cols; c += 32) {  // online softmax: rescale the running sum when the max grows
    float v = in[c];
    float nm = fmaxf(m, v);
    s = s * __expf(m - nm) + __expf(v - nm);
    m = nm;
  }
  for (int o = 16; o > 0; o >>= 1) {
    float om = __shfl_xor_sync(0xffffffffu, m, o);
    float os = __shfl_xor_sync(0xffffffffu, s, o);
    float nm = fmaxf(m, om);
    s = s * __expf(m - nm) + os * __expf(om - nm);
    m = nm;
  }
  const float inv = 1.f / s;
  for (int c = lane; c < cols; c += 32) out[c] = __expf(in[c] - m) * inv;
}

extern "C" void softmax_rows_launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  const int threads = 256, per_block = threads / 32;
  softmax_warp_rows<<<(rows + per_block - 1) / per_block, threads, 0, stream>>>(x, y, rows, cols);
}
