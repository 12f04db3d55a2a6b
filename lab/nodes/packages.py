"""The nodes' own packages (`lab up --requirements/--pip`): resolved on this host, installed offline as a layer.

pip resolves the requirements for the nodes' Python and platform (not the host's) with the nodes' torch as a
constraint, and downloads every wheel into the lab's wheelhouse: nodes never reach a registry. The wheels are then
installed, with no network, in a container of the node image (or any base image) whose commit is the layer,
`lab-pkgs:<hash of the base, the interpreter and the resolved set>`. A resolution is remembered by the exact
inputs it came from (the lines, the files they name, the target, torch), so an unchanged `lab up` asks the engine
one question and runs no pip.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

from lab import paths
from lab.errors import ImageError
from lab.model.requirements import looks_local
from lab.nodes.bootstrap import Progress, logged_failure, run_logged
from lab.nodes.driver import engine_errors
from lab.nodes.image import Target, _link_or_copy, host_arch, install_and_commit, wheelhouse_dir
from lab.nodes.labels import LABEL_PREFIX

LAYER_REPOSITORY = "lab-pkgs"
# uv installs the layer: 4.8 s where pip took 10.6 s for Lightning + Accelerate + Transformers, .pyc included
# (bench/RESULTS.md). Its musllinux wheel holds a static binary that runs in any image of the nodes' architecture;
# it comes through the wheelhouse like any wheel and is only mounted, never part of the layer.
UV_VERSION = "0.13.9"
BUILT_FOLDER = "built-here"  # in the wheelhouse: wheels built on this host from source-only packages
SOURCE_BUILDS = 5  # at most this many source-only packages in one resolution
LAYER_MOUNT = "/tmp/lab-packages"  # where the install container sees the resolved wheels (read-only)
NODE_PYTHON = "/opt/lab-venv/bin/python"  # the node image's interpreter (docker/install-venv.sh)
REQUIREMENTS_LABEL = f"{LABEL_PREFIX}.image.requirements"
# What pip prints for each wheel a download ends with, new or already in the folder.
DOWNLOADED = re.compile(r"^(?:Saved|File was already downloaded) (?P<path>\S+\.whl)\s*$")
NO_DISTRIBUTION = re.compile(r"No matching distribution found for (?P<requirement>\S+)")
INVALID_REQUIREMENT = re.compile(r"Invalid requirement: '(?P<requirement>[^']*)'")
# "    torchvision 0.15.1 depends on torch==2.0.0" in the block after "The conflict is caused by:".
DEPENDS = re.compile(r"^\s*(?P<name>\S+) (?P<version>\S+) depends on (?P<wants>(?P<dep>[A-Za-z0-9._-]+)\S*)")
REQUESTED = re.compile(r"^\s*The user requested (?:\(constraint\) )?(?P<wants>\S+)")


@dataclass(frozen=True)
class Resolution:
    """What a set of requirements came to for one target: every wheel file, by name, in the wheelhouse."""

    wheels: tuple[str, ...]
    notes: tuple[str, ...] = ()  # what a person should know of the choice (an old version picked for its wheel)

    def pins(self) -> list[str]:
        """'name==version' of every wheel, for an install that takes exactly these."""
        from packaging.utils import parse_wheel_filename

        return [f"{name}=={version}" for name, version, *_ in map(parse_wheel_filename, self.wheels)]

    def layer_tag(self, base_tag: str, python: str) -> str:
        digest = hashlib.sha256(json.dumps([base_tag, python, sorted(self.wheels)]).encode()).hexdigest()[:12]
        return f"{LAYER_REPOSITORY}:{digest}"


def resolution_key(requirements: tuple[str, ...], target: Target, torch: str) -> str:
    """Names a resolution by everything it depends on, local files by size and time (a rebuilt wheel differs)."""
    local = []
    for line in requirements:
        for word in line.split():
            path = Path(word)
            if (looks_local(word) or line.startswith("-")) and path.is_absolute() and path.exists():
                stat = path.stat()
                local.append([word, stat.st_size, stat.st_mtime_ns])
    inputs = [list(requirements), local, list(target.python), target.platforms(), torch]
    return hashlib.sha256(json.dumps(inputs).encode()).hexdigest()[:16]


def _resolutions_dir() -> Path:
    return paths.cache_dir() / "resolutions"


def cached_resolution(requirements: tuple[str, ...], target: Target, torch: str) -> Resolution | None:
    """The resolution these exact inputs came to before, if its wheels are all still in the wheelhouse."""
    record = _resolutions_dir() / f"{resolution_key(requirements, target, torch)}.json"
    try:
        saved = json.loads(record.read_text())
        wheels, notes = tuple(saved["wheels"]), tuple(saved.get("notes", ()))
    except (OSError, ValueError, KeyError):
        return None
    house = wheelhouse_dir()
    return Resolution(wheels, notes) if all((house / wheel).is_file() for wheel in wheels) else None


def resolve(requirements: tuple[str, ...], target: Target, torch: str, progress: Progress) -> Resolution:
    """Resolve and download `requirements` for `target` with torch held at `torch`, on this host; remembered."""
    cached = cached_resolution(requirements, target, torch)
    if cached is not None:
        return cached
    house = wheelhouse_dir()
    house.mkdir(parents=True, exist_ok=True)
    paths.logs_dir().mkdir(parents=True, exist_ok=True)
    key = resolution_key(requirements, target, torch)
    log_path = paths.logs_dir() / f"packages-{key}.log"
    with tempfile.TemporaryDirectory(prefix="lab-requirements-") as work, log_path.open("w") as log:
        (Path(work) / "requirements.txt").write_text("\n".join(requirements) + "\n")
        (Path(work) / "constraints.txt").write_text(f"torch=={torch}\n")
        progress(f"resolving {len(requirements)} requirement(s) for the nodes ({target.describe()}, torch {torch})")
        command = [sys.executable, "-m", "pip", "download", "--dest", str(house), "--progress-bar", "off",
                   "--disable-pip-version-check", *target.pip_args(), "-r", f"{work}/requirements.txt",
                   "-c", f"{work}/constraints.txt"]
        wheels: list[str] = []

        def line(text: str) -> None:
            found = DOWNLOADED.match(text.strip())
            if found:
                wheels.append(Path(found.group("path")).name)
            if not text.startswith("WARNING: Location"):  # pip's note on each configured index lacking the name
                progress(text.strip())

        status, tail = run_logged(command, log, line)
        built, tried = house / BUILT_FOLDER, set()
        for _ in range(SOURCE_BUILDS):
            source_only = _source_only(tail) if status != 0 else None
            if source_only is None or source_only in tried:
                break
            tried.add(source_only)
            build_wheel(source_only, target, torch, built, work, log, log_path, progress)
            if "--find-links" not in command:
                command += ["--find-links", str(built)]
            wheels.clear()
            status, tail = run_logged(command, log, line)
        if status != 0:
            raise resolution_error(_failure_text(log_path), torch, target, log_path) or \
                logged_failure(f"pip could not resolve the requirements for {target.describe()}", tail, log_path, house)
    chosen = tuple(sorted(set(wheels)))
    resolution = Resolution(chosen, tuple(older_than_published(requirements, chosen)))
    _resolutions_dir().mkdir(parents=True, exist_ok=True)
    (_resolutions_dir() / f"{key}.json").write_text(json.dumps({"requirements": list(requirements), "torch": torch,
                                                               "wheels": list(resolution.wheels),
                                                               "notes": list(resolution.notes)}, indent=1))
    return resolution


def older_than_published(requirements: tuple[str, ...], wheels: tuple[str, ...]) -> list[str]:
    """A requirement left open ('deepspeed', not 'deepspeed==0.19.8') that pip met with an older version than the
    index's newest: the newer ones have no wheel for the nodes (pip then goes back to the newest that has one,
    DeepSpeed 0.3.1 of 2020). Said, not changed: pinning the newest has it built here."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name, parse_wheel_filename
    from packaging.version import InvalidVersion, Version

    chosen = {name: version for name, version, *_ in map(parse_wheel_filename, wheels)}
    notes = []
    for line in requirements:
        if line.startswith("-") or looks_local(line):
            continue
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        if name == "torch" or name not in chosen or any(spec.operator in ("==", "===") for spec in requirement.specifier):
            continue
        try:
            newest = Version(_newest_on_index(name) or "0")
        except InvalidVersion:
            continue
        if newest > chosen[name] and requirement.specifier.contains(newest, prereleases=True):
            notes.append(f"{requirement.name} {chosen[name]} was chosen: its newest, {newest}, has no wheel for the "
                         f"nodes; ask for {requirement.name}=={newest} to have it built here from its source")
    return notes


