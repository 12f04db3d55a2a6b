"""Where the lab keeps its files, and where it finds the files it ships.

State (keys, logs, run records, caches) lives in one folder: `$LAB_HOME` when set, else the nearest
`.lab/` in the current folder or one of its parents (as git finds `.git`), else `./.lab` is created
on first use. Shipped resources (exercises/, playbooks/, docker/) are read from the wheel when the
package is installed, or from the repository's top level in a checkout.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
BUNDLED = PACKAGE_DIR / "_resources"  # filled by the wheel build (setup.py); absent in a checkout
RESOURCES = ("exercises", "playbooks", "docker")
STATE_FOLDER = ".lab"


def in_checkout() -> bool:
    """True when the package runs from the repository (editable install), False when installed from a build."""
    return not BUNDLED.is_dir()


def resource(name: str) -> Path:
    """A shipped top-level folder (exercises, playbooks, docker): the bundled copy, or the checkout's own."""
    if name not in RESOURCES:
        raise ValueError(f"unknown resource {name!r}")
    return (REPO_ROOT if in_checkout() else BUNDLED) / name


@dataclass(frozen=True)
class StateLocation:
    """The state folder and why it was chosen: `lab home` shows both."""

    path: Path
    source: str  # "LAB_HOME" (set in the environment), "found" (an existing .lab/), "new" (./.lab, made on first use)


def locate_state() -> StateLocation:
    home = os.environ.get("LAB_HOME")
    if home:
        return StateLocation(Path(home).expanduser().absolute(), "LAB_HOME")
    here = Path.cwd()
    for folder in (here, *here.parents):
        if (folder / STATE_FOLDER).is_dir():
            return StateLocation(folder / STATE_FOLDER, "found")
    return StateLocation(here / STATE_FOLDER, "new")


def state_dir() -> Path:
    return locate_state().path


def lab_dir(name: str) -> Path:
    """Per-lab files: ssh key, inventory, ansible logs, the shared folder."""
    return state_dir() / "labs" / name


def runs_dir() -> Path:
    return state_dir() / "runs"


def cache_dir() -> Path:
    """Survives `lab down`: wheelhouse, bootstrap logs."""
    return state_dir() / "cache"


def host_ports_dir() -> Path:
    """Reservations of this host's own ports: one folder for every state folder and test worker of this user,
    since two runs on the host from two `.lab/` folders still share its ports."""
    return Path(tempfile.gettempdir()) / f"lab-{os.getuid()}-ports"


def logs_dir() -> Path:
    return state_dir() / "logs"
