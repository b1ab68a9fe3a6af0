"""The PyTorch backend (CUDA, CPU): the model, its int4 layers, the KV pool and the fused
CPU decode step."""
