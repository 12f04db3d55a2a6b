"""`lab up --image IMAGE`: what the probe's output says about a user's image, and the one-line refusals."""

import json

import pytest

from lab.errors import ImageError
from lab.nodes.image import host_arch
from lab.nodes.user_image import (PROBE_MARK, ImageFacts, additions_tar, engine_arch, facts_from_probe,
                                  user_image_tag)

ENGINE = {"x86_64": "amd64", "aarch64": "arm64"}.get(host_arch(), host_arch())
PATH = "/opt/conda/bin:/usr/local/bin:/usr/bin:/bin"


def probed(*interpreters: dict) -> str:
    return "".join(f"{PROBE_MARK}{json.dumps(found)}\n" for found in interpreters)


def interpreter(executable, torch=None, version=(3, 11), libc=("glibc", "2.36")):
    found = {"executable": executable, "version": list(version), "machine": host_arch(), "libc": list(libc),
             "prefix": executable.rsplit("/", 2)[0]}
    if torch:
        found["torch"] = torch
    else:
        found["torch_error"] = "ModuleNotFoundError: No module named 'torch'"
    return found


def facts(output, arch=ENGINE, wanted=None):
    return facts_from_probe("team/train:1", "sha256:abc", arch, PATH, output, wanted)


def test_the_first_interpreter_with_torch_wins_and_gives_the_packages_target():
    found = facts(probed(interpreter("/usr/bin/python3"), interpreter("/opt/conda/bin/python", "2.13.0+cpu", (3, 12))))
    assert (found.python, found.torch, found.python_version, found.glibc) == \
        ("/opt/conda/bin/python", "2.13.0+cpu", (3, 12), (2, 36))
    target = found.target()
    assert target.python == (3, 12) and target.glibc == (2, 36) and target.arch == host_arch()
    assert found.node_path() == PATH  # its folder is already first
    assert facts(probed(interpreter("/venv/bin/python", "2.5.1"))).node_path() == f"/venv/bin:{PATH}"


def test_a_musl_image_is_resolved_for_the_oldest_manylinux():
    assert facts(probed(interpreter("/usr/bin/python3", "2.13.0", libc=("", "")))).target().glibc == (2, 17)


@pytest.mark.parametrize("output, arch, wanted, says", [
    ("", ENGINE, None, "has no Python 3 the lab can run (none of python3, python"),
    ("", ENGINE, "/opt/py/bin/python", "has no Python 3 the lab can run ('/opt/py/bin/python')"),
    (probed(interpreter("/usr/bin/python3")), ENGINE, None,
     "/usr/bin/python3 cannot import torch (ModuleNotFoundError: No module named 'torch')"),
    (probed(interpreter("/usr/bin/python3", "1.13.1")), ENGINE, None, "has torch 1.13.1, older than the 2.2"),
    (probed(interpreter("/usr/bin/python3", "2.13.0")), "s390x" if host_arch() != "s390x" else "amd64", None,
     "is built for"),
])
def test_what_the_image_lacks_is_one_line(output, arch, wanted, says):
    with pytest.raises(ImageError) as refused:
        facts(output, arch, wanted)
    assert says in refused.value.message and "\n" not in refused.value.message and refused.value.hint


def test_engine_architecture_names_are_wheel_names():
    assert engine_arch("amd64") == "x86_64" and engine_arch("arm64") == "aarch64"


def test_the_tag_changes_with_the_image_its_python_and_the_sshd_source():
    base = ImageFacts("team/train:1", "sha256:abc", "/opt/conda/bin/python", (3, 11), "2.13.0", "x86_64", (2, 36), PATH)
    tag = user_image_tag(base, "sha256:sshd")
    assert tag.startswith("lab-user:") and tag == user_image_tag(base, "sha256:sshd")
    assert tag != user_image_tag(base, "sha256:other-sshd")
    assert tag != user_image_tag(ImageFacts(**{**base.__dict__, "image_id": "sha256:def"}), "sha256:sshd")
    assert tag != user_image_tag(ImageFacts(**{**base.__dict__, "python": "/usr/bin/python3"}), "sha256:sshd")


def test_the_additions_are_the_sshd_bundle_its_config_and_the_entrypoint():
    import io
    import tarfile

    bundle = io.BytesIO()
    with tarfile.open(fileobj=bundle, mode="w") as tar:
        info = tarfile.TarInfo("lab-sshd/sshd")
        info.size, info.mode = 4, 0o755
        tar.addfile(info, io.BytesIO(b"ELF!"))
    with tarfile.open(fileobj=io.BytesIO(additions_tar(bundle.getvalue()))) as tar:
        names = {member.name: member.mode for member in tar.getmembers()}
        config = tar.extractfile("opt/lab-sshd/sshd_config").read().decode()
    assert names == {"opt/lab-sshd/sshd": 0o755, "opt/lab-sshd/sshd_config": 0o644, "lab-entrypoint": 0o755}
    assert "PasswordAuthentication no" in config and "AuthorizedKeysFile /etc/ssh/lab_authorized_keys" in config
