// y = max(x, 0) with a grid-stride loop.
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float v = x[i];
    y[i] = v > 0.f ? v : 0.f;
  }
}

extern "C" void relu_launch(const float* x, float* y, long long n, cudaStream_t stream) {
  if (n == 0) return;
  const int threads = 256;
  long long blocks = (n + threads - 1) / threads;
  if (blocks > 4096) blocks = 4096;
  relu_kernel<<<(unsigned)blocks, threads, 0, stream>>>(x, y, n);
}
