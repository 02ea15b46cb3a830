#include "binding_registry.h"

#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>

extern "C" long long matmul_sum_scale_workspace_floats(int in_f, int out_f);
extern "C" void matmul_sum_scale_launch(const float* x, const float* w, const float* bias,
                                        float* out, float* workspace, int batch, int in_f,
                                        int out_f, float scale, cudaStream_t stream);

static void check_f32_cuda(const torch::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda(), "matmul_sum_scale: ", name, " must be on the GPU");
  TORCH_CHECK(t.scalar_type() == torch::kFloat32, "matmul_sum_scale: ", name, " must be float32");
  TORCH_CHECK(t.is_contiguous(), "matmul_sum_scale: ", name, " must be contiguous");
}

// x [batch, in], weight [out, in], bias [out] -> [batch, 1]
static torch::Tensor matmul_sum_scale(torch::Tensor x, torch::Tensor weight, torch::Tensor bias,
                                      double scale) {
  check_f32_cuda(x, "x");
  check_f32_cuda(weight, "weight");
  check_f32_cuda(bias, "bias");
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && bias.dim() == 1,
              "matmul_sum_scale: expected x [B, in], weight [out, in], bias [out]");
  TORCH_CHECK(x.size(1) == weight.size(1), "matmul_sum_scale: x has ", x.size(1),
              " features, weight expects ", weight.size(1));
  TORCH_CHECK(bias.size(0) == weight.size(0), "matmul_sum_scale: bias/weight size mismatch");
  TORCH_CHECK(x.device() == weight.device() && x.device() == bias.device(),
              "matmul_sum_scale: tensors on different devices");
  TORCH_CHECK(x.size(0) < (1LL << 31) && x.size(1) < (1LL << 31) && weight.size(0) < (1LL << 31),
              "matmul_sum_scale: sizes must fit in int32");

  const c10::cuda::CUDAGuard guard(x.device());
  const int batch = (int)x.size(0), in_f = (int)x.size(1), out_f = (int)weight.size(0);
  auto out = torch::empty({x.size(0), 1}, x.options());
  auto ws = torch::empty({matmul_sum_scale_workspace_floats(in_f, out_f)}, x.options());
  matmul_sum_scale_launch(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(),
                          out.data_ptr<float>(), ws.data_ptr<float>(), batch, in_f, out_f,
                          (float)scale, c10::cuda::getCurrentCUDAStream());
  cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "matmul_sum_scale: kernel launch failed: ", cudaGetErrorString(err));
  return out;
}

static void bind_matmul_sum_scale(pybind11::module_& m) {
  m.def("matmul_sum_scale", &matmul_sum_scale,
        "(x @ weight.T + bias).sum(1, keepdim=True) * scale via column sums of weight");
}
REGISTER_BINDING(matmul_sum_scale, bind_matmul_sum_scale)
