"""Provisioning with ansible: the lab's containers and real hosts from an inventory, by the same playbook."""
