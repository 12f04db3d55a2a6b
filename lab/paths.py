"""Where the lab keeps its files on the host: one folder, `.lab/` at the repo root.

LAB_HOME overrides it (tests use a temporary one so they never touch a user's labs).
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def state_dir() -> Path:
    return Path(os.environ.get("LAB_HOME") or REPO_ROOT / ".lab")


def lab_dir(name: str) -> Path:
    """Per-lab files: ssh key, inventory, ansible logs, the shared folder."""
    return state_dir() / "labs" / name


def runs_dir() -> Path:
    return state_dir() / "runs"


def cache_dir() -> Path:
    """Survives `lab down`: wheelhouse, bootstrap logs."""
    return state_dir() / "cache"


def logs_dir() -> Path:
    return state_dir() / "logs"
