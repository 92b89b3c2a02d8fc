"""Misuse of ``jaxlab.dllm.compare``: each call raises a ValueError / TypeError naming the
argument or the contender, and, where the input allows it, before any problem is decoded
(``comparison.decode_items`` is replaced by a function that fails the test)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import dllm
from jaxlab.core import protocol
from jaxlab.dllm import comparison
from tests.dllm.test_compare import Reverse  # the guide's task: the prompt reversed


def oracle(tokens):
    target = jnp.concatenate([tokens[:, :4], tokens[:, 3::-1]], axis=1)
    return 2.0 * jax.nn.one_hot(target, 6), tokens[..., None].astype(jnp.float32)


VALUE = lambda hidden, tokens: jnp.zeros(tokens.shape[0])  # noqa: E731
PROBLEM = dllm.Problem(Reverse(), oracle, VALUE, num_particles=2)
B = protocol.Builtin
G = protocol.Goal


def _user(values):
    """A contender of the user's returning ``values(n)`` (and recording its calls)."""
    calls = []

    def run(items, problem):
        calls.append(items.split)
        return values(items.index.size)

    return protocol.Contender(run), calls


CASES = [  # (compare's keyword arguments, what the message names)
    ({"contenders": "poke_smc"}, "`contenders`"),
    ({"contenders": ("poke_smc", "beam")}, "beam"),
    ({"contenders": ("greedy", "greedy")}, "unique"),
    ({"contenders": ()}, "`contenders`"),
    ({"contenders": {"mine": None}}, r"contenders\['mine'\]"),
    ({"contenders": {"": "greedy"}}, "`contenders` names"),
    ({"contenders": {"a": B("beam")}}, r"contenders\['a'\]"),
    ({"contenders": {"a": 3}}, r"contenders\['a'\]"),
    ({"contenders": {"smc": B("sr_smc", [{"weight_scale": 2.0}])}}, r"contenders\['smc'\]"),
    ({"contenders": {"g": B("greedy", [])}}, r"contenders\['g'\]"),
    ({"contenders": {"b": B("best_of_n", {"position_temperature": 1.0})}},
     r"contenders\['b'\]"),
    ({"contenders": {"b": B("best_of_n", [{"position_temperature": 1.0}] * 2)}}, "repeats"),
    ({"contenders": {"p": B("path_smc", protocol.Stages(([{"weight_scale": 1.0}], [])))}},
     r"contenders\['p'\]"),
    ({"contenders": {"p": B("poke_smc", [{"twist": 1.0}])}}, r"contenders\['p'\]"),
    ({"contenders": {"mine": protocol.Contender(3)}}, r"contenders\['mine'\]"),
    ({"problem": (Reverse(), oracle)}, "`problem`"),
    ({"problem": PROBLEM._replace(num_particles=0)}, "num_particles"),
    ({"problem": PROBLEM._replace(value_fn=None)}, "problem.value_fn"),
    ({"problem": PROBLEM._replace(proposal="path")}, "problem.proposal"),
    ({"problem": PROBLEM._replace(denoise_fn=3)}, "problem.denoise_fn"),
    ({"problem": PROBLEM._replace(task="addition")}, "problem.task"),
    ({"settings": {"batch": 2}}, "`settings`"),
    ({"metrics": ("pass_at_n",)}, "`metrics`"),
    ({"metrics": "accuracy"}, "`metrics`"),
    ({"metrics": ("accuracy", "accuracy")}, "`metrics`"),
    ({"goals": (G("poke_smc", "beam"),)}, "beam"),
    ({"goals": (G("greedy", "greedy"),)}, "greedy"),
    ({"pairs": (("greedy", "beam"),)}, "beam"),
    ({"pairs": (("greedy", "greedy"),)}, "greedy"),
    ({"tuning": True}, "`tuning`"),
    ({"tuning": -1}, "`tuning"),
    ({"tuning": 0, "contenders": ("best_of_n",)}, "`tuning`"),
    ({"seeds": 1}, "`seeds`"),
    ({"seeds": 2.5}, "`seeds`"),
    ({"resamples": 1}, "`resamples`"),
    ({"level": 1.5}, "`level`"),
    ({"batch": 0}, "`batch`"),
    ({"progress": "yes"}, "`progress`"),
    ({"results_path": 3}, "`results_path`"),
]


@pytest.fixture
def no_decoding(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("a problem was decoded before the checks")

    monkeypatch.setattr(comparison, "decode_items", never)


@pytest.mark.parametrize("kwargs, match", CASES)
def test_misuse_raises_naming_the_argument_before_decoding(kwargs, match, no_decoding):
    args = {"problem": PROBLEM, "contenders": ("poke_smc", "greedy"), "tuning": 2,
            "seeds": 2, "progress": False, **kwargs}
    with pytest.raises((ValueError, TypeError), match=match):
        dllm.compare(jax.random.key(0), args.pop("problem"), **args)


def test_results_path_a_folder_or_unwritable_raises_before_decoding(tmp_path, no_decoding):
    for path in (tmp_path, "/proc/no/such/file.jsonl"):
        with pytest.raises(ValueError, match="`results_path`"):
            dllm.compare(jax.random.key(0), PROBLEM, contenders=("greedy", "best_of_n"),
                         tuning=2, seeds=2, progress=False, results_path=path)


@pytest.mark.parametrize("values, match", [
    (lambda n: np.full(n, np.nan), "NaN"),
    (lambda n: np.full(n, np.inf), "inf"),
    (lambda n: np.zeros(n + 1), "shape"),
    (lambda n: np.array(["right"] * n), "dtype"),
    (lambda n: np.full(n, 2.0), "range"),
    (lambda n: np.full(n, -np.inf), "inf"),
])
def test_a_user_contender_returning_what_accuracy_does_not_allow_is_named(values, match,
                                                                          no_decoding):
    mine, calls = _user(values)
    with pytest.raises((ValueError, TypeError), match=f"'mine'.*{match}|{match}.*'mine'"):
        dllm.compare(jax.random.key(0), PROBLEM, contenders={"mine": mine, "greedy": "greedy"},
                     tuning=0, seeds=2, progress=False)
    assert calls == ["test"]  # it ran once, on the test items, and was refused


def test_checks_run_before_a_user_contender(no_decoding):
    mine, calls = _user(lambda n: np.zeros(n))
    with pytest.raises(ValueError, match="`level`"):
        dllm.compare(jax.random.key(0), PROBLEM, contenders={"mine": mine, "greedy": "greedy"},
                     tuning=0, seeds=2, level=0.0, progress=False)
    assert calls == []
