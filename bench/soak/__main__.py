"""Entry point: ``python -m bench.soak`` from the repository root (``make soak``)."""

import sys

from .main import main

sys.exit(main())
