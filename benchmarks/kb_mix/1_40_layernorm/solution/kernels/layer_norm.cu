// LayerNorm over the trailing D elements of each row (D = numel of the affine weight):
//   y = (x - mean) * rsqrt(var + eps) * w + b, var the biased variance (as torch).
// The rows are few and long (16 rows of 4M elements), so one block per row would use
// 16 SMs: stage 1 splits every row into chunks (grid rows x chunks) and sums x and x^2
// per chunk in double, stage 2 turns each row's chunk sums into mean and rstd, stage 3
// is an elementwise pass. Double sums keep E[x^2] - mean^2 exact enough for any data
// this task can draw.
#include <cuda_runtime.h>
#include <math.h>

namespace {

// Grid-stride loops: enough blocks to fill every SM several times over, not one
// block per 256 elements of a 100M-element output.
int grid_for(long long n, int threads) {
  const long long want = (n + threads - 1) / threads;
  const long long cap = 132LL * 16;
  return (int)(want < 1 ? 1 : (want > cap ? cap : want));
}

__device__ __forceinline__ double warp_sum_d(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block in double; every thread gets the result (see block_reduce).
__device__ double block_sum_d(double v, double* smem) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  v = warp_sum_d(v);
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  if (warp == 0) {
    double r = lane < nwarps ? smem[lane] : 0.0;
    r = warp_sum_d(r);
    if (lane == 0) smem[0] = r;
  }
  __syncthreads();
  const double r = smem[0];
  __syncthreads();
  return r;
}

__global__ void ln_partials(const float* __restrict__ x, double* __restrict__ partial, long long D, int chunks) {
  __shared__ double smem[32];
  const long long row = blockIdx.x, chunk = blockIdx.y;
  const long long per = (D + chunks - 1) / chunks;
  const long long begin = chunk * per;
  const long long end = begin + per < D ? begin + per : D;
  const float* xr = x + row * D;
  double s = 0.0, q = 0.0;
  for (long long i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const double v = xr[i];
    s += v;
    q += v * v;
  }
  s = block_sum_d(s, smem);
  q = block_sum_d(q, smem);
  if (threadIdx.x == 0) {
    partial[(row * chunks + chunk) * 2] = s;
    partial[(row * chunks + chunk) * 2 + 1] = q;
  }
}

__global__ void ln_stats(const double* __restrict__ partial, float* __restrict__ stats, long long D, int chunks,
                         double eps) {
  __shared__ double smem[32];
  const long long row = blockIdx.x;
  double s = 0.0, q = 0.0;
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
    s += partial[(row * chunks + c) * 2];
    q += partial[(row * chunks + c) * 2 + 1];
  }
  s = block_sum_d(s, smem);
  q = block_sum_d(q, smem);
  if (threadIdx.x == 0) {
    const double mean = s / (double)D;
    double var = q / (double)D - mean * mean;
    if (var < 0.0) var = 0.0;  // rounding can make a constant row's variance slightly negative
    stats[2 * row] = (float)mean;
    stats[2 * row + 1] = (float)(1.0 / sqrt(var + eps));
  }
}

__global__ void ln_apply(const float* __restrict__ x, const float* __restrict__ stats, const float* __restrict__ w,
                         const float* __restrict__ b, float* __restrict__ y, long long D, long long total) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    const long long row = i / D, j = i - row * D;
    y[i] = (x[i] - stats[2 * row]) * stats[2 * row + 1] * w[j] + b[j];
  }
}

}  // namespace

// Chunks per row: about 8K elements per block of stage 1, at most 1024 chunks.
extern "C" int layer_norm_chunks(long long D) {
  long long c = (D + 8191) / 8192;
  return (int)(c < 1 ? 1 : (c > 1024 ? 1024 : c));
}

// x [rows, D], w [D], b [D], y [rows, D]; partial: [rows * chunks * 2] doubles; stats: [rows * 2] floats.
extern "C" void layer_norm_launch(const float* x, const float* w, const float* b, float* y, double* partial, float* stats,
                                  long long rows, long long D, double eps, cudaStream_t stream) {
  if (rows == 0 || D == 0) return;
  const int chunks = layer_norm_chunks(D);
  ln_partials<<<dim3((unsigned)rows, (unsigned)chunks), 256, 0, stream>>>(x, partial, D, chunks);
  ln_stats<<<(unsigned)rows, 256, 0, stream>>>(partial, stats, D, chunks, eps);
  const long long total = rows * D;
  ln_apply<<<grid_for(total, 256), 256, 0, stream>>>(x, stats, w, b, y, D, total);
}
