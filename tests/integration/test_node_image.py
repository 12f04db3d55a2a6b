"""The node image as `make image` built it: the venv, installed offline and committed, with nothing of the build."""

import pytest

from lab.nodes.image import BUILD_CONTAINER_PREFIX, INSTALL_MOUNT, node_image_tag

pytestmark = pytest.mark.docker

# Run inside the image: the venv's torch imports, the install's mount point is empty, torch's headers are gone, and
# no wheel is left but Debian's own (the ones its venv module installs pip from).
INSIDE = f"""set -e
test -z "$(ls -A {INSTALL_MOUNT})"
site=$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
test -d "$site/torch/bin" && test ! -e "$site/torch/include" && test ! -e "$site/torch/test"
test -z "$(find / -xdev -name '*.whl' -not -path '/usr/share/python-wheels/*' -print -quit)"
python -c 'import torch, numpy; print(torch.__version__)'
"""


def test_the_node_image_has_the_venv_and_nothing_of_its_build(client):
    tag = node_image_tag()
    image = client.images.get(tag)
    config = image.attrs["Config"]
    assert config["Cmd"][-1].endswith("exec /usr/sbin/sshd -D -e")  # the system part's command, not the install's
    assert config["Env"][0].startswith("PATH=/opt/lab-venv/bin:") and "22/tcp" in config["ExposedPorts"]
    assert config["Labels"]["io.lab.image.requirements"].startswith("torch==")
    output = client.containers.run(tag, ["sh", "-c", INSIDE], remove=True, network_mode="none").decode()
    assert output.strip() == config["Labels"]["io.lab.image.requirements"].split()[0].removeprefix("torch==")
    assert not client.containers.list(all=True, filters={"name": BUILD_CONTAINER_PREFIX})