def _newest_on_index(name: str) -> str | None:
    """The newest release the index has of `name`, wheels or sources: pip's 'NAME (VERSION)'."""
    result = subprocess.run([sys.executable, "-m", "pip", "index", "versions", name, "--disable-pip-version-check"],
                            capture_output=True, text=True, stdin=subprocess.DEVNULL)
    found = re.search(rf"^{re.escape(name)} \((?P<version>[^)]+)\)", result.stdout, re.IGNORECASE | re.MULTILINE)
    return found["version"] if result.returncode == 0 and found else None


def _source_only(tail: list[str]) -> str | None:
    """The requirement pip found no wheel of, when the index has it (as a source archive): one to build here."""
    missing = next((found for text in reversed(tail) if (found := NO_DISTRIBUTION.search(text))), None)
    if missing is None:
        return None
    requirement = missing.group("requirement")
    name = re.split(r"[<>=!~\[;@ ]", requirement, maxsplit=1)[0]
    return requirement if name.lower() != "torch" and _on_index(name) else None


def build_wheel(requirement: str, target: Target, torch: str, built: Path, work: str, log, log_path: Path,
                progress: Progress) -> Path:
    """A wheel of `requirement` built on this host from its source archive, kept only if the nodes can install it
    (pure Python, or tags their interpreter takes). Built in the lab's own Python without isolation: a build that
    imports torch (DeepSpeed's does) finds it, instead of fetching one."""
    progress(f"{requirement}: no wheel on the index, building one here from its source archive")
    staging = Path(work) / "built"
    shutil.rmtree(staging, ignore_errors=True)
    status, tail = run_logged([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                               "--disable-pip-version-check", "--progress-bar", "off", "-w", str(staging),
                               "-c", f"{work}/constraints.txt", requirement], log, progress)
    made = sorted(staging.glob("*.whl"))
    if status != 0 or not made:
        raise ImageError(f"{requirement} has no wheel for the nodes, and building one here from its source failed: "
                         f"{(tail or ['no output'])[-1][:200]}",
                         "its build may need more than this host has (a compiler, build packages in lab's Python): "
                         f"build the wheel yourself and pass the .whl file; pip's whole answer: {log_path}")
    from packaging.utils import parse_wheel_filename

    wheel = made[0]
    if not set(parse_wheel_filename(wheel.name)[3]) & set(target.tags()):
        raise ImageError(f"{requirement} has no wheel for the nodes ({target.describe()}); built here from source it "
                         f"is {wheel.name}, for this host only", "build it on a machine like the nodes and pass the "
                         ".whl file, or pick a version that ships wheels")
    built.mkdir(parents=True, exist_ok=True)
    shutil.move(wheel, built / wheel.name)
    return built / wheel.name


