"""A study notebook's session: :meth:`repro.walkthrough.session.Session.start`, then its ``download`` parameter made
a property of the process (:mod:`repro_studies.downloads`): false, nothing the notebook runs may reach the registry."""

from __future__ import annotations

from typing import Any

from repro.parameters import parameter_classes
from repro.walkthrough.session import Session
from repro_studies import downloads


def start(notebook: str, profile: str = "auto", run_dir: str = "", **params: Any) -> Session:
    """The notebook's parameters built as its registered class (:mod:`repro_studies.notebooks`: each field checked
    once), then the session; ``download`` set for the process."""
    session = Session.start(notebook, profile, run_dir, parameter_classes()[f"{notebook}.ipynb"](**params))
    downloads.set_allowed(session.params.download)  # type: ignore[attr-defined]  (every study notebook has it)
    return session
