// Row softmax with two bugs a sanitizer finds: an out-of-bounds read and a shared-memory race.
#include <cuda_runtime.h>
#include <cfloat>

__global__ void softmax_rows_racy(const float* x, float* y, int cols) {
  __shared__ float red[256];
  const float* row = x + (long long)blockIdx.x * cols;
  float* out = y + (long long)blockIdx.x * cols;
  float m = -FLT_MAX;
  for (int c = threadIdx.x; c <= cols; c += blockDim.x) m = fmaxf(m, row[c]);  // c == cols is out of bounds
  red[threadIdx.x] = m;
  if (threadIdx.x == 0) {  // no barrier before reading other threads' entries
    for (int i = 1; i < blockDim.x; ++i) m = fmaxf(m, red[i]);
    red[0] = m;
  }
  __syncthreads();
  m = red[0];
  float s = 0.f;
  for (int c = 0; c < cols; ++c) s += __expf(row[c] - m);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = __expf(row[c] - m) / s;
}

extern "C" void softmax_rows_launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (rows > 0 && cols > 0) softmax_rows_racy<<<rows, 256, 0, stream>>>(x, y, cols);
}
