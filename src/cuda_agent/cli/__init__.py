"""Layer 4: the `cuda-agent` command."""
