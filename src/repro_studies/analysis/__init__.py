"""Pure functions over the studies' result tables (pandas only: no torch, no triton, no evidence code)."""
