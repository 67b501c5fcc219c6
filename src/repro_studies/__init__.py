"""What is built on the two bugs: every vLLM release's own code (:mod:`repro_studies.upstream`), the fast gathers and
the V4.1 records, the streaming ceilings, the JIT fingerprint, CuTe-DSL and the tuning sweeps, with their analyses.
A study imports :mod:`repro.core` and the shared vocabulary, never the rendering above it."""
