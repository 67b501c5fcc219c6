"""The two bugs: the K-cache geometry, the reshape (PR #43988), the gather kernels before and after the row-pitch
fix (PR #55109) with their references, the evidence that runs them (scenarios, cases, the sweep, isolation and the
sanitizer, the fix's cost) and the analysis of its tables. Nothing here imports :mod:`repro_studies`."""
