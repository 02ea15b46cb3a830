#include <cuda_runtime.h>
#include <cfloat>
#include <cub/block/block_reduce.cuh>

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

__global__ void softmax_rows_cub(const float* __restrict__ x, float* __restrict__ y, int cols) {
  using Reduce = cub::BlockReduce<float, 256>;
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ float bcast;
  const float* row = x + (long long)blockIdx.x * cols;
  float* out = y + (long long)blockIdx.x * cols;
  float m = -FLT_MAX;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
  m = Reduce(tmp).Reduce(m, MaxOp());
  if (threadIdx.x == 0) bcast = m;
  __syncthreads();
  m = bcast;
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(row[c] - m);
  __syncthreads();
  s = Reduce(tmp).Sum(s);
  if (threadIdx.x == 0) bcast = s;
  __syncthreads();
  const float inv = 1.f / bcast;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = __expf(row[c] - m) * inv;
}

extern "C" void softmax_rows_launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (rows > 0 && cols > 0) softmax_rows_cub<<<rows, 256, 0, stream>>>(x, y, cols);
}
