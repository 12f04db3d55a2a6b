"""The training text, generated from a tiny grammar with a fixed seed: no download, the same bytes everywhere.

Plain Python (no torch), so the checker can import it too and recompute sizes and the word list.
"""

import random

SUBJECTS = ["the node", "a worker", "the agent", "each rank", "rank zero", "the store", "the model", "the sampler"]
VERBS = ["sends", "reads", "saves", "loads", "waits for", "averages", "checks", "restarts"]
OBJECTS = ["the snapshot", "a gradient", "the batch", "every shard", "the loss", "its weights", "a message",
           "the barrier"]
ENDINGS = [".", " again.", " at once.", " on the shared disk."]
SENTENCES = 1500
SEED = 4


def text() -> str:
    """SENTENCES short sentences, one per line."""
    rng = random.Random(SEED)
    lines = [f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}{rng.choice(ENDINGS)}"
             for _ in range(SENTENCES)]
    return "\n".join(lines) + "\n"


def words() -> set[str]:
    """Every word the grammar can produce: a sample from a model that learnt the text is made of these."""
    return {word.strip(".") for phrase in SUBJECTS + VERBS + OBJECTS + ENDINGS for word in phrase.split()} - {""}
