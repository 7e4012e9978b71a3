"""``python -m swordfish_backend`` = the ``swordfish`` command (see cli.py)."""

import sys

from .cli import main

sys.exit(main())
