#include "binding_registry.h"
#include <ATen/cuda/CUDAContext.h>

extern "C" void fill_launch(float* y, long long n, float v, cudaStream_t stream);

static void fill_value(torch::Tensor y, double v) {
  fill_launch(y.data_ptr<float>(), y.numel(), (float)v, at::cuda::getCurrentCUDAStream());
}

static void bind_fill(pybind11::module_& m) { m.def("fill_value", &fill_value); }
REGISTER_BINDING(fill, bind_fill)
