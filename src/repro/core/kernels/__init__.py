"""Triton kernels: the K-cache writer and the gather variants (import after choosing the profile).

Under the CPU profile ``TRITON_INTERPRET=1`` must be set before this package is imported, because
``@triton.jit`` decides between the compiler and the interpreter when the kernel is defined.
"""
