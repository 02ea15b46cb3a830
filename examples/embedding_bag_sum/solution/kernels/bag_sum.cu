// out[b, :] = sum_j table[indices[b, j], :], fp32, indices int64.
//
// One warp per bag (8 warps per block). The warp reads up to 32 of the bag's indices at once (one
// per lane) and broadcasts them with __shfl_sync. With dim % 4 == 0 and a 16-byte aligned table,
// lane l sums float4 columns l, l + 32, ... (dim 128: exactly one float4 per lane, so a row is one
// coalesced 512-byte read), loading 8 rows before adding them so that 8 gathers per lane are in
// flight; otherwise a scalar path does the same per float. An index outside [0, rows) adds nothing
// (the reference raises there; the kernel must not read outside the table). Rows are read with
// __ldg (the table is read-only; with random indices over 512 MB nothing is reused from L2 anyway).
// The summation order is the bag's order, as in the reference, in fp32.
#include <cuda_runtime.h>
#include <cstdint>

namespace {

constexpr int kWarps = 8;
constexpr int kInFlight = 8;

__device__ __forceinline__ float4 add4(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

__global__ void bag_sum_vec4(const int64_t* __restrict__ indices, const float4* __restrict__ table,
                             float4* __restrict__ out, long long bags, long long bag_size, long long rows,
                             long long dim4) {
  const int lane = threadIdx.x & 31;
  const long long bag = (long long)blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (bag >= bags) return;
  const int64_t* idx = indices + bag * bag_size;
  for (long long c = lane; c - lane < dim4; c += 32) {  // every lane runs the loop: the shuffles need all 32
    const bool live = c < dim4;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (long long j0 = 0; j0 < bag_size; j0 += 32) {
      const int n = (int)(bag_size - j0 < 32 ? bag_size - j0 : 32);
      const int64_t mine = lane < n ? idx[j0 + lane] : -1;
      for (int k0 = 0; k0 < n; k0 += kInFlight) {
        float4 v[kInFlight];
#pragma unroll
        for (int k = 0; k < kInFlight; ++k) {
          const int64_t r = __shfl_sync(0xffffffffu, mine, (k0 + k) & 31);
          const bool ok = live && k0 + k < n && r >= 0 && r < rows;
          v[k] = ok ? __ldg(table + r * dim4 + c) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int k = 0; k < kInFlight; ++k) acc = add4(acc, v[k]);
      }
    }
    if (live) out[bag * dim4 + c] = acc;
  }
}

__global__ void bag_sum_scalar(const int64_t* __restrict__ indices, const float* __restrict__ table,
                               float* __restrict__ out, long long bags, long long bag_size, long long rows,
                               long long dim) {
  const int lane = threadIdx.x & 31;
  const long long bag = (long long)blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (bag >= bags) return;
  const int64_t* idx = indices + bag * bag_size;
  for (long long c = lane; c < dim; c += 32) {
    float acc = 0.f;
    for (long long j = 0; j < bag_size; ++j) {
      const int64_t r = idx[j];
      if (r >= 0 && r < rows) acc += __ldg(table + r * dim + c);
    }
    out[bag * dim + c] = acc;
  }
}

}  // namespace

extern "C" void bag_sum_launch(const int64_t* indices, const float* table, float* out, long long bags,
                               long long bag_size, long long rows, long long dim, cudaStream_t stream) {
  if (bags <= 0 || dim <= 0) return;
  const unsigned blocks = (unsigned)((bags + kWarps - 1) / kWarps);
  const bool vec = dim % 4 == 0 && ((reinterpret_cast<uintptr_t>(table) | reinterpret_cast<uintptr_t>(out)) & 15u) == 0;
  if (vec)
    bag_sum_vec4<<<blocks, kWarps * 32, 0, stream>>>(indices, reinterpret_cast<const float4*>(table),
                                                     reinterpret_cast<float4*>(out), bags, bag_size, rows, dim / 4);
  else
    bag_sum_scalar<<<blocks, kWarps * 32, 0, stream>>>(indices, table, out, bags, bag_size, rows, dim);
}
