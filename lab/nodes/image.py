"""The node image: named after its inputs, built once, and installed offline from a local wheelhouse.

The tag is a hash of everything that goes into the image (Dockerfile, pinned requirements, target
Python and platform, base reference), computed without pip or the network, so a warm `lab up`
only asks the engine whether that tag exists. A cold build resolves a Debian base (local, pulled,
or debootstrapped), downloads the wheels on the host, and builds with no network inside the build.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Protocol, TextIO

import docker
import docker.errors
import requests.exceptions
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from lab import paths
from lab.lines import STDOUT, LineAssembler
from lab.nodes.bootstrap import (BASE_TAG, TAIL_LINES, Progress, bootstrap_base, log_lines, logged_failure,
                                 run_logged)
from lab.nodes.driver import engine_errors
from lab.errors import ImageError
from lab.nodes.labels import LABEL_PREFIX

DOCKERFILE = paths.resource("docker") / "Dockerfile"  # the system part: Debian, sshd, tc
INSTALL_SCRIPT = paths.resource("docker") / "install-venv.sh"  # the venv, run in a container of the system part
INSTALL_MOUNT = "/tmp/lab-image-build"  # where that container sees the script and the wheelhouse (read-only)
BUILD_CONTAINER_PREFIX = "lab-image-build-"  # + the tag's hash: one name per build, so a crashed one is found
IMAGE_REPOSITORY = "lab-node"
CONFIGURED_BASE = "debian:bookworm-slim"
# Names older than manylinux_2_X, by the glibc minor each stands for; the two oldest exist for Intel only.
LEGACY_MANYLINUX = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
INTEL_ONLY_LEGACY = {"manylinux2010", "manylinux1"}

Pins = dict[str, str | None]


def host_arch() -> str:
    """The engine's CPU architecture as wheel tags spell it (the host's: engines run native images)."""
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


@dataclass(frozen=True)
class Target:
    """The interpreter and platform the node image runs wheels on: Debian bookworm's."""

    python: tuple[int, int] = (3, 11)
    glibc: tuple[int, int] = (2, 36)
    arch: str = field(default_factory=host_arch)

    def platforms(self) -> list[str]:
        """manylinux platform tags the image accepts, most specific first."""
        found = []
        for minor in range(self.glibc[1], 4, -1):
            found.append(f"manylinux_{self.glibc[0]}_{minor}_{self.arch}")
            legacy = LEGACY_MANYLINUX.get(minor)
            if legacy and (legacy not in INTEL_ONLY_LEGACY or self.arch in ("x86_64", "i686")):
                found.append(f"{legacy}_{self.arch}")
        return found

    def tags(self) -> list[Tag]:
        """Wheel tags the image's interpreter accepts, in pip's order of preference."""
        abi = f"cp{self.python[0]}{self.python[1]}"
        return [*cpython_tags(self.python, [abi], self.platforms()),
                *compatible_tags(self.python, abi, self.platforms())]

    def pip_args(self) -> list[str]:
        """`pip download` options that fetch wheels for this target whatever Python runs pip."""
        args = ["--only-binary=:all:", "--implementation", "cp", "--python-version", "%d.%d" % self.python,
                "--abi", "cp%d%d" % self.python]
        for name in self.platforms():
            args += ["--platform", name]
        return args

    def describe(self) -> str:
        """For messages: 'Python 3.11, manylinux x86_64'."""
        return f"Python {self.python[0]}.{self.python[1]}, manylinux {self.arch}"


TARGET = Target()


def host_pins() -> Pins:
    """torch at the host's version (the nodes must match it), numpy at the host's when it has one."""
    try:
        torch = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        raise ImageError("torch is not installed for this Python, so the node image has no version to match",
                         "run `make setup`, which installs torch and lab into .venv") from None
    try:
        numpy = importlib.metadata.version("numpy")
    except importlib.metadata.PackageNotFoundError:
        numpy = None
    return {"torch": torch, "numpy": numpy}


def node_pins(torch: str | None = None) -> Pins:
    """The node image's pins: the host's, with torch at `torch` when the lab's requirements pin another one."""
    pins = host_pins()
    return {**pins, "torch": torch} if torch else pins


