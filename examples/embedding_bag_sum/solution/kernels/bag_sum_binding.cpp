#include "binding_registry.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <cstdint>

extern "C" void bag_sum_launch(const int64_t* indices, const float* table, float* out, long long bags,
                               long long bag_size, long long rows, long long dim, cudaStream_t stream);

// out[b, :] = sum over j of table[indices[b, j], :] (nn.EmbeddingBag(mode="sum") on a 2-D input)
static torch::Tensor bag_sum(torch::Tensor indices, torch::Tensor table) {
  TORCH_CHECK(indices.is_cuda() && table.is_cuda(), "bag_sum: indices and table must be on the GPU");
  TORCH_CHECK(indices.dim() == 2 && indices.scalar_type() == torch::kInt64, "bag_sum: indices must be int64 [bags, bag_size]");
  TORCH_CHECK(table.dim() == 2 && table.scalar_type() == torch::kFloat32, "bag_sum: table must be float32 [rows, dim]");
  TORCH_CHECK(indices.is_contiguous() && table.is_contiguous(), "bag_sum: indices and table must be contiguous");
  const c10::cuda::CUDAGuard guard(table.device());
  auto out = torch::empty({indices.size(0), table.size(1)}, table.options());
  bag_sum_launch(indices.data_ptr<int64_t>(), table.data_ptr<float>(), out.data_ptr<float>(), indices.size(0),
                 indices.size(1), table.size(0), table.size(1), c10::cuda::getCurrentCUDAStream());
  cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "bag_sum: kernel launch failed: ", cudaGetErrorString(err));
  return out;
}

static void bind_bag_sum(pybind11::module_& m) {
  m.def("bag_sum", &bag_sum, "sum of the table rows each bag of int64 indices names (EmbeddingBag, mode sum)");
}
REGISTER_BINDING(bag_sum, bind_bag_sum)
