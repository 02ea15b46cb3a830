// relu: copy x into y with cuBLAS, then clamp y in place.
#include <cublas_v2.h>
#include <cuda_runtime.h>

__global__ void clamp_inplace(float* y, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && y[i] < 0.f) y[i] = 0.f;
}

extern "C" void relu_launch(const float* x, float* y, long long n, cudaStream_t stream) {
  static cublasHandle_t h = nullptr;
  if (h == nullptr) cublasCreate(&h);
  cublasSetStream(h, stream);
  cublasScopy(h, (int)n, x, 1, y, 1);
  clamp_inplace<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(y, n);
}
