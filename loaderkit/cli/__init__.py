"""The ``loaderkit`` command-line interface (``loaderkit --help``, ``python -m loaderkit``).

Commands: ``demo`` (the main job on the bundled corpus, with an exact-resume check),
``explain PLAN``, ``validate PLAN``, ``diff A B`` and ``bench PLAN``. See ``docs/cli.md``.
"""

from loaderkit.cli.app import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError, cli, main

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "CliError", "cli", "main"]
