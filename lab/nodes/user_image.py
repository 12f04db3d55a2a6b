"""`lab up --image IMAGE`: nodes from the user's own training image, which the lab never changes.

The lab probes the image once (a throwaway container, network none, as root, its entrypoint bypassed) for a Python
that imports torch, then derives `lab-user:<hash>` from it: an sshd with its own libraries and loader (bundled from a
local Debian image, as `--image host` does), its config and an entrypoint, committed on top of the image with USER
root and the lab's entrypoint. The image's environment, working directory and Python stay as they are.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import tarfile
from dataclasses import asdict, dataclass
from pathlib import Path

import docker
import docker.errors

from lab import paths
from lab.errors import ImageError
from lab.nodes.bootstrap import Progress
from lab.nodes.driver import engine_errors
from lab.nodes.host_image import BUNDLE_DIR, COLLECT_SSHD, SSHD_CONFIG, collect_sshd, sshd_source
from lab.nodes.image import Target, host_arch
from lab.nodes.labels import LABEL_PREFIX, PYTHON_LABEL

IMAGE_REPOSITORY = "lab-user"
MIN_TORCH = (2, 2)  # pyproject's floor: the lab's launches rely on torchrun's options of that version
PROBE_MARK = "LAB-PROBE "
# Engine architecture names (docker image inspect) as wheel tags spell them.
ENGINE_ARCH = {"amd64": "x86_64", "x86_64": "x86_64", "arm64": "aarch64", "aarch64": "aarch64", "ppc64le": "ppc64le",
               "s390x": "s390x", "386": "i686", "arm": "armv7l"}
# What each candidate interpreter prints: its facts, and torch's version or why it does not import.
PYTHON_PROBE = """import json, os, platform, sys
facts = {"executable": sys.executable, "version": list(sys.version_info[:2]), "machine": platform.machine(),
         "libc": list(platform.libc_ver()), "prefix": sys.prefix}
try:
    import torch
    facts["torch"] = torch.__version__
except Exception as error:
    facts["torch_error"] = f"{type(error).__name__}: {error}"
print("LAB-PROBE " + json.dumps(facts))
"""
# Tried in order: --python, the PATH's python3 and python, then where training images keep theirs.
CANDIDATES = ("python3", "python", "/opt/conda/bin/python", "/usr/local/bin/python3", "/usr/bin/python3",
              "/opt/venv/bin/python", "/venv/bin/python")
PROBE_SCRIPT = """for py in "$@"; do
  command -v "$py" >/dev/null 2>&1 || continue
  "$py" -c "$LAB_PYTHON_PROBE" 2>/dev/null || true
done
"""
ENTRYPOINT = f"""#!/bin/sh
# The lab's sshd, run by the loader bundled with it (the image's own libraries are never used), key made at first start.
set -e
bundle={BUNDLE_DIR}
mkdir -p /run/sshd /etc/ssh
key=/etc/ssh/ssh_host_ed25519_key
[ -s $key ] || $bundle/lib/ld.so --library-path $bundle/lib $bundle/ssh-keygen -q -t ed25519 -N '' -f $key
exec $bundle/lib/ld.so --library-path $bundle/lib $bundle/sshd -D -e -r -f $bundle/sshd_config
"""
# Run once in the derived image's build container: sshd's privilege-separation user, its folders, root unlocked for
# key logins (sshd without PAM refuses an account whose password field starts with '!').
PREPARE = """set -e
grep -q '^sshd:' /etc/passwd || echo 'sshd:x:100:65534::/run/sshd:/usr/sbin/nologin' >> /etc/passwd
mkdir -p /run/sshd /var/empty /etc/ssh /var/log /root
chmod 755 /var/empty
touch /var/log/lastlog /var/log/wtmp
[ ! -f /etc/shadow ] || sed -i 's/^root:!*:/root:*:/' /etc/shadow
"""


@dataclass(frozen=True)
class ImageFacts:
    """What the probe found in the user's image."""

    reference: str
    image_id: str
    python: str  # the interpreter that imports torch
    python_version: tuple[int, int]
    torch: str
    arch: str  # wheel-tag spelling: x86_64, aarch64
    glibc: tuple[int, int] | None  # None: not glibc (musl) or unknown
    path: str  # the image's PATH

    def target(self) -> Target:
        """The platform packages are resolved for (`--requirements` on this image)."""
        return Target(python=self.python_version, glibc=self.glibc or (2, 17), arch=self.arch)

    def node_path(self) -> str:
        """PATH for the nodes' processes: the found Python's folder first, then the image's own."""
        folder = self.python.rsplit("/", 1)[0]
        return ":".join(dict.fromkeys([folder, *self.path.split(":")]))


