"""Whether this process may ask the package registry for anything: the ``download`` parameter of the notebook it
runs, made a property of the process (and of every process it starts) instead of an argument each call must pass.

A notebook started with ``download=false`` (:class:`repro.walkthrough.session.Session`) turns downloads off here;
the wheel cache and the registry index then refuse to reach the registry whatever their callers pass, so a helper
that calls them with their own default cannot fetch a wheel behind the parameter's back.
"""

from __future__ import annotations

import os

#: ``off`` in a process whose notebook said ``download=false`` (inherited by the processes it starts).
ENV = "REPRO_DOWNLOADS"
OFF = "off"


def set_allowed(allowed: bool) -> None:
    """Follow a notebook's ``download`` parameter in this process and every process it starts."""
    if allowed:
        os.environ.pop(ENV, None)
    else:
        os.environ[ENV] = OFF


def allowed() -> bool:
    """May this process reach the registry?"""
    return os.environ.get(ENV) != OFF
