"""What CI runs (.ci/run): lint, the suite on every supported Python, and the core's and the
adapters' tests on the oldest releases the requirements allow. CONTRIBUTING.md says what runs
where, and why.

    nox                                  # every session, as CI does
    nox -s tests-3.13 -- tests/core      # one interpreter, some tests

Interpreters are found on this machine (PATH, pyenv, ...), never downloaded: one that is
missing is reported and skipped, and is an error under CI=true (nox's default when CI is set).
"""

from __future__ import annotations

import os
import shutil
import subprocess

import nox

nox.needs_version = ">=2026.10.20"
nox.options.default_venv_backend = "uv"
nox.options.download_python = "never"
os.environ["UV_PYTHON_DOWNLOADS"] = "never"  # nor by uv, whatever a session asks of it
# Copies, not uv's default hard links into its cache: llama-index-core's bundled nltk refuses
# to open a multiply-linked file (tests/llamaindex/test_li_convert.py fails on one).
os.environ["UV_LINK_MODE"] = "copy"


def _activate_every_pyenv_python() -> None:
    """Let nox find every Python that pyenv installed: pyenv's shims (which nox resolves) answer
    only for the active versions, so the installed ones are appended to them, the active first."""
    pyenv = shutil.which("pyenv")
    if pyenv is None:
        return

    def pyenv_says(*args: str) -> list[str]:
        done = subprocess.run([pyenv, *args], capture_output=True, text=True, check=False)
        return done.stdout.replace(":", "\n").split()

    active = pyenv_says("version-name")
    installed = pyenv_says("versions", "--bare", "--skip-aliases", "--skip-envs")
    os.environ["PYENV_VERSION"] = ":".join(dict.fromkeys([*active, *installed]))


_activate_every_pyenv_python()

# The classifiers in pyproject.toml name the same versions, the first is requires-python's
# floor (tests/test_packaging.py).
PYTHONS = ["3.11", "3.12", "3.13"]
PYPROJECT = nox.project.load_toml("pyproject.toml")
# The suite covers every extra: each optional dependency is tested where it is used.
EVERY_EXTRA = ",".join(PYPROJECT["project"]["optional-dependencies"])
TEST_TOOLS = nox.project.dependency_groups(PYPROJECT, "test")


@nox.session(python=PYTHONS[0])
def lint(session: nox.Session) -> None:
    """ruff, ruff format and mypy --strict, with every extra installed for the types."""
    session.install("-e", f".[{EVERY_EXTRA}]", *TEST_TOOLS)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")


# What depends on the interpreter (its unicodedata under the fence's tables, the stdlib the
# core leans on) is tested on every version: on the oldest by `oldest`, at the floors; the
# whole suite on the newest with the newest releases. So CI stays near ten minutes on two
# cores (CONTRIBUTING.md).
CORE_TESTS = [
    "tests/core",
    "tests/security",
    "tests/cli",
    "tests/test_public_api.py",
    "tests/test_docs.py",
]


@nox.session(python=PYTHONS[1:])
def tests(session: nox.Session) -> None:
    """The suite on one interpreter with the newest releases, spread over every core: all of
    it on the newest, the core's tests between (the oldest Python is `oldest`'s)."""
    session.install("-e", f".[{EVERY_EXTRA}]", *TEST_TOOLS)
    everything = session.python == PYTHONS[-1]
    session.run(
        "pytest", "-q", "-n", "auto", *(session.posargs or ([] if everything else CORE_TESTS))
    )


# .ci/oldest-constraints.txt: upstream pins a lowest-direct resolution walks into, each with why.
# Every extra but `cluster`, whose Ray starts a local cluster that would add to the session's
# time and, at its floor 2.40, leaves a log file and a subprocess open at the tests' teardown
# (ResourceWarnings, errors under filterwarnings = error); its pyarrow and pandas floors are
# installed and tested, and tests/core/test_ingest_ray.py is skipped here.
OLDEST_EXTRAS = ",".join(
    name for name in PYPROJECT["project"]["optional-dependencies"] if name != "cluster"
)
OLDEST_CLUSTER = [
    r for r in PYPROJECT["project"]["optional-dependencies"]["cluster"] if not r.startswith("ray")
]


@nox.session(python=PYTHONS[0])
def oldest(session: nox.Session) -> None:
    """The core's and the adapters' tests with every direct requirement at its floor
    (tiktoken, pydantic, each extra's SDK and the test group's included), so a floor in
    pyproject.toml is a tested claim."""
    session.install(
        "--resolution",
        "lowest-direct",
        "--constraint",
        ".ci/oldest-constraints.txt",
        "-e",
        f".[{OLDEST_EXTRAS}]",
        *OLDEST_CLUSTER,
        *TEST_TOOLS,
    )
    session.run(
        "pytest",
        "-q",
        "-n",
        "auto",
        *(session.posargs or [*CORE_TESTS, "tests/eval", "tests/langchain", "tests/llamaindex"]),
    )
