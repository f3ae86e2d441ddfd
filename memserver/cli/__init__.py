"""The `memserver` command (entry point `memserver.cli:main`)."""

from memserver.cli.command import main

__all__ = ["main"]
