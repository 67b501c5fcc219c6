# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Lets test_dequantize_and_gather_strided_block_table.py run unchanged against
older vLLM releases, which kept its modules under other names. A vLLM checkout
needs none of this: copy the test file alone.

- before 0.22 the DeepSeek-V4 ops lived in
  ``vllm.v1.attention.ops.deepseek_v4_ops.cache_utils``;
- before 0.30 the V4 Triton gather was the function
  ``dequantize_and_gather_k_cache_triton`` (from 0.30 on, the kernel object
  ``_DEQUANTIZE_AND_GATHER_K_CACHE_KERNEL``; before 0.22 the dispatcher alone).

Runs once the session starts, when the vLLM under test is importable.
"""

import importlib
import sys

V4_MODULE = "vllm.models.deepseek_v4.common.ops.cache_utils"
V4_MODULE_BEFORE_0_22 = "vllm.v1.attention.ops.deepseek_v4_ops.cache_utils"
V4_TRITON_ENTRY = "_DEQUANTIZE_AND_GATHER_K_CACHE_KERNEL"
V4_TRITON_ENTRY_BEFORE_0_30 = "dequantize_and_gather_k_cache_triton"


def _import_if_present(name: str):
    """The module, or None when this vLLM has no such module (an import that
    fails inside an existing module is raised)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is None or not (name + ".").startswith(e.name + "."):
            raise
        return None


def pytest_sessionstart(session) -> None:
    module = _import_if_present(V4_MODULE)
    if module is None:
        module = _import_if_present(V4_MODULE_BEFORE_0_22)
        if module is None:
            return
        sys.modules[V4_MODULE] = module
    if not hasattr(module, V4_TRITON_ENTRY) and hasattr(
        module, V4_TRITON_ENTRY_BEFORE_0_30
    ):
        setattr(module, V4_TRITON_ENTRY, getattr(module, V4_TRITON_ENTRY_BEFORE_0_30))
