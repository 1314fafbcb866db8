"""``python -m polang``: the ``polang`` command line."""

import sys

from polang.cli import main

if __name__ == "__main__":
    sys.exit(main())
