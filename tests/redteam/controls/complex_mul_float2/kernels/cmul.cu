#include <cuda_runtime.h>

// one complex64 product per thread, as float2 (real, imaginary)
__global__ void cmul_kernel(const float2* __restrict__ a, const float2* __restrict__ b, float2* __restrict__ y,
                            long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) {
    float2 p = a[i], q = b[i];
    y[i] = make_float2(p.x * q.x - p.y * q.y, p.x * q.y + p.y * q.x);
  }
}

extern "C" void cmul_launch(const void* a, const void* b, void* y, long long n, cudaStream_t stream) {
  const int threads = 256;
  cmul_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(
      (const float2*)a, (const float2*)b, (float2*)y, n);
}
