#include "binding_registry.h"
#include <ATen/cuda/CUDAContext.h>

static torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B) {
  TORCH_CHECK(A.is_cuda() && B.is_cuda(), "matmul_forward: expected CUDA tensors");
  return torch::matmul(A, B);
}

static void bind_matmul(pybind11::module_& m) { m.def("matmul_forward", &matmul_forward); }
REGISTER_BINDING(matmul, bind_matmul)
