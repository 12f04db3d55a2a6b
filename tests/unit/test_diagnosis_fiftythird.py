"""The fifty-third held-out batch's mended miss (bench/diagnosis/FIFTYTHIRD_BATCH.md): the scored run's own record,
with the cause and fix the lab must now give first, and the same record changed where it must not."""

from tests.unit.test_diagnosis_replicas import causes, sample

TOLD = [  # sample, cause, words of the title, words of the fix
    ("fiftythird_eval_lstm_translator", "padded-from-the-front-of-an-order",
     ["`items + items[:per_rank * world - len(items)]`, eval_lstm_translator.py:20", "on rank 1, whose share was padded"],
     ["enforce_sorted=False"]),
]

NOT_TOLD = [  # sample, the text of the job, what it becomes, the cause that must then not be told
    ("fiftythird_eval_lstm_translator", "items + items[: per_rank * world - len(items)]",
     "items + items[len(items) - (per_rank * world - len(items)):]", "padded-from-the-front-of-an-order"),
]


def test_a_share_padded_from_its_own_front_is_not_told_as_a_window_past_the_end():
    """The harmful top finding of this record before the mend: share-rounded-up ("clip the last window"), where the
    job pads the list so that no window runs past its end."""
    assert "share-rounded-up" not in causes(sample("fiftythird_eval_lstm_translator"))
