"""Pure functions over result tables (pandas only: no torch, no triton, no evidence code)."""
