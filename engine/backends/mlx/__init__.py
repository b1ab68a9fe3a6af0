"""The MLX backend (Apple Metal, CUDA, CPU)."""
