"""A small distributed package: helpers over torch.distributed (distributed.py) and a checkpoint that one rank
writes (checkpoint.py). naive.py keeps two functions as a team first wrote them: they pass on one host and fail
across nodes (tests/test_known_bugs.py)."""
