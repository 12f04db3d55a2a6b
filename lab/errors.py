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


class ForecastError(LabError):
    """What a run lacks for `lab forecast`, or a forecast asked for wrongly."""

    exit_code = 2


class HostError(LabError):
    """This machine refused: disk full, permission denied, read-only filesystem."""

    exit_code = 8


def host_error(error: OSError) -> HostError:
    """An OSError from writing lab files, as one line naming the path and what to do."""
    where = f" {error.filename}" if error.filename else ""
    reason = error.strerror or str(error)
    hints = {
        28: "free some disk space (`docker system df` shows what the engine holds), or set LAB_HOME to another disk",
        13: "run as a user who may write there, or set LAB_HOME to a folder you own",
        30: "set LAB_HOME to a writable folder",
    }
    return HostError(f"cannot use{where}: {reason}", hints.get(error.errno, "check the path and try again"))
