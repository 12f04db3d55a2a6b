"""A Debian base image without a registry: mmdebstrap (else debootstrap) from the host's own apt mirror, then import.

mmdebstrap downloads with apt, all at once, and writes a tarball; debootstrap fetches one package after another into
a folder (bench/RESULTS.md, "The base image: mmdebstrap and debootstrap").

The last resort of the node image's base resolution, for engines that cannot pull. The mirror is
read from the host's apt sources at run time, so the repository names no mirror. Also home of the
logged-subprocess and failure helpers that the image build shares.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import docker

from lab import paths
from lab.errors import ImageError

Progress = Callable[[str], None]

# The node image targets bookworm's Python 3.11, so the base is bookworm whatever the host runs.
BASE_SUITE = "bookworm"
BASE_REPOSITORY = "lab-base"
BASE_TAG = f"{BASE_REPOSITORY}:{BASE_SUITE}"
BASE_PACKAGES = ("python3", "python3-venv", "openssh-server", "iproute2", "procps", "ca-certificates")
APT_DIR = Path("/etc/apt")
OS_RELEASE = Path("/etc/os-release")
MIRROR_SCHEMES = ("http://", "https://", "file:/")
# Suites that carry fixes on top of a release, not the release itself.
SIDE_SUITE = re.compile(r"-(security|updates|backports|proposed-updates|backports-sloppy)$")
# Left out of the imported tree: the engine provides these, and apt's downloads are dead weight.
TAR_EXCLUDES = ("./dev/*", "./proc/*", "./sys/*", "./var/cache/apt/archives/*.deb", "./var/lib/apt/lists/*_*")
TAIL_LINES = 20
IMPORT_CHUNK = 1 << 20


@dataclass(frozen=True)
class AptSource:
    """One `deb` entry of the host's apt sources (a deb822 stanza may hold several)."""

    uri: str
    suite: str
    components: tuple[str, ...]


def parse_one_line_sources(text: str) -> list[AptSource]:
    """Entries of a sources.list / *.list file: `deb [options] URI SUITE COMPONENT...`."""
    found = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        line = re.sub(r"\[[^\]]*\]", " ", line)  # [arch=amd64 signed-by=...]
        words = line.split()
        if len(words) >= 3 and words[0] == "deb":
            found.append(AptSource(words[1].rstrip("/"), words[2], tuple(words[3:])))
    return found


def parse_deb822_sources(text: str) -> list[AptSource]:
    """Entries of a deb822 *.sources file: stanzas of Types/URIs/Suites/Components fields."""
    found = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if line.startswith("#"):
                continue
            if line[:1].isspace() and key:
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, value = line.split(":", 1)
                key = key.strip().lower()
                fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
            continue
        components = tuple(fields.get("components", "").split())
        for uri in fields.get("uris", "").split():
            found.extend(AptSource(uri.rstrip("/"), suite, components) for suite in fields.get("suites", "").split())
    return found


def read_apt_sources(apt_dir: Path = APT_DIR) -> list[AptSource]:
    """Every `deb` entry the host's apt uses, in apt's reading order."""
    found = []
    main_list = apt_dir / "sources.list"
    if main_list.is_file():
        found += parse_one_line_sources(main_list.read_text(errors="replace"))
    parts = apt_dir / "sources.list.d"
    for part in sorted(parts.glob("*")) if parts.is_dir() else []:
        if part.suffix == ".list":
            found += parse_one_line_sources(part.read_text(errors="replace"))
        elif part.suffix == ".sources":
            found += parse_deb822_sources(part.read_text(errors="replace"))
    return found


def read_os_release(path: Path = OS_RELEASE) -> dict[str, str]:
    """/etc/os-release as a dict (ID, VERSION_CODENAME, ...); empty when missing."""
    if not path.is_file():
        return {}
    release = {}
    for line in path.read_text(errors="replace").splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            release[key.strip()] = value.strip().strip("\"'")
    return release


