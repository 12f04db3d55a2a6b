"""Jobs on the nodes: exercises, launch through a transport, checks, run records."""
