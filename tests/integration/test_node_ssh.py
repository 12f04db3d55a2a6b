"""Node-to-node SSH as root with the lab's key and pinned host keys, and the hostfiles DeepSpeed and MPI read."""

import pytest

pytestmark = pytest.mark.docker


def run_in(client, lab_name, index, command):
    return client.containers.get(f"lab-{lab_name}-node{index}").exec_run(["sh", "-c", command])


def test_every_node_reaches_the_others_by_ssh_without_a_password_and_checks_their_keys(client, two_nodes):
    for index, other in ((0, 1), (1, 0)):
        # DeepSpeed's own check before it launches: `ssh -o PasswordAuthentication=no HOST hostname`
        result = run_in(client, two_nodes, index, f"ssh -o PasswordAuthentication=no -o BatchMode=yes node{other} hostname")
        assert (result.exit_code, result.output.decode().strip()) == (0, f"node{other}")
    # a host whose key is not pinned is refused, not trusted on first use
    refused = run_in(client, two_nodes, 0, "ssh -o BatchMode=yes -o HostKeyAlias=stranger node1 hostname")
    assert refused.exit_code != 0 and b"Host key verification failed" in refused.output


def test_the_key_is_the_labs_readable_by_root_only_and_not_in_the_image(client, two_nodes):
    listing = run_in(client, two_nodes, 0, "stat -c '%a %U' /etc/lab/ssh/id_ed25519")
    assert listing.output.decode().strip() == "600 root"
    image = client.containers.get(f"lab-{two_nodes}-node0").image
    fresh = client.containers.run(image.id, ["sh", "-c", "ls /etc/lab/ssh /root/.ssh/id_* 2>&1 || true"], remove=True,
                                  entrypoint=[], network_mode="none")
    assert b"id_ed25519" not in fresh


def test_hostfiles_name_every_node_with_its_slots(client, two_nodes):
    deepspeed = run_in(client, two_nodes, 1, "cat /etc/lab/hostfile").output.decode()
    mpich = run_in(client, two_nodes, 1, "cat /etc/lab/hostfile.mpich").output.decode()
    assert deepspeed == "node0 slots=2\nnode1 slots=2\n" and mpich == "node0:2\nnode1:2\n"


def test_nodes_make_and_offer_only_the_ed25519_host_key_the_lab_pins(client, two_nodes):
    """`ssh-keygen -A` also made RSA-3072 and ECDSA keys at every first start (541 ms of CPU a node) that nothing used."""
    for index in (0, 1):
        keys = run_in(client, two_nodes, index, "ls /etc/ssh/ | grep '^ssh_host_'").output.decode().split()
        assert keys == ["ssh_host_ed25519_key", "ssh_host_ed25519_key.pub"]
        offered = run_in(client, two_nodes, index, "sshd -T | grep -i '^hostkey '").output.decode().split("\n")
        assert [line for line in offered if line] == ["hostkey /etc/ssh/ssh_host_ed25519_key"]
