// One warp per 16x16 tile of C with TF32 tensor cores; needs M, N % 16 == 0 and K % 8 == 0.
#include <mma.h>
#include <cuda_runtime.h>

using namespace nvcuda;

__global__ void matmul_tf32(const float* A, const float* B, float* C, int M, int N, int K) {
  const int tm = blockIdx.y, tn = blockIdx.x;
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> c;
  wmma::fill_fragment(c, 0.f);
  for (int k = 0; k < K; k += 8) {
    wmma::load_matrix_sync(a, A + (long long)tm * 16 * K + k, K);
    wmma::load_matrix_sync(b, B + (long long)k * N + tn * 16, N);
    for (int i = 0; i < a.num_elements; ++i) a.x[i] = wmma::__float_to_tf32(a.x[i]);
    for (int i = 0; i < b.num_elements; ++i) b.x[i] = wmma::__float_to_tf32(b.x[i]);
    wmma::mma_sync(c, a, b, c);
  }
  wmma::store_matrix_sync(C + (long long)tm * 16 * N + tn * 16, c, N, wmma::mem_row_major);
}

extern "C" void matmul_launch(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream) {
  dim3 grid(N / 16, M / 16);
  matmul_tf32<<<grid, 32, 0, stream>>>(A, B, C, M, N, K);
}
