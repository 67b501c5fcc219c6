"""Reproductions of two vLLM DeepSeek-V4 KV-cache bugs (PR #43988 and PR #55109)."""

__version__ = "0.1.0"
