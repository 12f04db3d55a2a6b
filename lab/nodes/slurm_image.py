"""The Slurm variant of the node image, `lab-node-slurm:<hash>`, built only for `lab up --scheduler slurm`.

It is the node image plus Debian's slurmctld, slurmd, slurm-client and munge. apt on the host works out which
packages the node image lacks (its own resolver, run against the image's dpkg status) and downloads them into
`.lab/cache/slurm-debs`; the build installs them with dpkg, so the build and the nodes stay offline.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import docker

from lab import paths
from lab.errors import ImageError
from lab.nodes.bootstrap import Progress, logged_failure, run_logged
from lab.nodes.driver import engine_errors
from lab.nodes.image import _digest, _link_or_copy, stream_build
from lab.nodes.labels import LABEL_PREFIX

DOCKER_DIR = paths.resource("docker")
DOCKERFILE = DOCKER_DIR / "Dockerfile.slurm"
START_SCRIPT = DOCKER_DIR / "slurm-start.sh"
IMAGE_REPOSITORY = "lab-node-slurm"
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
INSTALL_LINE = re.compile(r"^Inst (\S+) \((\S+)")


def slurm_image_tag(node_tag: str) -> str:
    """`lab-node-slurm:<hash>` of the node image it builds on and everything added to it."""
    return f"{IMAGE_REPOSITORY}:{_digest([node_tag, DOCKERFILE.read_text(), START_SCRIPT.read_text(), PACKAGES])}"


def missing_packages(apt_simulation: str) -> list[str]:
    """`name=version` of every package an `apt-get -s install` would install."""
    return [f"{match.group(1)}={match.group(2)}" for match in map(INSTALL_LINE.match, apt_simulation.splitlines())
            if match]


def _image_dpkg_status(client: docker.DockerClient, image: str) -> bytes:
    return client.containers.run(image, ["cat", "/var/lib/dpkg/status"], remove=True, network_mode="none")


def download_debs(dpkg_status: bytes, folder: Path, log, log_path: Path, on_progress: Progress) -> list[Path]:
    """The .debs that `PACKAGES` need beyond what an image with `dpkg_status` has, downloaded by the host's apt."""
    if not shutil.which("apt-get"):
        raise ImageError("the Slurm image needs the host's apt-get to download Debian's slurm and munge packages",
                         "run `lab up --scheduler slurm` on a Debian or Ubuntu host")
    folder.mkdir(parents=True, exist_ok=True)
    status = folder / "image-dpkg-status"
    status.write_bytes(dpkg_status)
    simulation = subprocess.run(["apt-get", "-s", "-o", f"Dir::State::status={status}", "install",
                                 "--no-install-recommends", *PACKAGES], capture_output=True, text=True)
    log.write(simulation.stdout + simulation.stderr)
    wanted = missing_packages(simulation.stdout)
    if simulation.returncode != 0 or not wanted:
        raise ImageError(f"apt cannot resolve {' '.join(PACKAGES)} for the node image: "
                         f"{(simulation.stderr.strip().splitlines() or ['nothing to install'])[-1]}",
                         "check that the host's apt sources name Debian bookworm (`apt-get update` first)")
    debs = folder / "debs"
    shutil.rmtree(debs, ignore_errors=True)
    debs.mkdir()
    on_progress(f"downloading {len(wanted)} Debian package(s) into {debs}")
    code, tail = run_logged(["sh", "-c", 'cd "$1" && shift && exec apt-get download "$@"', "sh", str(debs), *wanted],
                            log, on_progress)
    if code != 0:
        raise logged_failure("apt-get could not download the Slurm packages", tail, log_path, folder)
    return sorted(debs.glob("*.deb"))


def ensure_slurm_image(client: docker.DockerClient, node_tag: str, on_progress: Progress) -> str:
    """The Slurm image's tag, building it on `node_tag` first unless the engine has it."""
    tag = slurm_image_tag(node_tag)
    with engine_errors("build the Slurm node image"):
        try:
            client.images.get(tag)
            return tag
        except docker.errors.ImageNotFound:
            pass
        started = time.monotonic()
        log_path = paths.logs_dir() / f"image-build-{tag.replace(':', '-')}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("w") as log:
            on_progress(f"building {tag} on {node_tag} (log: {log_path})")
            debs = download_debs(_image_dpkg_status(client, node_tag), paths.cache_dir() / "slurm-debs", log,
                                 log_path, on_progress)
            context = Path(tempfile.mkdtemp(prefix="slurm-context-", dir=paths.cache_dir()))
            try:
                shutil.copy(DOCKERFILE, context / "Dockerfile")
                shutil.copy(START_SCRIPT, context / "slurm-start.sh")
                (context / "debs").mkdir()
                for deb in debs:
                    _link_or_copy(deb, context / "debs" / deb.name)
                stream_build(client, context, tag, {"BASE": node_tag}, {f"{LABEL_PREFIX}.image.base": node_tag},
                             False, log, log_path, on_progress, what="the Slurm node image")
            finally:
                shutil.rmtree(context, ignore_errors=True)
            on_progress(f"built {tag} in {time.monotonic() - started:.0f} s")
    return tag
