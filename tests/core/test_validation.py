import numpy as np
import pytest

from jaxlab.core import validation


def test_check_shape_message_names_argument():
    validation.check_shape("x", np.zeros((2, 3)), (2, None))
    with pytest.raises(ValueError, match=r"`x` must have shape \(2, \*\), got \(3, 3\)"):
        validation.check_shape("x", np.zeros((3, 3)), (2, None))


def test_check_in_range():
    validation.check_in_range("g", 0.5, 0.0, 1.0, high_inclusive=False)
    with pytest.raises(ValueError, match=r"`g` must lie in \[0, 1\)"):
        validation.check_in_range("g", 1.0, 0.0, 1.0, high_inclusive=False)
    with pytest.raises(ValueError, match="`g`"):
        validation.check_in_range("g", float("nan"), 0.0, 1.0)


def test_check_positive_int():
    validation.check_positive_int("n", 3)
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="`n` must be a positive integer"):
            validation.check_positive_int("n", bad)