def engine_arch(name: str) -> str:
    return ENGINE_ARCH.get(name.lower(), name.lower())


def facts_from_probe(reference: str, image_id: str, image_arch: str, path: str, output: str,
                     wanted: str | None) -> ImageFacts:
    """The first interpreter of the probe's output that imports a torch the lab supports; one line for what is wrong."""
    if engine_arch(image_arch) != host_arch():
        raise ImageError(f"image '{reference}' is built for {engine_arch(image_arch)}, but this engine runs "
                         f"{host_arch()} containers", f"build or pull the {host_arch()} variant of the image")
    found = [json.loads(line[len(PROBE_MARK):]) for line in output.splitlines() if line.startswith(PROBE_MARK)]
    if not found:
        where = f"'{wanted}'" if wanted else f"none of {', '.join(CANDIDATES)}"
        raise ImageError(f"image '{reference}' has no Python 3 the lab can run ({where})",
                         "give its interpreter with --python PATH, or use an image with Python 3 and torch")
    with_torch = [facts for facts in found if "torch" in facts]
    if not with_torch:
        raise ImageError(f"image '{reference}': {found[0]['executable']} cannot import torch "
                         f"({found[0].get('torch_error', 'no torch')})",
                         "install torch in the image, or name the interpreter that has it with --python PATH")
    chosen = with_torch[0]
    version = tuple(int(part) for part in re.findall(r"\d+", chosen["torch"])[:2])
    if version < MIN_TORCH:
        raise ImageError(f"image '{reference}' has torch {chosen['torch']}, older than the {MIN_TORCH[0]}.{MIN_TORCH[1]} "
                         "the lab supports", f"use an image with torch {MIN_TORCH[0]}.{MIN_TORCH[1]} or newer")
    libc, libc_version = chosen["libc"]
    glibc = tuple(int(part) for part in libc_version.split(".")[:2]) if libc == "glibc" and libc_version else None
    return ImageFacts(reference, image_id, chosen["executable"], tuple(chosen["version"]), chosen["torch"],
                      engine_arch(image_arch), glibc, path)


def _facts_cache(image_id: str, wanted: str | None) -> Path:
    key = hashlib.sha256(json.dumps([image_id, wanted]).encode()).hexdigest()[:16]
    return paths.cache_dir() / "images" / f"{key}.json"


def inspect_user_image(client: docker.DockerClient, reference: str, wanted: str | None = None) -> ImageFacts:
    """The facts of a local image, probed once per image id (and --python): `lab up` again does not probe."""
    with engine_errors(f"look at image '{reference}'"):
        try:
            image = client.images.get(reference)
        except docker.errors.ImageNotFound:
            raise ImageError(f"image '{reference}' is not in the engine (the lab never pulls a user's image)",
                             f"build it (`docker build -t {reference} .`) or load it (`docker load -i FILE`) "
                             "first; `docker images` lists what is there") from None
        cache = _facts_cache(image.id, wanted)
        with contextlib.suppress(OSError, ValueError, TypeError):
            data = json.loads(cache.read_text())
            return ImageFacts(**{**data, "python_version": tuple(data["python_version"]),
                                 "glibc": tuple(data["glibc"]) if data["glibc"] else None, "reference": reference})
        config = image.attrs.get("Config") or {}
        path = next((item.split("=", 1)[1] for item in config.get("Env") or [] if item.startswith("PATH=")),
                    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        output = ""
        if engine_arch(image.attrs.get("Architecture", "")) == host_arch():
            output = _probe(client, image.id, [wanted] if wanted else list(CANDIDATES))
        facts = facts_from_probe(reference, image.id, image.attrs.get("Architecture", ""), path, output, wanted)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(asdict(facts)))
    return facts


