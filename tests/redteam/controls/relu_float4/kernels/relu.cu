// y = max(x, 0): 16-byte float4 loads and stores when the pointers are aligned, scalar tail.
#include <cuda_runtime.h>
#include <cstdint>

__device__ __forceinline__ float relu1(float v) { return v > 0.f ? v : 0.f; }

__global__ void relu_vec4(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
    float4 v = x[i];
    v.x = relu1(v.x); v.y = relu1(v.y); v.z = relu1(v.z); v.w = relu1(v.w);
    y[i] = v;
  }
}

__global__ void relu_scalar(const float* __restrict__ x, float* __restrict__ y, long long start, long long n) {
  long long i = start + (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = relu1(x[i]);
}

extern "C" void relu_launch(const float* x, float* y, long long n, cudaStream_t stream) {
  if (n == 0) return;
  const int threads = 256;
  bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15u) == 0;
  long long n4 = aligned ? n / 4 : 0;
  if (n4 > 0) {
    long long blocks = (n4 + threads - 1) / threads;
    if (blocks > 132 * 32) blocks = 132 * 32;
    relu_vec4<<<(unsigned)blocks, threads, 0, stream>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), n4);
  }
  long long rest = n - n4 * 4;
  if (rest > 0) relu_scalar<<<(unsigned)((rest + threads - 1) / threads), threads, 0, stream>>>(x, y, n4 * 4, n);
}
