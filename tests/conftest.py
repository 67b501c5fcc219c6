"""Tests run kernels in Triton's interpreter: the variable must be set before any kernel module is
imported, because ``@triton.jit`` picks interpreter or compiler when the kernel is defined."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("CI", "1")  # quiet progress bars in runner subprocesses
