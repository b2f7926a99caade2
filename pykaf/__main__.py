"""``python -m pykaf``: the ``pykaf`` command (see :mod:`pykaf.cli`)."""

import sys

from pykaf.cli import main

sys.exit(main())
