"""One exception family for everything a user can get wrong or the host can refuse.

The CLI prints ``message`` and ``hint`` on one line each and exits with ``exit_code``;
nothing else in the package prints errors or calls ``sys.exit``.
"""

from __future__ import annotations


class LabError(Exception):
    """A failure the user can understand and act on."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class SpecError(LabError):
    """Bad input: options, names, manifests, inventories."""

    exit_code = 2


class EngineError(LabError):
    """The Docker engine is missing, down, or refused a request."""

    exit_code = 3


class ImageError(LabError):
    """The node image could not be resolved or built."""

    exit_code = 4


class LabStateError(LabError):
    """The lab is not in the state the command needs (absent, different spec, stopped)."""

    exit_code = 5


class ProvisionError(LabError):
    """Ansible could not provision one or more nodes."""

    exit_code = 6


class RunError(LabError):
    """An exercise or command could not be launched or did not finish."""

    exit_code = 7
