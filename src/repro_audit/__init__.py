"""What reviewers see, checked in a real browser: the reports of run folders and the README as GitHub shows them.

A development tool built on :mod:`repro` (it needs the ``dev`` extra's Playwright and cmark-gfm); ``make audit``,
the browser tests and ``scripts/render-evidence-reports.sh`` use it, and :mod:`repro` never imports it.
"""
