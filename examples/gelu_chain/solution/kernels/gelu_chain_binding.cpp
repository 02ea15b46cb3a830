#include "binding_registry.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

extern "C" void gelu_chain_launch(const float* in, float* out, long long n, cudaStream_t stream);

static torch::Tensor gelu_chain(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "gelu_chain: x must be on the GPU");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "gelu_chain: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "gelu_chain: x must be contiguous");
  const c10::cuda::CUDAGuard guard(x.device());
  auto out = torch::empty_like(x);
  gelu_chain_launch(x.data_ptr<float>(), out.data_ptr<float>(), x.numel(),
                    c10::cuda::getCurrentCUDAStream());
  cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "gelu_chain: kernel launch failed: ", cudaGetErrorString(err));
  return out;
}

static void bind_gelu_chain(pybind11::module_& m) {
  m.def("gelu_chain", &gelu_chain, "tanh(h) * log1p(|h|), h = gelu_tanh(x) * sigmoid(x) + log1p(exp(-|x|))");
}
REGISTER_BINDING(gelu_chain, bind_gelu_chain)
