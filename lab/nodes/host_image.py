"""`lab up --image host`: nodes that run this host's own Python, from a tiny image made offline.

The image is a rootfs of a few files (users, sshd config, nsswitch, an entrypoint) imported with
`docker import`; the host's /usr and Python environment are bind-mounted read-only at the same paths,
so a GPU host with CUDA torch gets nodes with no build and no registry. /etc stays the container's,
so Docker keeps managing /etc/hosts and resolv.conf and peers resolve by hostname. sshd (ansible
provisions over SSH) is the host's /usr/sbin/sshd when openssh-server is installed, else a copy
with its own libraries and loader taken from a local image that has one (the base image).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import site
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

from lab.nodes.bootstrap import BASE_TAG, Progress
from lab.nodes.driver import engine_errors
from lab.errors import ImageError
from lab.nodes.labels import LABEL_PREFIX
from lab.nodes.plan import HostPython

IMAGE_REPOSITORY = "lab-host"
HOST_SSHD = Path("/usr/sbin/sshd")
BUNDLE_DIR = "/opt/lab-sshd"
# Top-level folders that merged-/usr hosts make links into /usr; a real folder is mounted instead.
ROOT_LINKS = ("bin", "lib", "lib32", "lib64", "libx32")
# The host's loader cache, copied into the image (valid because /usr is the host's); a copy, not a mount,
# so the NVIDIA toolkit's hook can still run ldconfig in the node.
LOADER_CACHE = "etc/ld.so.cache"

PASSWD = """root:x:0:0:root:/root:/bin/sh
sshd:x:100:65534::/run/sshd:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
"""
GROUP = "root:x:0:\nnogroup:x:65534:\n"
# '*': no password, yet not locked ('!'), so sshd without PAM accepts root's key.
SHADOW = "root:*:19000:0:99999:7:::\nsshd:!:19000::::::\nnobody:!:19000::::::\n"
NSSWITCH = "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
SSHD_CONFIG = """# sshd of a `lab up --image host` node: root logs in with the lab's key only.
PermitRootLogin prohibit-password
PasswordAuthentication no
AuthorizedKeysFile /etc/ssh/lab_authorized_keys
UsePAM no
PrintMotd no
PrintLastLog no
HostKey /etc/ssh/ssh_host_ed25519_key
Subsystem sftp internal-sftp
"""
ENTRYPOINT = f"""#!/bin/sh
# Start sshd: the host's when its /usr has one, else the copy bundled from the base image, run by its own loader.
set -e
mkdir -p /run/sshd /var/empty
key=/etc/ssh/ssh_host_ed25519_key
if [ -x {HOST_SSHD} ]; then
    [ -s $key ] || ssh-keygen -q -t ed25519 -N '' -f $key
    exec {HOST_SSHD} -D -e
fi
bundle={BUNDLE_DIR}
if [ ! -x $bundle/sshd ]; then
    echo "this host has no {HOST_SSHD} and the image no bundled sshd: install openssh-server" >&2
    exit 1
fi
[ -s $key ] || $bundle/lib/ld.so --library-path $bundle/lib $bundle/ssh-keygen -q -t ed25519 -N '' -f $key
exec $bundle/lib/ld.so --library-path $bundle/lib $bundle/sshd -D -e -r
"""
# Runs in the image the sshd comes from: sshd, ssh-keygen, every library they load, and the loader.
COLLECT_SSHD = f"""set -e
out={BUNDLE_DIR}
mkdir -p $out/lib
cp /usr/sbin/sshd /usr/bin/ssh-keygen $out/
libraries=$(ldd /usr/sbin/sshd /usr/bin/ssh-keygen | awk '$2 == "=>" && $3 ~ /^\\// {{print $3}}' | sort -u)
cp -L $libraries $out/lib/
cp -L "$(ldd /usr/sbin/sshd | awk '$1 ~ /^\\// && $2 ~ /^\\(/ {{print $1}}')" $out/lib/ld.so
"""


def host_python() -> HostPython:
    """This interpreter: the one running lab, whose torch the nodes then use."""
    candidates = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))),
                  *site.getsitepackages()]
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user_site:
        candidates.append(user_site)
    return HostPython(sys.executable, tuple(outside_usr(path for path in candidates if os.path.isdir(path))))


def outside_usr(folders) -> list[str]:
    """Folders not already under /usr or under another of `folders`, outermost first, no repeats."""
    kept: list[str] = []
    for folder in sorted({os.path.abspath(folder) for folder in folders}, key=len):
        if not any(_within(folder, outer) for outer in ["/usr", *kept]):
            kept.append(folder)
    return kept


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def host_folders(python: HostPython, root: Path = Path("/")) -> tuple[str, ...]:
    """Host folders a node mounts read-only at the same paths: /usr, real top-level library folders, Python's."""
    real_roots = [f"/{name}" for name in ROOT_LINKS if (root / name).is_dir() and not (root / name).is_symlink()]
    return ("/usr", *real_roots, *python.folders)


