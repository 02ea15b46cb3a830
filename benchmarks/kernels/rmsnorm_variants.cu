// RMSNorm design sweep: y = x * rsqrt(mean(x^2) + eps) * w, fp32, row-major.
// Each variant holds a whole row in registers (one HBM read, one write); they
// differ in block size, load/store cache hints, and whether a block stays
// resident and prefetches its next row while reducing the current one
// (persistent). Built with nvcc into a plain shared library (no torch), driven
// by benchmarks/rmsnorm_variants.py through ctypes on the caller's stream.
#include <cuda_runtime.h>
#include <cstdint>

namespace {

template <int LD>
__device__ __forceinline__ float4 load4(const float4* p) {
  if constexpr (LD == 0) return __ldg(p);
  else if constexpr (LD == 1) return __ldcs(p);
  else {
    float4 r;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0,%1,%2,%3}, [%4];"
        : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w) : "l"(p));
    return r;
  }
}

template <int ST>
__device__ __forceinline__ void store4(float4* p, float4 v) {
  if constexpr (ST == 0) *p = v;
  else __stcs(p, v);
}

template <int T>
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  constexpr int W = T / 32;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = (threadIdx.x & 31) < W ? scratch[threadIdx.x & 31] : 0.f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) r += __shfl_xor_sync(0xffffffffu, r, o);
  return r;
}

// One row per block; nvec == T * NV exactly (the sweep only runs such shapes).
template <int T, int NV, int LD, int ST>
__global__ void __launch_bounds__(T) per_row(const float* __restrict__ x, const float* __restrict__ w,
                                             float* __restrict__ y, int cols, float eps) {
  __shared__ float scratch[T / 32];
  const long long base = (long long)blockIdx.x * (cols >> 2);
  const float4* src = reinterpret_cast<const float4*>(x) + base;
  float4* dst = reinterpret_cast<float4*>(y) + base;
  const float4* wv = reinterpret_cast<const float4*>(w);
  float4 v[NV];
  float ss = 0.f;
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    v[j] = load4<LD>(src + threadIdx.x + j * T);
    ss = fmaf(v[j].x, v[j].x, fmaf(v[j].y, v[j].y, fmaf(v[j].z, v[j].z, fmaf(v[j].w, v[j].w, ss))));
  }
  ss = block_sum<T>(ss, scratch);
  const float r = rsqrtf(ss / (float)cols + eps);
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    const float4 g = __ldg(wv + threadIdx.x + j * T);
    store4<ST>(dst + threadIdx.x + j * T,
               make_float4(v[j].x * r * g.x, v[j].y * r * g.y, v[j].z * r * g.z, v[j].w * r * g.w));
  }
}

// Persistent: grid of resident blocks, each walks rows r, r + grid, ... and
// issues the next row's loads before reducing and storing the current one.
template <int T, int NV, int LD, int ST>
__global__ void __launch_bounds__(T) persistent(const float* __restrict__ x, const float* __restrict__ w,
                                                float* __restrict__ y, long long rows, int cols, float eps) {
  __shared__ float scratch[2][T / 32];
  const int nvec = cols >> 2;
  const float4* wv = reinterpret_cast<const float4*>(w);
  float4 cur[NV], nxt[NV];
  long long row = blockIdx.x;
  if (row >= rows) return;
  {
    const float4* src = reinterpret_cast<const float4*>(x) + row * nvec;
#pragma unroll
    for (int j = 0; j < NV; ++j) cur[j] = load4<LD>(src + threadIdx.x + j * T);
  }
  int parity = 0;
  for (; row < rows; row += gridDim.x) {
    const long long next = row + gridDim.x;
    if (next < rows) {
      const float4* src = reinterpret_cast<const float4*>(x) + next * nvec;
#pragma unroll
      for (int j = 0; j < NV; ++j) nxt[j] = load4<LD>(src + threadIdx.x + j * T);
    }
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < NV; ++j)
      ss = fmaf(cur[j].x, cur[j].x, fmaf(cur[j].y, cur[j].y, fmaf(cur[j].z, cur[j].z, fmaf(cur[j].w, cur[j].w, ss))));
    ss = block_sum<T>(ss, scratch[parity]);
    parity ^= 1;
    const float r = rsqrtf(ss / (float)cols + eps);
    float4* dst = reinterpret_cast<float4*>(y) + row * nvec;
#pragma unroll
    for (int j = 0; j < NV; ++j) {
      const float4 g = __ldg(wv + threadIdx.x + j * T);
      store4<ST>(dst + threadIdx.x + j * T,
                 make_float4(cur[j].x * r * g.x, cur[j].y * r * g.y, cur[j].z * r * g.z, cur[j].w * r * g.w));
      cur[j] = nxt[j];
    }
  }
}

template <int T, int NV, int LD, int ST, bool P>
int launch(const float* x, const float* w, float* y, long long rows, int cols, float eps, cudaStream_t s,
           int blocks_per_sm) {
  if (cols != 4 * T * NV) return 1;
  if constexpr (!P) {
    per_row<T, NV, LD, ST><<<(unsigned)rows, T, 0, s>>>(x, w, y, cols, eps);
  } else {
    int dev = 0, sms = 0, occ = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, persistent<T, NV, LD, ST>, T, 0);
    if (blocks_per_sm > 0 && blocks_per_sm < occ) occ = blocks_per_sm;
    long long grid = (long long)sms * (occ > 0 ? occ : 1);
    if (grid > rows) grid = rows;
    persistent<T, NV, LD, ST><<<(unsigned)grid, T, 0, s>>>(x, w, y, rows, cols, eps);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}

}  // namespace

// Variant table: index -> (threads, loads, stores, persistent). NV follows from cols.
#define FOR_T(T, NV)                                                  \
  V(T, NV, 0, 0, false) V(T, NV, 1, 1, false) V(T, NV, 2, 0, false) \
  V(T, NV, 0, 1, false) V(T, NV, 0, 0, true) V(T, NV, 1, 1, true)   \
  V(T, NV, 2, 0, true) V(T, NV, 0, 1, true)

extern "C" int variant_count() {
  int n = 0;
#define V(T, NV, LD, ST, P) ++n;
  FOR_T(256, 8) FOR_T(512, 4) FOR_T(1024, 2)
#undef V
  return n;
}

extern "C" int variant_desc(int i, int* threads, int* ld, int* st, int* persist) {
  int n = 0;
#define V(T, NV, LD, ST, P) \
  if (n++ == i) { *threads = T; *ld = LD; *st = ST; *persist = P; return 0; }
  FOR_T(256, 8) FOR_T(512, 4) FOR_T(1024, 2)
#undef V
  return 1;
}

// Runs variant i for cols == 8192 (the sweep's width).
extern "C" int variant_run(int i, const float* x, const float* w, float* y, long long rows, int cols, float eps,
                           void* stream, int blocks_per_sm) {
  int n = 0;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
#define V(T, NV, LD, ST, P) \
  if (n++ == i) return launch<T, NV, LD, ST, P>(x, w, y, rows, cols, eps, s, blocks_per_sm);
  FOR_T(256, 8) FOR_T(512, 4) FOR_T(1024, 2)
#undef V
  return 3;
}