def requirement_lines(pins: Pins) -> list[str]:
    return [f"{name}=={version}" if version else name for name, version in pins.items()]


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def node_image_tag(pins: Pins | None = None) -> str:
    """`lab-node:<hash>` of everything that goes into the node image; milliseconds, no pip, no network."""
    inputs = {
        "dockerfile": DOCKERFILE.read_text(),
        "install_script": INSTALL_SCRIPT.read_text(),
        "requirements": requirement_lines(pins or host_pins()),
        "python": list(TARGET.python),
        "platforms": TARGET.platforms(),
        "base": CONFIGURED_BASE,
    }
    return f"{IMAGE_REPOSITORY}:{_digest(inputs)}"


# --- base resolution ---------------------------------------------------------------------------
class PullFailed(Exception):
    """The engine could not pull an image: no registry reachable, or no such image."""


class BaseEngine(Protocol):
    """What base resolution needs from an engine; a fake in the unit tests."""

    def has_image(self, ref: str) -> bool: ...
    def pull(self, ref: str) -> None: ...
    def bootstrap(self, on_progress: Progress) -> str: ...


class DockerBaseEngine:
    """BaseEngine over the Docker SDK."""

    def __init__(self, client: docker.DockerClient):
        self.client = client

    def has_image(self, ref: str) -> bool:
        try:
            self.client.images.get(ref)
        except docker.errors.ImageNotFound:
            return False
        return True

    def pull(self, ref: str) -> None:
        repository, _, tag = ref.partition(":")
        try:
            self.client.images.pull(repository, tag=tag or "latest")
        except (docker.errors.APIError, requests.exceptions.ReadTimeout) as error:
            text = getattr(error, "explanation", None) or str(error)
            raise PullFailed(text.splitlines()[0] if text else type(error).__name__) from None

    def bootstrap(self, on_progress: Progress) -> str:
        return bootstrap_base(self.client, on_progress)


def resolve_base(engine: BaseEngine, on_progress: Progress) -> str:
    """The base image to build on: a local Debian image, else a pulled one, else a bootstrapped one."""
    for ref in (CONFIGURED_BASE, BASE_TAG):
        if engine.has_image(ref):
            on_progress(f"base image: {ref} (local)")
            return ref
    on_progress(f"pulling {CONFIGURED_BASE}")
    try:
        engine.pull(CONFIGURED_BASE)
    except PullFailed as error:
        on_progress(f"cannot pull {CONFIGURED_BASE} ({error}); building a base with debootstrap instead")
        return engine.bootstrap(on_progress)
    on_progress(f"base image: {CONFIGURED_BASE} (pulled)")
    return CONFIGURED_BASE


def ensure_base(client: docker.DockerClient, on_progress: Progress) -> str:
    """The base image, resolved (and bootstrapped if need be) ahead of a build: it needs nothing of torch or pip,
    so `make` runs it while torch installs on the host."""
    with engine_errors("prepare the node image's base"):
        return resolve_base(DockerBaseEngine(client), on_progress)


# --- wheelhouse ------------------------------------------------------------------------------
def wheelhouse_dir() -> Path:
    return paths.cache_dir() / "wheelhouse"


def select_wheels(filenames: list[str], pins: Pins, tags: list[Tag]) -> dict[str, str]:
    """Project -> the wheel file that goes into the build context.

    One wheel per project: the pinned version for pinned projects, else the newest; among wheels of
    that version, the one whose tag the target prefers. Wheels the target cannot install are skipped.
    """
    rank = {tag: index for index, tag in enumerate(tags)}
    wanted = {canonicalize_name(name): SpecifierSet(f"=={version}") for name, version in pins.items() if version}
    best: dict[str, tuple] = {}
    for filename in filenames:
        try:
            name, version, _, file_tags = parse_wheel_filename(filename)
        except InvalidWheelFilename:
            continue
        ranks = [rank[tag] for tag in file_tags if tag in rank]
        if not ranks or (name in wanted and not wanted[name].contains(version, prereleases=True)):
            continue
        key = (version, -min(ranks))
        if name not in best or key > best[name][0]:
            best[name] = (key, filename)
    return {name: filename for name, (_, filename) in best.items()}


