"""Nodes as Docker containers: the plan of a lab, the driver that applies it (every Docker call), images, GPUs."""
