// softmax over the last dimension of a contiguous [rows, cols] fp32 tensor.
//
// Fast path (cols % 4 == 0, 16-byte aligned, cols <= 32768): one block of 512
// threads per row; each thread loads NV float4 of the row into registers, the
// block reduces the max, exponentiates in registers, reduces the sum and
// stores. Each element crosses HBM once in each direction.
// General path: one block per row, a pass computing the running (max, sum)
// pair online, merged across the block, then a pass that writes.
#include <cuda_runtime.h>
#include <cstdint>
#include <math_constants.h>

namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Block-wide reductions; `scratch` holds kWarps floats. Every thread gets the result.
__device__ __forceinline__ float block_max(float v, float* scratch) {
  v = warp_max(v);
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = (threadIdx.x & 31) < kWarps ? scratch[threadIdx.x & 31] : -CUDART_INF_F;
  r = warp_max(r);
  __syncthreads();  // scratch may be reused right after
  return r;
}

__device__ __forceinline__ float block_sum(float v, float* scratch) {
  v = warp_sum(v);
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = (threadIdx.x & 31) < kWarps ? scratch[threadIdx.x & 31] : 0.f;
  r = warp_sum(r);
  __syncthreads();
  return r;
}

template <int NV>
__global__ void __launch_bounds__(kThreads) softmax_rows_regs(const float* __restrict__ in,
                                                              float* __restrict__ out, int cols) {
  __shared__ float scratch[kWarps];
  const int nvec = cols >> 2;
  const long long base = (long long)blockIdx.x * nvec;
  const float4* src = reinterpret_cast<const float4*>(in) + base;
  float4* dst = reinterpret_cast<float4*>(out) + base;

  float4 v[NV];
  float m = -CUDART_INF_F;
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    const int idx = threadIdx.x + j * kThreads;
    if (idx < nvec) {
      v[j] = __ldcs(src + idx);  // read once: stream past L2
    } else {
      v[j] = make_float4(-CUDART_INF_F, -CUDART_INF_F, -CUDART_INF_F, -CUDART_INF_F);
    }
    m = fmaxf(m, fmaxf(fmaxf(v[j].x, v[j].y), fmaxf(v[j].z, v[j].w)));
  }
  m = block_max(m, scratch);

  float s = 0.f;
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    if (threadIdx.x + j * kThreads < nvec) {
      v[j].x = __expf(v[j].x - m);
      v[j].y = __expf(v[j].y - m);
      v[j].z = __expf(v[j].z - m);
      v[j].w = __expf(v[j].w - m);
      s += (v[j].x + v[j].y) + (v[j].z + v[j].w);
    }
  }
  s = block_sum(s, scratch);
  const float inv = 1.0f / s;

#pragma unroll
  for (int j = 0; j < NV; ++j) {
    const int idx = threadIdx.x + j * kThreads;
    if (idx < nvec) {
      float4 o = make_float4(v[j].x * inv, v[j].y * inv, v[j].z * inv, v[j].w * inv);
      __stcs(dst + idx, o);
    }
  }
}

// Online (max, sum) merge: sum is relative to max.
__device__ __forceinline__ void online_merge(float& m, float& s, float m2, float s2) {
  const float mn = fmaxf(m, m2);
  if (mn == -CUDART_INF_F) return;  // both empty
  s = s * __expf(m - mn) + s2 * __expf(m2 - mn);
  m = mn;
}

__global__ void __launch_bounds__(kThreads) softmax_rows_online(const float* __restrict__ in,
                                                                float* __restrict__ out, int cols) {
  __shared__ float sm_m[kWarps], sm_s[kWarps];
  const float* src = in + (long long)blockIdx.x * cols;
  float* dst = out + (long long)blockIdx.x * cols;

  float m = -CUDART_INF_F, s = 0.f;
  for (int i = threadIdx.x; i < cols; i += kThreads) {
    const float x = __ldg(src + i);
    if (x > m) {
      s = s * __expf(m - x) + 1.0f;
      m = x;
    } else if (x > -CUDART_INF_F) {  // skip -inf entries (avoids -inf - -inf)
      s += __expf(x - m);
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
    online_merge(m, s, m2, s2);
  }
  if ((threadIdx.x & 31) == 0) {
    sm_m[threadIdx.x >> 5] = m;
    sm_s[threadIdx.x >> 5] = s;
  }
  __syncthreads();
  const int lane = threadIdx.x & 31;
  m = lane < kWarps ? sm_m[lane] : -CUDART_INF_F;
  s = lane < kWarps ? sm_s[lane] : 0.f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
    online_merge(m, s, m2, s2);
  }
  const float inv = 1.0f / s;
  for (int i = threadIdx.x; i < cols; i += kThreads) dst[i] = __expf(__ldg(src + i) - m) * inv;
}

}  // namespace

extern "C" void row_softmax_launch(const float* in, float* out, long long rows, int cols,
                                   cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const bool aligned = ((reinterpret_cast<uintptr_t>(in) | reinterpret_cast<uintptr_t>(out)) & 15u) == 0;
  const int per_block = kThreads * 4;  // floats covered by one float4 per thread
  const dim3 grid((unsigned)rows);
  if (aligned && cols % 4 == 0 && cols <= 8 * per_block) {
    if (cols <= per_block)
      softmax_rows_regs<1><<<grid, kThreads, 0, stream>>>(in, out, cols);
    else if (cols <= 2 * per_block)
      softmax_rows_regs<2><<<grid, kThreads, 0, stream>>>(in, out, cols);
    else if (cols <= 4 * per_block)
      softmax_rows_regs<4><<<grid, kThreads, 0, stream>>>(in, out, cols);
    else
      softmax_rows_regs<8><<<grid, kThreads, 0, stream>>>(in, out, cols);
  } else if (aligned && cols % 4 == 0 && cols <= 16 * per_block) {
    softmax_rows_regs<16><<<grid, kThreads, 0, stream>>>(in, out, cols);
  } else {
    softmax_rows_online<<<grid, kThreads, 0, stream>>>(in, out, cols);
  }
}