def fill_wheelhouse(pins: Pins, target: Target, log: TextIO, log_path: Path, on_progress: Progress) -> list[Path]:
    """The wheels to install, downloaded by the host's pip unless an earlier download already holds them."""
    house = wheelhouse_dir()
    house.mkdir(parents=True, exist_ok=True)
    requirements = requirement_lines(pins)
    # Marks a finished download of these requirements: their dependencies are in the wheelhouse too.
    complete = house / f".complete-{_digest([requirements, list(target.python), target.platforms()])}"

    def selection() -> tuple[dict[str, str], set[str]]:
        selected = select_wheels(os.listdir(house), pins, target.tags())
        return selected, {canonicalize_name(name) for name in pins} - selected.keys()

    selected, missing = selection()
    if complete.exists() and not missing:
        on_progress(f"wheelhouse already holds {' '.join(requirements)}")
    else:
        on_progress(f"downloading wheels for {' '.join(requirements)} ({target.describe()}) into {house}")
        command = [sys.executable, "-m", "pip", "download", "--dest", str(house), "--progress-bar", "off",
                   "--disable-pip-version-check", *target.pip_args(), *requirements]
        status, tail = run_logged(command, log, on_progress)
        if status != 0:
            raise logged_failure(f"pip could not download {' '.join(requirements)} for {target.describe()}",
                                 tail, log_path, house)
        selected, missing = selection()
        if missing:
            raise ImageError(f"pip finished but the wheelhouse has no {target.describe()} wheel of {', '.join(sorted(missing))}",
                             f"look at what pip chose in {log_path}")
        complete.touch()
    return [house / filename for filename in sorted(selected.values())]


# --- build -----------------------------------------------------------------------------------
def _engine_disk(client: docker.DockerClient) -> Path | None:
    """Where the engine keeps images, when that is on this host (not in a VM)."""
    root = Path(client.info().get("DockerRootDir") or "/nonexistent")
    return root if root.exists() else None


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def stream_build(client: docker.DockerClient, context: Path, tag: str | None, buildargs: dict[str, str],
                 labels: dict[str, str], nocache: bool, log: TextIO, log_path: Path, on_progress: Progress,
                 what: str = "the node image") -> str:
    """Build the Dockerfile in `context` (as `tag`, if one is given), its output to `log` and `on_progress`.

    Returns the image's ID; an ImageError if the build fails.
    """
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    error = image_id = None
    try:
        stream = client.api.build(path=str(context), tag=tag, decode=True, rm=True, forcerm=True, pull=False,
                                  nocache=nocache, buildargs=buildargs, labels=labels)
        for chunk in stream:
            if "error" in chunk:
                error = chunk["error"].strip()
            image_id = (chunk.get("aux") or {}).get("ID") or image_id
            for line in (chunk.get("error") or chunk.get("stream") or "").splitlines():
                log.write(line + "\n")
                if line.strip():
                    tail.append(line.strip())
                    on_progress(line.strip())
    except docker.errors.APIError as refusal:
        raise ImageError(f"Docker refused to build {what}: {refusal.explanation or refusal}",
                         f"check `docker info` and the engine's log; full log: {log_path}") from None
    if error:
        raise logged_failure(f"{what} build failed: {error.splitlines()[-1][:300]}", list(tail),
                             log_path, _engine_disk(client))
    if image_id is None:
        raise ImageError(f"the engine built {what} but did not say its ID", f"full log: {log_path}")
    return image_id


def _output_lines(container) -> Iterator[str]:
    """A running container's output (stdout and stderr), line by line, until it exits."""
    assembler = LineAssembler()
    for chunk in container.logs(stream=True, follow=True):
        yield from assembler.feed(STDOUT, chunk)
    yield from assembler.close()


def install_and_commit(client: docker.DockerClient, image: str, command: list[str], tag: str, mounted: Path,
                       mount_point: str, changes: list[str], what: str, log: TextIO, log_path: Path,
                       on_progress: Progress, **create) -> None:
    """Run `command` in a container of `image` (no network, `mounted` read-only at `mount_point`), its output to the
    log and `on_progress`, then commit that container as `tag` with `changes`. A container left by a killed build of
    the same tag is replaced first; the container is removed however it ends."""
    name = BUILD_CONTAINER_PREFIX + tag.partition(":")[2]
    with contextlib.suppress(docker.errors.NotFound):  # left by a build that was killed
        client.containers.get(name).remove(force=True)
    container = client.containers.create(image, command, name=name, network_mode="none",
                                         volumes={str(mounted): {"bind": mount_point, "mode": "ro"}}, **create)
    try:
        container.start()
        tail = log_lines(_output_lines(container), log, on_progress)
        status = container.wait()["StatusCode"]
        if status != 0:
            raise logged_failure(f"{what} failed (exit {status})", tail, log_path, _engine_disk(client))
        repository, _, version = tag.partition(":")
        container.commit(repository, version, changes=changes)
    finally:
        with contextlib.suppress(docker.errors.APIError):
            container.remove(force=True)


