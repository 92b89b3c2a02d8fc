"""experiments.lib.timing: the interleaved best-of timer used for side-by-side ratios."""

import time

import pytest

from experiments.lib import timing


def test_interleaved_times_each_function_in_turn():
    calls = []

    def make(name, sleep):
        def fn():
            calls.append(name)
            time.sleep(sleep)
            return name
        return fn

    out = timing.best_times_interleaved({"a": make("a", 0.0), "b": make("b", 0.02)},
                                        repeats=2)
    # one warm-up call of each, then rounds of one call each (never two of a kind in a row)
    assert calls == ["a", "b", "a", "b", "a", "b"]
    assert set(out) == {"a", "b"}
    assert out["b"] >= 0.02 > out["a"]


def test_interleaved_needs_a_positive_repeat_count():
    with pytest.raises(ValueError, match="`repeats`"):
        timing.best_times_interleaved({"a": lambda: None}, repeats=0)


def test_best_time_is_the_one_contender_case():
    calls = []
    assert timing.best_time(lambda: calls.append(1), repeats=2) < 1.0
    assert len(calls) == 3  # warm-up + 2 rounds
    calls.clear()
    timing.best_time(lambda: calls.append(1), repeats=2, warmup=False)
    assert len(calls) == 2


def test_times_interleaved_keeps_every_repeat_and_spread_summarises_them():
    out = timing.times_interleaved({"a": lambda: None, "b": lambda: time.sleep(0.01)},
                                   repeats=3)
    assert [len(v) for v in out.values()] == [3, 3] and min(out["b"]) >= 0.01
    sp = timing.spread([3.0, 1.0, 2.0, 5.0])
    assert sp == {"min": 1.0, "q25": 1.75, "q75": 3.5, "iqr": 1.75}
    with pytest.raises(ValueError, match="`times`"):
        timing.spread([])
