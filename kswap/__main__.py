"""``python -m kswap``: the command line."""

import sys

from kswap.cli import main

sys.exit(main())