def root_links(root: Path = Path("/")) -> dict[str, str]:
    """The host's merged-/usr links (bin -> usr/bin, ...), recreated in the image."""
    return {name: os.readlink(root / name) for name in ROOT_LINKS if (root / name).is_symlink()}


def rootfs_tar(links: dict[str, str], ldconfig: str | None, bundle: bytes | None, loader_cache: bytes = b"") -> bytes:
    """The image's whole filesystem as a tar: folders, the config files, links, optionally the sshd bundle.

    /sbin is a real folder (with just ldconfig) so Docker can place its init at /sbin/docker-init
    without writing into the read-only /usr.
    """
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for folder, mode in (("etc", 0o755), ("etc/ssh", 0o755), ("root", 0o700), ("tmp", 0o1777), ("run", 0o755),
                             ("run/sshd", 0o755), ("var", 0o755), ("var/empty", 0o755), ("var/log", 0o755), ("var/tmp", 0o1777),
                             ("opt", 0o755), ("sbin", 0o755), ("usr", 0o755), ("dev", 0o755), ("proc", 0o555),
                             ("sys", 0o555), ("lab", 0o755)):
            _add(tar, folder, tarfile.DIRTYPE, mode)
        for name, text, mode in (("etc/passwd", PASSWD, 0o644), ("etc/group", GROUP, 0o644), ("etc/shadow", SHADOW, 0o600),
                                 ("etc/nsswitch.conf", NSSWITCH, 0o644), ("etc/ssh/sshd_config", SSHD_CONFIG, 0o644),
                                 ("lab-entrypoint", ENTRYPOINT, 0o755),
                                 # sshd records logins here and writes an error into every session without them
                                 ("var/log/lastlog", "", 0o664), ("var/log/wtmp", "", 0o664), ("run/utmp", "", 0o664)):
            _add(tar, name, tarfile.REGTYPE, mode, text.encode())
        for name, target in sorted(links.items()):
            _add(tar, name, tarfile.SYMTYPE, 0o777, link=target)
        if ldconfig:
            _add(tar, "sbin/ldconfig", tarfile.SYMTYPE, 0o777, link=ldconfig)
        if loader_cache:
            _add(tar, LOADER_CACHE, tarfile.REGTYPE, 0o644, loader_cache)
        if bundle:
            with tarfile.open(fileobj=io.BytesIO(bundle)) as source:
                for member in source.getmembers():
                    data = source.extractfile(member).read() if member.isfile() else None
                    _add(tar, f"opt/{member.name}", member.type, member.mode, data, member.linkname)
    return buffer.getvalue()


def _add(tar: tarfile.TarFile, name: str, kind: bytes, mode: int, data: bytes | None = None, link: str = "") -> None:
    """One member owned by root with a fixed time, so equal inputs give equal bytes."""
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname, info.mtime = kind, mode, link, 0
    info.size = len(data) if data is not None else 0
    tar.addfile(info, io.BytesIO(data) if data is not None else None)


