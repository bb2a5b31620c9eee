"""`python -m ctxbudget` / `ctxbudget`: the command line (see `ctxbudget --help`)."""

from __future__ import annotations

import sys

from ctxbudget._cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
