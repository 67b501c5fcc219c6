"""The studies' Triton kernels: the fast gathers (V4 and V4.1 records) and the streaming ceiling's kernels (import
after choosing the profile, as :mod:`repro.core.kernels`)."""
