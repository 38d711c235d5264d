"""Entry point of ``python -m trainer``."""

import sys

from trainer.cli import main

if __name__ == "__main__":
    sys.exit(main())
