// out[i] = (dot(x[i, :], colsum(W)) + sum(b)) * scale
// with x [batch, in], W [out_f, in] (row-major, as nn.Linear stores it), b [out_f].
//
// Three kernels on one stream:
//   1. colsum_partial: partial[c, k] = sum of W[j, k] over the rows j of chunk c
//      (many chunks so the pass over W fills the GPU);
//   2. colsum_finish: wsum[k] = sum_c partial[c, k]; one extra block reduces b;
//   3. gemv: one warp per row of x.
#include <cuda_runtime.h>
#include <cstdint>

namespace {

constexpr int kRowsPerChunk = 32;
constexpr int kThreads = 256;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// VEC = 4: each thread owns 4 adjacent columns (float4); VEC = 1: one column.
template <int VEC>
__global__ void colsum_partial(const float* __restrict__ w, float* __restrict__ partial,
                               int out_f, int in_f) {
  const int groups = in_f / VEC;
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  const int chunk = blockIdx.y;
  if (g >= groups) return;
  const int r0 = chunk * kRowsPerChunk;
  const int r1 = min(r0 + kRowsPerChunk, out_f);
  if (VEC == 4) {
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    const float4* wv = reinterpret_cast<const float4*>(w);
#pragma unroll 8
    for (int r = r0; r < r1; ++r) {
      float4 v = __ldg(wv + (long long)r * groups + g);
      acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
    }
    reinterpret_cast<float4*>(partial)[(long long)chunk * groups + g] = acc;
  } else {
    float acc = 0.f;
#pragma unroll 8
    for (int r = r0; r < r1; ++r) acc += __ldg(w + (long long)r * in_f + g);
    partial[(long long)chunk * in_f + g] = acc;
  }
}

// Blocks 0 .. gridDim.x-2 sum the chunk partials of kThreads columns each;
// the last block reduces the bias into *bsum.
__global__ void colsum_finish(const float* __restrict__ partial, const float* __restrict__ bias,
                              float* __restrict__ wsum, float* __restrict__ bsum,
                              int chunks, int in_f, int out_f) {
  if (blockIdx.x == gridDim.x - 1) {
    __shared__ float red[kThreads / 32];
    float s = 0.f;
    for (int j = threadIdx.x; j < out_f; j += blockDim.x) s += __ldg(bias + j);
    s = warp_sum(s);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
      float t = threadIdx.x < (blockDim.x >> 5) ? red[threadIdx.x] : 0.f;
      t = warp_sum(t);
      if (threadIdx.x == 0) *bsum = t;
    }
    return;
  }
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= in_f) return;
  float s = 0.f;
  for (int c = 0; c < chunks; ++c) s += partial[(long long)c * in_f + k];
  wsum[k] = s;
}

// One warp per row: out[row] = (dot(x[row], wsum) + bsum) * scale.
template <int VEC>
__global__ void gemv_rows(const float* __restrict__ x, const float* __restrict__ wsum,
                          const float* __restrict__ bsum, float* __restrict__ out,
                          int batch, int in_f, float scale) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= batch) return;
  float acc = 0.f;
  if (VEC == 4) {
    const int groups = in_f / 4;
    const float4* xr = reinterpret_cast<const float4*>(x + (long long)row * in_f);
    const float4* wv = reinterpret_cast<const float4*>(wsum);
#pragma unroll 4
    for (int g = lane; g < groups; g += 32) {
      float4 a = __ldg(xr + g);
      float4 b = __ldg(wv + g);
      acc = fmaf(a.x, b.x, acc);
      acc = fmaf(a.y, b.y, acc);
      acc = fmaf(a.z, b.z, acc);
      acc = fmaf(a.w, b.w, acc);
    }
  } else {
    const float* xr = x + (long long)row * in_f;
    for (int k = lane; k < in_f; k += 32) acc = fmaf(__ldg(xr + k), __ldg(wsum + k), acc);
  }
  acc = warp_sum(acc);
  if (lane == 0) out[row] = (acc + *bsum) * scale;
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

// Floats of scratch the launcher needs: chunk partials, wsum and bsum.
extern "C" long long matmul_sum_scale_workspace_floats(int in_f, int out_f) {
  long long chunks = (out_f + kRowsPerChunk - 1) / kRowsPerChunk;
  return chunks * in_f + in_f + 1;
}

extern "C" void matmul_sum_scale_launch(const float* x, const float* w, const float* bias,
                                        float* out, float* workspace, int batch, int in_f,
                                        int out_f, float scale, cudaStream_t stream) {
  if (batch == 0) return;
  const int chunks = (out_f + kRowsPerChunk - 1) / kRowsPerChunk;
  float* partial = workspace;
  float* wsum = partial + (long long)chunks * in_f;
  float* bsum = wsum + in_f;
  const bool vec = (in_f % 4 == 0) && aligned16(x) && aligned16(w) && aligned16(workspace);

  if (chunks > 0) {
    const int groups = vec ? in_f / 4 : in_f;
    dim3 grid((groups + kThreads - 1) / kThreads, chunks);
    if (vec)
      colsum_partial<4><<<grid, kThreads, 0, stream>>>(w, partial, out_f, in_f);
    else
      colsum_partial<1><<<grid, kThreads, 0, stream>>>(w, partial, out_f, in_f);
  }
  const int finish_blocks = (in_f + kThreads - 1) / kThreads + 1;
  colsum_finish<<<finish_blocks, kThreads, 0, stream>>>(partial, bias, wsum, bsum, chunks, in_f, out_f);

  const int rows_per_block = kThreads / 32;
  const int gemv_blocks = (batch + rows_per_block - 1) / rows_per_block;
  if (vec)
    gemv_rows<4><<<gemv_blocks, kThreads, 0, stream>>>(x, wsum, bsum, out, batch, in_f, scale);
  else
    gemv_rows<1><<<gemv_blocks, kThreads, 0, stream>>>(x, wsum, bsum, out, batch, in_f, scale);
}
