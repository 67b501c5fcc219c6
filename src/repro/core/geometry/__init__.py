"""Byte layouts of the K-cache records (pure data, no torch)."""
