"""The nodes' extra packages as the lab's spec holds them: plain requirement lines, every file read and every path
made absolute, so two specs are equal exactly when they ask for the same thing.

`lab up --requirements FILE` and `--pip SPEC` both end here. Includes (`-r`, `-c`) are expanded in place and a
local wheel or folder named relative to its file becomes absolute; everything else is kept as pip spells it and is
checked by pip itself when the lab resolves it (lab/nodes/packages.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from lab.errors import SpecError

INCLUDE_OPTIONS = ("-r", "--requirement", "-c", "--constraint")
PATH_OPTIONS = ("-f", "--find-links")
# Options pip accepts in a requirements file that change where it looks; kept (paths absolute) for the resolver.
PASSED_OPTIONS = ("-f", "--find-links", "-i", "--index-url", "--extra-index-url", "--pre", "--prefer-binary")
LOCAL_SUFFIXES = (".whl", ".zip", ".tar.gz", ".tgz")
MAX_INCLUDE_DEPTH = 10


def read_requirements(path: str | Path, _depth: int = 0) -> list[str]:
    """The requirement lines of a pip requirements file, includes expanded, local paths absolute."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise SpecError(f"--requirements '{path}' is not a file", "give the path of a pip requirements file")
    if _depth > MAX_INCLUDE_DEPTH:
        raise SpecError(f"{file}: includes nest deeper than {MAX_INCLUDE_DEPTH} (an include loop?)",
                        "check the -r lines of your requirements files")
    try:
        text = file.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(f"cannot read --requirements '{path}': {error}", "give a readable text file") from None
    lines: list[str] = []
    for number, raw in enumerate(_logical_lines(text), start=1):
        line = _strip_comment(raw).strip()
        if not line:
            continue
        option, _, value = line.replace("=", " ", 1).partition(" ") if line.startswith("-") else (line, "", "")
        value = value.strip()
        if line.startswith("-") and option in INCLUDE_OPTIONS:
            included = file.parent / value
            if option in ("-c", "--constraint"):
                lines += [f"-c {included.resolve()}"]
            else:
                lines += read_requirements(included, _depth + 1)
        elif line.startswith("-") and option in PATH_OPTIONS:
            lines.append(f"{option} {_absolute(value, file.parent)}")
        elif line.startswith("-"):
            if option not in PASSED_OPTIONS:
                raise SpecError(f"{file}:{number}: option '{option}' is not supported in the lab's requirements",
                                f"use requirement lines and {', '.join(PASSED_OPTIONS)}")
            lines.append(line)
        else:
            lines.append(normalise_requirement(line, file.parent, f"{file}:{number}"))
    return lines


def normalise_requirement(text: str, folder: Path, where: str) -> str:
    """One requirement: a local file or folder made absolute, else checked as a PEP 508 requirement."""
    from packaging.requirements import InvalidRequirement, Requirement  # packaging loads only for labs with packages

    text = text.strip()
    if looks_local(text):
        local = Path(_absolute(text, folder))
        if not local.exists():
            raise SpecError(f"{where}: '{text}' is not a file here", "give the path of a wheel (.whl) on this host")
        return str(local)
    try:
        Requirement(text)
    except InvalidRequirement as error:
        raise SpecError(f"{where}: '{text}' is not a requirement ({str(error).splitlines()[0]})",
                        "write it as pip does, e.g. 'lightning==2.5.1', 'transformers>=4.40' or 'accelerate[testing]'") from None
    return text


def looks_local(text: str) -> bool:
    """A wheel, archive or folder on this host rather than a name from an index."""
    if "://" in text or " @ " in text:
        return False
    return (text.startswith((".", "/", "~")) or os.sep in text.split(";")[0].split("[")[0]
            or text.endswith(LOCAL_SUFFIXES))


def requirement_lines(files: tuple[str, ...], specs: tuple[str, ...]) -> tuple[str, ...]:
    """`--requirements FILE ...` and `--pip SPEC ...` as the spec's lines: files first, then the specs, no repeats."""
    lines: list[str] = []
    for file in files:
        lines += read_requirements(file)
    for spec in specs:
        lines.append(normalise_requirement(spec, Path.cwd(), f"--pip '{spec}'"))
    return tuple(dict.fromkeys(lines))


def requirement_names(lines: tuple[str, ...] | list[str]) -> list[str]:
    """The project names the lines ask for: by name, or by a local wheel's file name (options name none)."""
    if not lines:
        return []
    from packaging.requirements import Requirement
    from packaging.utils import parse_wheel_filename

    names = []
    for line in lines:
        if line.startswith("-"):
            continue
        if looks_local(line):
            if line.endswith(".whl"):  # a wheel's file name starts with its project's name
                names.append(parse_wheel_filename(Path(line).name)[0])
            continue
        names.append(Requirement(line).name)
    return names


def pinned_torch(lines: tuple[str, ...] | list[str]) -> str | None:
    """The version a line pins torch to with '==' (the torch the cluster runs), else None."""
    from packaging.requirements import Requirement

    for line in lines:
        if line.startswith("-") or looks_local(line):
            continue
        requirement = Requirement(line)
        if requirement.name.lower() == "torch":
            exact = [spec.version for spec in requirement.specifier if spec.operator in ("==", "===")]
            if exact and "*" not in exact[0]:
                return exact[0]
    return None


def _absolute(value: str, folder: Path) -> str:
    if "://" in value:
        return value
    return str((folder / Path(value).expanduser()).resolve())


def _logical_lines(text: str) -> list[str]:
    """Lines with pip's backslash continuations joined."""
    joined, pending = [], ""
    for line in text.splitlines():
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        joined.append(pending + line)
        pending = ""
    if pending:
        joined.append(pending)
    return joined


def _strip_comment(line: str) -> str:
    """pip's rule: '#' starts a comment at the start of a line or after whitespace."""
    if line.lstrip().startswith("#"):
        return ""
    for index, char in enumerate(line):
        if char == "#" and index and line[index - 1].isspace():
            return line[:index]
    return line