def _failure_text(log_path: Path) -> str:
    try:
        return log_path.read_text(errors="replace")
    except OSError:
        return ""


def resolution_error(output: str, torch: str, target: Target, log_path: Path) -> ImageError | None:
    """pip's failure as one line naming the package: a torch the nodes do not run, a conflict, an unknown
    package, a package with no wheel for the nodes. None when the output says none of these."""
    lines = output.splitlines()
    if "The conflict is caused by:" in output:
        start = lines.index(next(l for l in lines if "The conflict is caused by:" in l)) + 1
        causes = []
        for text in lines[start:]:
            if not text.strip():
                break
            causes.append(text.strip())
        wants_torch = [m for m in map(DEPENDS.match, causes) if m and m.group("dep").lower() == "torch"]
        if wants_torch:
            first = wants_torch[0]
            return ImageError(
                f"{first.group('name')} {first.group('version')} needs {first.group('wants')}, but the nodes run "
                f"torch {torch}",
                f"choose a version of {first.group('name')} that supports torch {torch}, or add torch==VERSION to the "
                "requirements to build the nodes with that torch")
        named = [m.group("name") for m in map(DEPENDS.match, causes) if m]
        requested = [m.group("wants") for m in map(REQUESTED.match, causes) if m and "(constraint)" not in m.group(0)]
        asked_torch = [wants for wants in requested if re.match(r"torch\b(?![-_.\w])", wants, re.IGNORECASE)]
        if asked_torch:
            return ImageError(f"the requirements ask for {asked_torch[0]}, but the nodes run torch {torch}",
                              "pin the torch the cluster runs with torch==VERSION: the nodes are then built with it")
        return ImageError(f"the requirements conflict: {'; '.join(causes)[:400]}",
                          f"loosen the pins of {', '.join(dict.fromkeys(named + requested)) or 'the packages named'}; "
                          f"pip's whole answer: {log_path}")
    invalid = INVALID_REQUIREMENT.search(output)
    if invalid:
        return ImageError(f"'{invalid.group('requirement')}' is not a requirement pip understands",
                          "write it as pip does, e.g. 'lightning==2.5.1' or 'transformers>=4.40'")
    missing = NO_DISTRIBUTION.search(output)
    if missing:
        requirement = missing.group("requirement")
        name = re.split(r"[<>=!~\[;@ ]", requirement, maxsplit=1)[0]
        if name.lower() == "torch":
            return ImageError(f"no torch {torch} wheel for the nodes ({target.describe()})",
                              "pin a torch version that has a wheel for Linux on this CPU, e.g. torch==2.13.0")
        if _on_index(name):
            return ImageError(f"{requirement} has no wheel for the nodes ({target.describe()}): only a source "
                              "archive, or none of its versions match",
                              f"build a wheel on this host (`pip wheel '{requirement}' --no-deps -w wheels/`) and pass "
                              "the .whl file, or pick a version that ships wheels")
        return ImageError(f"package '{name}' was not found on the package index",
                          f"check its name: `pip index versions {name}` on this host says the same")
    return None


