"""The studies' measurements: ceilings, JIT fingerprints, the V4.1 records' timings and the tuning sweeps."""
