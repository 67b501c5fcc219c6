"""vLLM's own DeepSeek gather code, release by release: index, wheel cache, discovery, loader, patcher, matrix.

Nothing here decides a verdict: the matrix runner hands observation rows to a sink, and
:mod:`repro_studies.analysis.releases` turns them into verdicts. vLLM's code is downloaded at run time into an
ignored cache folder and never committed.
"""