def choose_mirror(sources: list[AptSource], codename: str | None) -> str | None:
    """The host's main Debian archive: a `main` entry for the release itself, not security or updates.

    An entry for the host's own release (VERSION_CODENAME) wins over one for the base's suite, so
    that a host whose sources name both picks its primary archive; any Debian archive serves both.
    """
    candidates = [
        source for source in sources
        if source.uri.startswith(MIRROR_SCHEMES) and "main" in source.components
        and not SIDE_SUITE.search(source.suite) and "security" not in source.uri
    ]
    for wanted in (codename, BASE_SUITE):
        for source in candidates:
            if wanted and source.suite == wanted:
                return source.uri
    return None


def log_lines(lines: Iterable[str], log: TextIO, on_line: Progress) -> list[str]:
    """Copy `lines` to `log`, and those not blank to `on_line`; return the last TAIL_LINES of those."""
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    for line in lines:
        log.write(line + "\n")
        if line.strip():
            tail.append(line)
            on_line(line)
    log.flush()
    return list(tail)


def run_logged(command: list[str], log: TextIO, on_line: Progress) -> tuple[int, list[str]]:
    """Run `command`, copy its output to `log` and `on_line`; return its exit status and last lines."""
    log.write(f"$ {' '.join(command)}\n")
    log.flush()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace", stdin=subprocess.DEVNULL) as process:
        tail = log_lines((raw.rstrip() for raw in process.stdout), log, on_line)
    return process.returncode, tail


def logged_failure(message: str, tail: list[str], log: Path, disk: Path | None) -> ImageError:
    """An ImageError for a failed step: says how much space is left when the disk filled up.

    `disk` is where the step writes; None when that is not on this host (an engine in a VM).
    """
    if "no space left on device" in "\n".join(tail).lower():
        where = "the engine's disk"
        if disk is not None:
            existing = next(p for p in (disk, *disk.parents) if p.exists())
            where = f"{shutil.disk_usage(existing).free / 1024**3:.1f} GiB free on {disk}"
        return ImageError(
            f"{message}: no space left on device ({where})",
            "free space: `docker image prune` and `docker builder prune` drop unused images and build "
            f"cache, `lab down --all` removes labs, and {paths.cache_dir()} can go; full log: {log}",
        )
    return ImageError(message, f"last lines: {' | '.join(tail[-3:])[-400:]}; full log: {log}")


class StageReporter:
    """Turns debootstrap's hundreds of `I: Retrieving pkg` lines (and mmdebstrap's few) into one progress line per
    stage.

    A stage is the first word of an `I:` line (Retrieving, Validating, Unpacking, ...), reported the
    first time it appears; warnings and errors are always reported.
    """

    def __init__(self, on_progress: Progress, tool: str = "debootstrap"):
        self.on_progress = on_progress
        self.tool = tool
        self.seen: set[str] = set()

    def __call__(self, line: str) -> None:
        level, _, text = line.partition(": ")
        if level not in ("I", "W", "E") or not text:
            return
        stage = text.split()[0]
        if level != "I" or stage not in self.seen:
            self.seen.add(stage)
            self.on_progress(f"{self.tool}: {text}")


def bootstrap_base(client: docker.DockerClient, on_progress: Progress,
                   apt_dir: Path = APT_DIR, os_release: Path = OS_RELEASE) -> str:
    """Bootstrap a minimal bookworm with the node image's system packages; import it as lab-base:bookworm."""
    program, mirror = check_can_bootstrap(apt_dir, os_release)
    tool = Path(program).name
    paths.cache_dir().mkdir(parents=True, exist_ok=True)
    paths.logs_dir().mkdir(parents=True, exist_ok=True)
    log_path = paths.logs_dir() / f"bootstrap-{BASE_SUITE}.log"
    root = Path(tempfile.mkdtemp(prefix="bootstrap-", dir=paths.cache_dir()))
    on_progress(f"{tool} {BASE_SUITE} from {mirror} (under a minute; log: {log_path})")
    include = f"--include={','.join(BASE_PACKAGES)}"
    if tool == "mmdebstrap":  # a tarball, without apt's lists and debs (mmdebstrap cleans them)
        tarball = root / "base.tar"
        command = [program, "--variant=minbase", include, BASE_SUITE, str(tarball), mirror]
    else:
        command = [program, "--variant=minbase", include, BASE_SUITE, str(root), mirror]
    try:
        with log_path.open("w") as log:
            status, tail = run_logged(command, log, StageReporter(on_progress, tool))
        if status != 0:
            raise logged_failure(f"{tool} of {BASE_SUITE} failed (exit {status})", tail, log_path, root)
        on_progress(f"importing the bootstrapped tree as {BASE_TAG}")
        if tool == "mmdebstrap":
            import_tarball(client, tarball, BASE_TAG)
        else:
            import_tree(client, root, BASE_TAG)
    finally:
        unmount_below(root)
        shutil.rmtree(root, ignore_errors=True)
    return BASE_TAG


