"""A study notebook's session: :meth:`repro.walkthrough.session.Session.start`, then its ``download`` parameter made
a property of the process (:mod:`repro_studies.downloads`): false, nothing the notebook runs may reach the registry."""

from __future__ import annotations

from typing import Any

from repro.walkthrough.session import Session
from repro_studies import downloads


def start(notebook: str, profile: str = "auto", run_dir: str = "", **params: Any) -> Session:
    session = Session.start(notebook, profile, run_dir, **params)
    if "download" in session.params:
        downloads.set_allowed(session.params["download"])
    return session
