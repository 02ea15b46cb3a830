"""Layer 0: tasks (KernelBench format) and CUDA-Agent workspaces. Imports nothing above it."""

from cuda_agent.task.taskfile import Task, TaskError

__all__ = ["Task", "TaskError"]