def _probe(client: docker.DockerClient, image_id: str, candidates: list[str]) -> str:
    """Run PROBE_SCRIPT in a throwaway container of the image; its output ('' when the image has no /bin/sh)."""
    container = client.containers.create(image_id, ["-c", PROBE_SCRIPT, "probe", *candidates], entrypoint=["/bin/sh"],
                                         user="0", network_mode="none", environment={"LAB_PYTHON_PROBE": PYTHON_PROBE},
                                         labels={f"{LABEL_PREFIX}.role": "image-probe"})
    try:
        container.start()
        container.wait(timeout=120)
        return container.logs(stdout=True, stderr=False).decode(errors="replace")
    except docker.errors.APIError as error:
        if "no such file or directory" in str(error).lower():
            raise ImageError(f"image {image_id[:19]} has no /bin/sh, which the lab's node entrypoint needs",
                             "use an image with a shell (every Debian, Ubuntu or conda image has one)") from None
        raise
    finally:
        with contextlib.suppress(docker.errors.APIError):
            container.remove(force=True)


def user_image_tag(facts: ImageFacts, sshd_image: str) -> str:
    """`lab-user:<hash>` of the user's image, its interpreter and everything the lab adds."""
    inputs = [facts.image_id, facts.python, facts.node_path(), SSHD_CONFIG, ENTRYPOINT, PREPARE, COLLECT_SSHD, sshd_image]
    return f"{IMAGE_REPOSITORY}:{hashlib.sha256(json.dumps(inputs).encode()).hexdigest()[:12]}"


def sshd_image(client: docker.DockerClient) -> str:
    """The local image whose sshd is bundled into the user's image."""
    source = sshd_source(client)
    if source is None:
        raise ImageError("--image IMAGE needs an sshd to add to the image, and there is no local base image to take "
                         "it from", "make the base once: `lab image base` (or `lab image build`)")
    return source


def additions_tar(bundle: bytes) -> bytes:
    """The files the lab adds: the sshd bundle with its config, and the entrypoint."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar, tarfile.open(fileobj=io.BytesIO(bundle)) as source:
        for member in source.getmembers():
            data = source.extractfile(member).read() if member.isfile() else None
            member.name = f"opt/{member.name}"
            tar.addfile(member, io.BytesIO(data) if data is not None else None)
        for name, text, mode in ((f"{BUNDLE_DIR.lstrip('/')}/sshd_config", SSHD_CONFIG, 0o644),
                                 ("lab-entrypoint", ENTRYPOINT, 0o755)):
            info = tarfile.TarInfo(name)
            info.mode, info.size = mode, len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    return buffer.getvalue()


def ensure_user_image(client: docker.DockerClient, facts: ImageFacts, progress: Progress) -> str:
    """The derived image's tag, made unless the engine has it; the user's image itself is left as it is."""
    with engine_errors("make the lab's image of your image"):
        source = sshd_image(client)
        tag = user_image_tag(facts, source)
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.get(tag)
            return tag
        progress(f"adding sshd to {facts.reference} as {tag} (python {facts.python}, torch {facts.torch})")
        bundle = collect_sshd(client, source)
        container = client.containers.create(facts.image_id, ["-c", PREPARE], entrypoint=["/bin/sh"], user="0",
                                             network_mode="none")
        try:
            container.put_archive("/", additions_tar(bundle))
            container.start()
            status = container.wait(timeout=120)["StatusCode"]
            if status != 0:
                tail = container.logs(tail=5).decode(errors="replace").strip().replace("\n", "; ")
                raise ImageError(f"could not prepare image '{facts.reference}' for sshd (exit {status}): {tail[:300]}",
                                 "the image needs /bin/sh, grep, sed and a writable /etc")
            repository, _, version = tag.partition(":")
            container.commit(repository, version, changes=[
                "USER root", 'ENTRYPOINT ["/lab-entrypoint"]', "CMD []", "EXPOSE 22",
                f"ENV PATH={facts.node_path()}",
                f"LABEL {LABEL_PREFIX}.image.kind=user {LABEL_PREFIX}.image.source={json.dumps(facts.reference)} "
                f"{PYTHON_LABEL}={facts.python}"])
        finally:
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True)
    return tag
