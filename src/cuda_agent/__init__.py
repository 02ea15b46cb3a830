"""cuda-agent: an LLM agent that writes CUDA kernels for PyTorch models, the trusted
evaluator that scores them, and an RL environment. Importing this package is cheap:
subpackages import torch only when they need it."""

__version__ = "0.1.0"
