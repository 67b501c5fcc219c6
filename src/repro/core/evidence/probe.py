"""``python -m repro.core.evidence.probe PATH PARAM``: import and check one implementation in a throw-away
process (:func:`repro.core.evidence.isolate.check_implementation_isolated` starts it).

The answer goes through the process's channel (:mod:`repro.core.evidence.channel`), taken before the
module is imported: ``{"provenance": ...}`` and exit code 0, or ``{"error": "<the one-line error>"}`` and
exit code 2. A module that ends the process on import sends neither, which the caller reports.
"""

from __future__ import annotations

import sys

from repro.core.evidence.channel import ChildChannel
from repro.core.evidence.watchdog import set_parent_death_signal
from repro.registry import ImplementationError, load_implementation, provenance


def main(argv: list[str]) -> int:
    channel = ChildChannel.open()
    set_parent_death_signal()
    path, param = argv
    try:
        load_implementation(path, param)
        answer, code = {"provenance": provenance(path)}, 0
    except ImplementationError as exc:
        answer, code = {"error": str(exc)}, 2
    if channel is None:
        print(answer)
    else:
        channel.send(answer)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