def _on_index(name: str) -> bool:
    """Whether the package index knows `name` at all (in any form, wheels or sources)."""
    result = subprocess.run([sys.executable, "-m", "pip", "index", "versions", name, "--disable-pip-version-check"],
                            capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return result.returncode == 0 and "Available versions" in result.stdout


def ensure_layer(client: docker.DockerClient, base_tag: str, python: str, resolution: Resolution,
                 requirements: tuple[str, ...], progress: Progress, installer: str = "uv") -> str:
    """`lab-pkgs:<hash>`: `resolution` installed with `python` on `base_tag`, unless the engine has it already.
    `installer` 'pip' is for measuring uv against it (`lab bench --only packages`)."""
    tag = resolution.layer_tag(base_tag, python)
    with engine_errors("build the packages layer"):
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.get(tag)
            return tag
        log_path = paths.logs_dir() / f"packages-layer-{tag.replace(':', '-')}.log"
        paths.logs_dir().mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="packages-layer-", dir=paths.cache_dir()))
        try:
            for wheel in resolution.wheels:
                _link_or_copy(wheelhouse_dir() / wheel, work / wheel)
            with log_path.open("w") as log:
                progress(f"installing {len(resolution.wheels)} wheel(s) into {base_tag} as {tag} (log: {log_path})")
                _install(client, base_tag, tag, python, work, resolution, requirements, log, log_path, progress,
                         installer)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return tag


