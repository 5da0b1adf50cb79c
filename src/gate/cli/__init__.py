"""The ``rag-gate`` command line (click): ``gate.cli.main`` holds the group, ``gate.cli.pr`` the PR command."""

from gate.cli.main import main

__all__ = ["main"]