def install_venv(client: docker.DockerClient, system_image: str, tag: str, mounted: Path, requirements: list[str],
                 log: TextIO, log_path: Path, on_progress: Progress) -> None:
    """Run the install script in a container of `system_image` with `mounted` (script + wheelhouse) read-only,
    then commit that container as `tag`, keeping the system image's command (and its labels, which it inherits)."""
    command = client.images.get(system_image).attrs["Config"]["Cmd"]
    install_and_commit(client, system_image, ["sh", f"{INSTALL_MOUNT}/{INSTALL_SCRIPT.name}", *requirements], tag,
                       mounted, INSTALL_MOUNT, [f"CMD {json.dumps(command)}"], "installing torch into the node image",
                       log, log_path, on_progress)


def build_image(client: docker.DockerClient, tag: str, base: str, pins: Pins, wheels: list[Path],
                nocache: bool, log: TextIO, log_path: Path, on_progress: Progress) -> None:
    """The Dockerfile on `base` (no wheels in its context), then the venv from `wheels` in a container of it: `tag`."""
    work = Path(tempfile.mkdtemp(prefix="image-context-", dir=paths.cache_dir()))
    requirements = requirement_lines(pins)
    labels = {f"{LABEL_PREFIX}.image.base": base, f"{LABEL_PREFIX}.image.requirements": " ".join(requirements)}
    system_image = None
    try:
        (work / "system").mkdir()
        shutil.copy(DOCKERFILE, work / "system" / "Dockerfile")
        (work / "venv" / "wheelhouse").mkdir(parents=True)
        shutil.copy(INSTALL_SCRIPT, work / "venv" / INSTALL_SCRIPT.name)
        for wheel in wheels:
            _link_or_copy(wheel, work / "venv" / "wheelhouse" / wheel.name)
        system_image = stream_build(client, work / "system", None, {"BASE": base}, labels, nocache, log, log_path,
                                    on_progress)
        on_progress(f"installing {' '.join(requirements)} from the wheelhouse")
        install_venv(client, system_image, tag, work / "venv", requirements, log, log_path, on_progress)
        system_image = None  # the node image's parent now
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if system_image is not None:  # the install failed: nothing builds on it
            with contextlib.suppress(docker.errors.APIError):
                client.images.remove(system_image)


def ensure_node_image(client: docker.DockerClient, on_progress: Progress, rebuild: bool = False,
                      pins: Pins | None = None) -> str:
    """The node image's tag, building the image first unless the engine already has it (or `rebuild`).
    `pins`: the image's torch and numpy (default: the host's)."""
    pins = pins or host_pins()
    tag = node_image_tag(pins)
    with engine_errors("build the node image"):
        if not rebuild and DockerBaseEngine(client).has_image(tag):
            return tag
        started = time.monotonic()
        paths.logs_dir().mkdir(parents=True, exist_ok=True)
        paths.cache_dir().mkdir(parents=True, exist_ok=True)
        log_path = paths.logs_dir() / f"image-build-{tag.replace(':', '-')}.log"
        with log_path.open("w") as log:
            def progress(line: str) -> None:
                log.write(line + "\n")
                log.flush()
                on_progress(line)

            progress(f"building {tag} (log: {log_path})")
            # The base (debootstrap: Debian's mirror, dpkg) and the wheels (pip) need nothing of each other: at once.
            with ThreadPoolExecutor(max_workers=1) as pool:
                wheels_filled = pool.submit(fill_wheelhouse, pins, TARGET, log, log_path, on_progress)
                base = resolve_base(DockerBaseEngine(client), progress)
                wheels = wheels_filled.result()
            build_image(client, tag, base, pins, wheels, rebuild, log, log_path, on_progress)
            progress(f"built {tag} on {base} in {time.monotonic() - started:.0f} s")
    return tag
