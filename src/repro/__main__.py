"""``python -m repro``: the command line lives in :mod:`repro.cli.main`."""

import sys

from repro.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
