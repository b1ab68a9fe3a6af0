"""The engine's own CPU kernels: C++ sources in csrc/, built on first use by torch's
cpp_extension (cpu.py), and the CPU feature flags that choose fast paths."""
