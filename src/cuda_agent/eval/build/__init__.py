"""The build, in the trusted parent, cached by content.

- `toolchain.py`  the compilers, their commands and flags, a compile unit's cache key (below the build and its checks).
- `workspace.py`  a workspace's kernels into one `cuda_extension.so` (nvcc, the host compiler, the link).
- `single_file.py` a single-file solution's `load_inline` extensions, built by the parent when their arguments are static.
- `split.py`      a `load_inline` CUDA text split into a torch-free device unit and a host unit.
- `env_check.py`  a failed build told apart from a machine that cannot build (`env_error`)."""
