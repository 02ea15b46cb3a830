// Fixed infrastructure of a cuda-agent workspace. Do not edit: the evaluator
// replaces this file with its pristine copy before every build.
// It defines the Python module `cuda_extension` and adds every binding that
// a kernels/*_binding.cpp registered through REGISTER_BINDING.
#include "binding_registry.h"

PYBIND11_MODULE(cuda_extension, m) {
  m.doc() = "kernels built by cuda-agent from kernels/*.cu and kernels/*_binding.cpp";
  for (auto fn : cuda_agent::binding_registry()) fn(m);
}
