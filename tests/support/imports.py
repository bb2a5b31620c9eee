"""What an import loads, seen from a fresh interpreter (the test process has loaded everything)."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterable

# Printed last, on a line of its own, so whatever `code` prints cannot be mistaken for it;
# it imports only `sys`, which every interpreter has loaded, so it adds nothing to the list.
_REPORT = "\nimport sys as _sys\nprint('\\n' + repr(sorted(_sys.modules)))\n"


def loaded_after(code: str, modules: Iterable[str], *, timeout: float = 120) -> set[str]:
    """Which of `modules` are imported once `code` has run in a new interpreter: a name
    counts when it, or any module inside it (``rich.console`` for ``rich``), was loaded."""
    run = subprocess.run(
        [sys.executable, "-c", code + _REPORT],
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout,
    )
    loaded = ast.literal_eval(run.stdout.splitlines()[-1])
    return {
        name
        for name in modules
        if any(module == name or module.startswith(f"{name}.") for module in loaded)
    }
