// Fixed infrastructure of a cuda-agent workspace. Do not edit: the evaluator
// replaces this file with its pristine copy before every build.
//
// Every kernels/*_binding.cpp registers one function that adds its Python
// bindings to the module; binding.cpp runs all of them when Python imports
// `cuda_extension`. Registration happens in static initialisers, which run
// when the shared library is loaded, before the module's init function.
#pragma once

#include <torch/extension.h>

#include <vector>

namespace cuda_agent {

using BindFn = void (*)(pybind11::module_&);

// One registry for the whole shared library (an inline function's static
// local has a single instance across translation units).
inline std::vector<BindFn>& binding_registry() {
  static std::vector<BindFn> fns;
  return fns;
}

struct BindingRegistrar {
  explicit BindingRegistrar(BindFn fn) { binding_registry().push_back(fn); }
};

}  // namespace cuda_agent

// Usage, at file scope of a kernels/<name>_binding.cpp:
//   static void bind_my_op(pybind11::module_& m) { m.def("my_op", &my_op); }
//   REGISTER_BINDING(my_op, bind_my_op)
#define REGISTER_BINDING(name, fn) \
  static ::cuda_agent::BindingRegistrar cuda_agent_registrar_##name(fn);