def check_can_bootstrap(apt_dir: Path = APT_DIR, os_release: Path = OS_RELEASE) -> tuple[str, str]:
    """The bootstrap program (mmdebstrap, else debootstrap) and the mirror to use, or an ImageError saying why a
    bootstrap cannot run."""
    fallback = "or make debian:bookworm-slim available to the engine (`docker pull` or `docker load` it)"
    if os.geteuid() != 0:
        raise ImageError("building a base image with debootstrap needs root",
                         f"run the command with sudo, {fallback}")
    program = shutil.which("mmdebstrap") or shutil.which("debootstrap")
    if program is None:
        raise ImageError("neither mmdebstrap nor debootstrap is installed, so no base image can be built here",
                         f"install one (`apt-get install mmdebstrap`, or `make engine`), {fallback}")
    release = read_os_release(os_release)
    mirror = None
    if release.get("ID") == "debian":
        mirror = choose_mirror(read_apt_sources(apt_dir), release.get("VERSION_CODENAME"))
    if mirror is None:
        raise ImageError(f"no Debian mirror found in the apt sources under {apt_dir}",
                         f"debootstrap needs a Debian host whose apt sources name a `main` archive, {fallback}")
    return program, mirror


def import_tree(client: docker.DockerClient, root: Path, tag: str) -> None:
    """Stream `tar` of `root` into the engine as image `tag`, without holding the tarball anywhere."""
    repository, _, version = tag.partition(":")
    command = ["tar", "-C", str(root), "--numeric-owner", *(f"--exclude={p}" for p in TAR_EXCLUDES), "-cf", "-", "."]
    with tempfile.TemporaryFile() as errors, \
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors) as tar:
        try:
            client.api.import_image_from_stream(_chunks(tar.stdout), repository=repository, tag=version)
        except docker.errors.APIError as error:
            tar.kill()
            raise ImageError(f"Docker refused to import the bootstrapped base: {error.explanation or error}",
                             "check the engine's disk space and log, then try again") from None
        tar.wait()
        errors.seek(0)
        complaint = errors.read().decode(errors="replace").strip().splitlines()
    if tar.returncode != 0:
        client.images.remove(tag, force=True)  # an incomplete base must not be found next time
        raise ImageError(f"tar of the bootstrapped tree failed: {complaint[-1] if complaint else tar.returncode}",
                         "check the free space under the lab's cache folder, then try again")


def import_tarball(client: docker.DockerClient, tarball: Path, tag: str) -> None:
    """Import a root filesystem tarball into the engine as image `tag`."""
    repository, _, version = tag.partition(":")
    with tarball.open("rb") as stream:
        try:
            client.api.import_image_from_stream(_chunks(stream), repository=repository, tag=version)
        except docker.errors.APIError as error:
            raise ImageError(f"Docker refused to import the bootstrapped base: {error.explanation or error}",
                             "check the engine's disk space and log, then try again") from None


def _chunks(stream) -> Iterator[bytes]:
    while block := stream.read(IMPORT_CHUNK):
        yield block


def unmount_below(root: Path) -> None:
    """Unmount whatever a failed debootstrap left mounted inside `root`, so removing it cannot reach /proc."""
    mounts = Path("/proc/self/mounts")
    if not mounts.is_file():
        return
    prefix = f"{root.resolve()}/"
    points = [line.split()[1] for line in mounts.read_text().splitlines() if len(line.split()) > 1]
    for point in sorted((p for p in points if p.startswith(prefix)), reverse=True):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)
