"""The `ctxbudget` command: `demo`, `inspect`, `count`, `eval` (docs/cli.md,
"Command line").

Commands are registered in one table, `app.COMMANDS`; each lives in its own module
with `add_arguments` and `run` (`eval` is the harness's own parser, `ctxbudget.eval`).
Only `demo` and the terminal view need the ``cli`` extra, imported when used, so
`--version`, `--json` and `count` work with the core alone.
"""

from ctxbudget._cli.app import main

__all__ = ["main"]
