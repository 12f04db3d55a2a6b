"""Every held-out batch's mended records, told their cause and fix (each batch module's TOLD), and, where a batch has
them, the same records changed so that the mechanism did not happen, which must not be told it (NOT_TOLD). The tables
stay with their batch (tests/unit/test_diagnosis_<batch>.py), beside the tests that need more than a table."""

import importlib

import pytest

from tests.unit.test_diagnosis_held_out import assert_told
from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source

BATCHES = ("held_out", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth", "eighteenth",
           "nineteenth", "twentieth", "twentyfirst", "twentysecond", "twentythird", "twentyfourth",
           "twentyfifth", "twentysixth", "twentyseventh",
           "twentyeighth", "twentyninth", "thirtieth", "thirtyfirst", "thirtysecond", "thirtythird", "thirtyfourth", "thirtyfifth", "thirtysixth",
           "thirtyseventh", "thirtyeighth", "thirtyninth", "fortieth", "fortyfirst", "fortysecond", "fortythird", "fortyfourth", "fortyfifth", "fortysixth", "fortyseventh", "fortyeighth", "fortyninth", "fiftieth", "fiftyfirst", "fiftysecond", "fiftythird")
MODULES = [importlib.import_module(f"tests.unit.test_diagnosis_{batch}") for batch in BATCHES]
TOLD = [case for module in MODULES for case in module.TOLD]
NOT_TOLD = [case for module in MODULES for case in getattr(module, "NOT_TOLD", [])]


@pytest.mark.parametrize("name, cause, title, fix", TOLD, ids=[told[0] for told in TOLD])
def test_the_held_out_record_is_told_its_cause_and_fix(name, cause, title, fix):
    assert_told(name, cause, title, fix)


@pytest.mark.parametrize("name, was, now, cause", NOT_TOLD, ids=[case[0] for case in NOT_TOLD])
def test_the_record_changed_so_the_mechanism_did_not_happen_is_not_told_it(name, was, now, cause):
    assert cause not in causes(with_source(sample(name), was, now))
