"""Every bad-input case raises (or warns) with a message naming the argument."""

import pytest

from tests.bad_inputs import harness

CASES = harness.all_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_loud(case, record_property):
    outcome, detail = harness.classify(case)
    record_property("bad_input_outcome", outcome)
    assert outcome == "clear", f"{case.name}: {outcome} ({detail})"


def test_harness_classifies_each_outcome():
    import numpy as np

    def raise_named():
        raise ValueError("`x` is bad")

    def raise_other():
        raise ValueError("bad")

    assert harness.classify(harness.Case("a", raise_named, "x"))[0] == "clear"
    def index_error():
        raise IndexError("`x` index 3 is out of bounds")

    assert harness.classify(harness.Case("b", raise_other, "x"))[0] == "unclear"
    assert harness.classify(harness.Case("b2", index_error, "x"))[0] == "unclear"
    assert harness.classify(harness.Case("c", lambda: np.nan, "x"))[0] == "silent_nonfinite"
    assert harness.classify(harness.Case("d", lambda: 0.75, "x"))[0] == "silent_finite"
