"""What a run copies of the user's folder into its record (`lab torchrun SCRIPT`, `lab exec --copy DIR`).

A project folder often sits beside things no node needs: virtual environments (whatever their name: a folder
holding `pyvenv.cfg`, or a conda env's `conda-meta/`), version control, caches, and whatever the project's own
ignore rules (`.gitignore`, and `.labignore` for the lab alone, both in git's syntax) leave out. What remains is
counted before anything is copied: a copy larger than the limit is refused in one line that says what was big.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pathspec

from lab.errors import SpecError
from lab.model.spec import format_bytes, parse_size

# Never copied, by name: the lab's own state, version control and caches.
NOT_COPIED = (".lab", ".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".tox")
IGNORE_FILES = (".gitignore", ".labignore")
ENVIRONMENT_MARKERS = ("pyvenv.cfg", "conda-meta")  # what makes a folder a Python environment, by content
DEFAULT_COPY_LIMIT = 100 * 1024**2
BIGGEST_SHOWN = 3


@dataclass(frozen=True)
class CopyPlan:
    """The files a copy takes (relative to the folder) and their sizes; what it leaves out, for messages."""

    root: Path
    files: tuple[tuple[str, int], ...]
    environments: tuple[str, ...]  # virtual environments left out, relative paths

    @property
    def size(self) -> int:
        return sum(size for _, size in self.files)

    def stamp(self) -> str:
        """What the copy holds, as names, sizes and modification times: equal stamps need no second copy."""
        digest = hashlib.sha256()
        for relative, size in self.files:
            digest.update(f"{relative}\0{size}\0{(self.root / relative).stat().st_mtime_ns}\n".encode())
        return digest.hexdigest()

    def archive(self) -> bytes:
        """The files as one tar (for hosts that share no folder with this machine)."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            for relative, _ in self.files:
                archive.add(self.root / relative, arcname=relative)
        return buffer.getvalue()

    def biggest(self) -> list[tuple[str, int]]:
        """The largest top-level entries of the copy, each with the bytes under it."""
        totals: dict[str, int] = {}
        for relative, size in self.files:
            head, _, rest = relative.partition("/")
            key = head + "/" if rest else head
            totals[key] = totals.get(key, 0) + size
        return sorted(totals.items(), key=lambda item: -item[1])[:BIGGEST_SHOWN]


def is_environment(folder: Path) -> bool:
    return any((folder / marker).exists() for marker in ENVIRONMENT_MARKERS)


def plan_copy(root: Path, state_dir: Path) -> CopyPlan:
    """Walk `root` once: every file a copy would take, with ignore files applied in the folder that holds them."""
    root = root.resolve()
    rules: dict[Path, pathspec.GitIgnoreSpec] = {}
    files, environments = [], []
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        spec = _rules_in(here)
        if spec is not None:
            rules[here] = spec
        kept = []
        for name in sorted(dirs):
            path = here / name
            if name in NOT_COPIED or path.resolve() == state_dir or _ignored(path, True, rules):
                continue
            if is_environment(path):
                environments.append(str(path.relative_to(root)))
                continue
            kept.append(name)
        dirs[:] = kept
        for name in sorted(names):
            path = here / name
            if _ignored(path, False, rules) or not path.is_file():
                continue
            files.append((str(path.relative_to(root)), path.stat().st_size))
    return CopyPlan(root, tuple(files), tuple(environments))


def _rules_in(folder: Path) -> pathspec.GitIgnoreSpec | None:
    lines = []
    for name in IGNORE_FILES:
        with_rules = folder / name
        if with_rules.is_file():
            lines += with_rules.read_text(errors="replace").splitlines()
    return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None


def _ignored(path: Path, is_dir: bool, rules: dict[Path, pathspec.GitIgnoreSpec]) -> bool:
    """Whether any ignore file above `path` (its own folder's included) leaves it out."""
    for base, spec in rules.items():
        if base in path.parents:
            relative = path.relative_to(base).as_posix() + ("/" if is_dir else "")
            if spec.match_file(relative):
                return True
    return False


def checked_copy(source: Path, state_dir: Path, limit: int) -> CopyPlan:
    """`plan_copy` of `source`, refused in one line when it is over `limit` (before anything is made)."""
    plan = plan_copy(source, state_dir)
    if plan.size > limit:
        biggest = ", ".join(f"{name} {format_bytes(size)}" for name, size in plan.biggest())
        raise SpecError(
            f"copying {source} to the nodes would take {format_bytes(plan.size)}, over the {format_bytes(limit)} limit "
            f"(biggest: {biggest})",
            f"list what the nodes do not need in {source / '.labignore'} (gitignore syntax), mount the folder with "
            "`lab up --workspace DIR` instead of copying it, or raise the limit with --copy-limit")
    return plan


def copy_planned(plan: CopyPlan, destination: Path) -> None:
    for relative, _ in plan.files:
        target = destination / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(plan.root / relative, target)


def parse_copy_limit(text: str) -> int:
    """--copy-limit: a size such as 500m or 2g."""
    value = parse_size(text)
    if value is None:
        raise SpecError(f"--copy-limit '{text}' is not a size", "use a number with a unit, like 500m or 2g")
    return value