def sshd_source(client: docker.DockerClient) -> str | None:
    """A local image whose sshd can be bundled: the bootstrapped base, else the node image; None if neither."""
    from lab.nodes.image import node_image_tag  # the node image's name only; nothing is built

    for ref in (BASE_TAG, node_image_tag()):
        with contextlib.suppress(docker.errors.ImageNotFound):
            return client.images.get(ref).id
    return None


def collect_sshd(client: docker.DockerClient, image_id: str) -> bytes:
    """The sshd bundle (a tar of lab-sshd/) made by running COLLECT_SSHD in `image_id`."""
    container = client.containers.create(image_id, ["sh", "-c", COLLECT_SSHD], network_disabled=True)
    try:
        container.start()
        status = container.wait(timeout=120)
        if status.get("StatusCode") != 0:
            tail = container.logs(tail=5).decode(errors="replace").strip().replace("\n", "; ")
            raise ImageError(f"could not copy sshd out of {image_id[:19]}: {tail[:300]}",
                             "install openssh-server on this host, then `lab up --image host` uses its sshd")
        stream, _ = container.get_archive(BUNDLE_DIR)
        return b"".join(stream)
    finally:
        with contextlib.suppress(docker.errors.APIError):
            container.remove(force=True)


@dataclass(frozen=True)
class HostImageInputs:
    """Everything the host image is made of; its tag is a hash of them, known before anything is made."""

    links: dict[str, str]
    ldconfig: str | None
    loader_cache: bytes
    sshd_source: str | None  # image id whose sshd is bundled; None: the host's own sshd

    @property
    def tag(self) -> str:
        # The rootfs without the bundle is deterministic, so its bytes name the image; the bundle by its source.
        rootfs = rootfs_tar(self.links, self.ldconfig, None, self.loader_cache)
        inputs = [hashlib.sha256(rootfs).hexdigest(), COLLECT_SSHD, self.sshd_source]
        return f"{IMAGE_REPOSITORY}:{hashlib.sha256(repr(inputs).encode()).hexdigest()[:12]}"


def host_image_inputs(client: docker.DockerClient | None, root: Path = Path("/")) -> HostImageInputs:
    """What the host image would be made of; `client` None (no engine): only a host with its own sshd is known."""
    links = root_links(root)
    ldconfig = os.path.realpath(root / "sbin/ldconfig") if (root / "sbin/ldconfig").exists() else None
    loader_cache = (root / LOADER_CACHE).read_bytes() if (root / LOADER_CACHE).is_file() else b""
    if (root / HOST_SSHD.relative_to("/")).exists():
        return HostImageInputs(links, ldconfig, loader_cache, None)
    if client is None:
        raise ImageError(f"--image host: this host has no {HOST_SSHD}, so the image bundles one from a local image, "
                         "and with no Docker engine answering the image's tag cannot be told",
                         "install openssh-server on this host, or start the engine (`make engine`)")
    source = sshd_source(client)
    if source is None:
        raise ImageError(f"--image host needs sshd: this host has no {HOST_SSHD} and there is no local base image",
                         "install openssh-server on this host, or build the base once with `lab image build`")
    return HostImageInputs(links, ldconfig, loader_cache, source)


def ensure_host_image(client: docker.DockerClient, progress: Progress, root: Path = Path("/")) -> str:
    """`lab-host:<hash>` of the rootfs inputs, imported unless the engine already has it."""
    with engine_errors("make the host image"):
        inputs = host_image_inputs(client, root)
        tag = inputs.tag
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.get(tag)
            return tag
        source = inputs.sshd_source
        progress(f"making {tag} (sshd: {'bundled from ' + source[:19] if source else 'the host'})")
        bundle = collect_sshd(client, source) if source else None
        client.api.import_image_from_data(
            rootfs_tar(inputs.links, inputs.ldconfig, bundle, inputs.loader_cache), repository=IMAGE_REPOSITORY,
            tag=tag.split(":")[1],
            changes=['CMD ["/lab-entrypoint"]', "EXPOSE 22", f"LABEL {LABEL_PREFIX}.image.kind=host"],
        )
    return tag