def uv_binary(log, progress: Progress) -> Path | None:
    """uv for the nodes' architecture (the static binary of its musllinux wheel), downloaded into the wheelhouse
    once and kept unpacked in the cache; None where there is none (pip installs then)."""
    arch = host_arch()
    binary = paths.cache_dir() / "uv" / f"{UV_VERSION}-{arch}" / "uv"
    if binary.is_file():
        return binary
    house = wheelhouse_dir()
    house.mkdir(parents=True, exist_ok=True)
    progress(f"downloading uv {UV_VERSION} for the nodes ({arch}) into {house}")
    status, _ = run_logged([sys.executable, "-m", "pip", "download", "--dest", str(house), "--no-deps",
                            "--only-binary=:all:", "--platform", f"musllinux_1_1_{arch}", "--python-version", "3.11",
                            "--implementation", "py", "--progress-bar", "off", "--disable-pip-version-check",
                            f"uv=={UV_VERSION}"], log, lambda text: None)
    wheel = next(iter(sorted(house.glob(f"uv-{UV_VERSION}-*musllinux*_{arch}.whl"))), None)
    if status != 0 or wheel is None:
        log.write(f"no uv {UV_VERSION} wheel for {arch}: installing with pip\n")
        return None
    with zipfile.ZipFile(wheel) as archive:
        member = next((name for name in archive.namelist() if name.endswith(".data/scripts/uv")), None)
        if member is None:
            return None
        binary.parent.mkdir(parents=True, exist_ok=True)
        partial = binary.with_suffix(".partial")
        partial.write_bytes(archive.read(member))
        partial.chmod(0o755)
        partial.replace(binary)
    return binary


def _install(client: docker.DockerClient, base_tag: str, tag: str, python: str, mounted: Path,
             resolution: Resolution, requirements: tuple[str, ...], log, log_path: Path, progress: Progress,
             installer: str) -> None:
    """uv (else pip) install, offline, as root in a container of `base_tag` (its entrypoint bypassed); committed as
    `tag` with the base's command, entrypoint and user kept."""
    config = client.images.get(base_tag).attrs["Config"]
    pip = [python, "-m", "pip", "install", "--no-index", "--find-links", LAYER_MOUNT, "--disable-pip-version-check",
           "--no-cache-dir", "--progress-bar", "off", *resolution.pins()]
    uv = uv_binary(log, progress) if installer == "uv" else None
    if uv is None:
        command = pip
    else:
        _link_or_copy(uv, mounted / "uv")
        # --break-system-packages: an image's own system Python (PEP 668's marker, as Debian's) is the interpreter the
        # user asked the packages for; the layer is the lab's, the image is not changed.
        with_uv = [f"{LAYER_MOUNT}/uv", "pip", "install", "--python", python, "--break-system-packages", "--offline",
                   "--no-index", "--no-config", "--find-links", LAYER_MOUNT, "--no-cache", "--link-mode", "copy",
                   "--compile-bytecode", "--no-progress", *resolution.pins()]
        # An interpreter uv cannot install into gets pip's install instead.
        command = ["/bin/sh", "-c", f"{shlex.join(with_uv)} || {{ echo 'uv failed: installing with pip'; "
                                    f"{shlex.join(pip)}; }}"]
    changes = [f"CMD {json.dumps(config.get('Cmd') or [])}", f"ENTRYPOINT {json.dumps(config.get('Entrypoint') or [])}",
               f"USER {config.get('User') or 'root'}", f"LABEL {REQUIREMENTS_LABEL}={json.dumps(' '.join(requirements))}"]
    install_and_commit(client, base_tag, command, tag, mounted, LAYER_MOUNT, changes,
                       "installing the requirements into the nodes' image", log, log_path, progress,
                       entrypoint=[], user="0")
