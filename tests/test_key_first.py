"""The key first: every public function of ``jaxlab`` and ``pallas_kernels`` that takes a
PRNG key takes it as its first argument, and a legacy ``uint32`` key gives the same results
as a typed key.

The walk imports every module of both packages and reads the public functions: the names
in ``__all__`` where a module has one, else the public functions defined in the module
(classes, e.g. NamedTuple states with a ``key`` field, are not functions). A parameter
named ``key``, ``rng`` or ``prng_key`` must be the first; an integer ``seed`` must be the
first or keyword-only (a host-side configuration keyword, never a positional argument that
could be confused with the data). ``EXEMPT`` lists the exceptions, each with its reason.
"""

import functools
import importlib
import inspect
import pkgutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab
import pallas_kernels
from jaxlab import bco, dllm, gepc
from jaxlab.core import keys
from jaxlab.dllm import evaluation, poke, sr_smc, tasks
from jaxlab.gepc import baselines
from jaxlab.rfo import envs
from jaxlab.rfo import train as rfo_train
from tests import method_api

KEY_NAMES = ("key", "rng", "prng_key")
SEED = "seed"

EXEMPT = {
    "jaxlab.avatar.alignment.alignment_metrics":
        "the key is optional and comes last: None (the default) gives the exact expectation over "
        "uniformly random orders of tied scores, a key draws one such order instead.",
    "jaxlab.avatar.alignment.pair_metrics":
        "the key is optional and comes last: None (the default) gives the exact expectation over "
        "uniformly random orders of tied scores, a key draws one such order instead.",
    "jaxlab.avatar.alignment.pair_values":
        "the key is optional and comes last: None (the default) gives the exact expectation over "
        "uniformly random orders of tied scores, a key draws one such order instead.",
    "jaxlab.avatar.alignment.ranks_of_pairs":
        "the key is optional and comes last: None (the default) gives the exact expectation over "
        "uniformly random orders of tied scores, a key draws one such order instead.",
    "jaxlab.avatar.alignment.ranks_of_truth":
        "the key is optional and comes last: None (the default) gives the exact expectation over "
        "uniformly random orders of tied scores, a key draws one such order instead.",
    "jaxlab.gepc.train.diffusion_loss":
        "a loss differentiated with respect to its parameters: jax.grad / "
        "jax.value_and_grad and optax differentiate the first argument, so params come first "
        "(jax.value_and_grad(diffusion_loss)(params, model, x0, key)).",
}


def _modules():
    for pkg in (jaxlab, pallas_kernels):
        yield pkg
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            yield importlib.import_module(info.name)


def _public_functions(module):
    """(name where defined, function) of ``module``'s public functions."""
    if hasattr(module, "__all__"):
        names = list(module.__all__)
    else:
        names = [n for n, v in vars(module).items() if not n.startswith("_")
                 and inspect.isfunction(v) and v.__module__ == module.__name__]
    for name in names:
        fn = getattr(module, name)
        if inspect.isclass(fn) or inspect.ismodule(fn) or not callable(fn):
            continue
        base = fn.func if isinstance(fn, functools.partial) else fn
        where = getattr(base, "__module__", None) or module.__name__
        qual = name if isinstance(fn, functools.partial) else getattr(base, "__qualname__", name)
        yield f"{where}.{qual}", fn


def offence(fn) -> str | None:
    """Why ``fn``'s signature breaks the key-first rule, or None when it keeps it."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    names = list(params)
    for name in names:
        if name in KEY_NAMES and name != names[0]:
            return f"`{name}` is argument {names.index(name)} of ({', '.join(names)})"
    if (SEED in params and names[0] != SEED
            and params[SEED].kind is not inspect.Parameter.KEYWORD_ONLY):
        return (f"`seed` is positional argument {names.index(SEED)} of ({', '.join(names)}) "
                "(put it first or make it keyword-only)")
    return None


def _walk() -> dict:
    found = {}
    for module in _modules():
        for name, fn in _public_functions(module):
            found.setdefault(name, fn)
    return found


@functools.cache
def public_functions() -> dict:
    return _walk()


def test_public_functions_take_the_key_first():
    bad = {name: why for name, fn in public_functions().items()
           if name not in EXEMPT and (why := offence(fn))}
    assert not bad, "the key is not the first argument of:\n" + "\n".join(
        f"  {name}: {why}" for name, why in sorted(bad.items()))


def test_every_exemption_is_a_public_function_that_needs_it():
    found = public_functions()
    for name, reason in EXEMPT.items():
        assert name in found, f"exempt {name} is not a public function any more"
        assert offence(found[name]), f"exempt {name} takes the key first now: drop it"
        assert reason


def test_the_walk_sees_the_key_taking_entry_points_and_the_rule_bites():
    found = public_functions()
    for name in ("jaxlab.bco.run.run", "jaxlab.dllm.decoding.decode",
                 "jaxlab.dllm.path_smc.smc_decode", "jaxlab.dllm.path_smc.best_of_n",
                 "jaxlab.dllm.poke.collect_rollouts", "jaxlab.gepc.residual.gepc_residuals",
                 "jaxlab.gepc.baselines.score_norm", "jaxlab.rfo.train.maybe_evaluate",
                 "jaxlab.dllm.sr_smc.sr_smc_decode",
                 "pallas_kernels.sale.synthetic.structured_qkv"):
        assert name in found, name

    def data_then_key(x, key): ...
    def key_then_data(key, x): ...
    def positional_seed(x, seed=0): ...
    def keyword_seed(x, *, seed=0): ...
    def rng_second(x, rng): ...

    assert offence(data_then_key) and offence(positional_seed) and offence(rng_second)
    assert offence(key_then_data) is None and offence(keyword_seed) is None


# --- legacy uint32 keys and typed keys give the same results ----------------------------

DMASK, DV = 3, 4  # the toy denoiser of tests/dllm/test_smc.py: answer tokens 0..2, mask 3


def _toy_denoiser(tokens):
    """A context-dependent toy denoiser: logits [M, L, V], hidden [M, L, 2]."""
    m, ell = tokens.shape
    base = jnp.log(jnp.array([0.5, 0.3, 0.2, 1e-9]))
    shift = 0.7 * (tokens == 0).sum(1, keepdims=True).astype(jnp.float32)
    logits = jnp.broadcast_to(base, (m, ell, DV)) + shift[..., None] * jnp.eye(DV)[1]
    return logits, jnp.stack([tokens, tokens], -1).astype(jnp.float32)


def _toy_value(hidden, tokens):
    return hidden[:, :, 0].mean(1)


_PROMPT = np.zeros((2, 1), np.int32)
_DKW = dict(mask_id=DMASK, vocab_size=DV)
_X = np.asarray(jax.random.uniform(jax.random.key(11), (2, 8, 8, 1), minval=-1, maxval=1))
_TS = [0.1, 0.5]


def _score_fn(xt, t):
    return -xt * (1.0 + t[:, None, None, None])


def _eps_fn(xt, t):
    return 0.3 * xt


def _bco_run(key):
    seq = bco.losses.QuadraticSeq(0.3 * jnp.ones((20, 3)), jnp.float32(1.0))
    return bco.run(key, bco.gradient_variation(bco.ball(3), 0.1), seq, jnp.zeros(3))


def _particle_correctness(key):
    task = tasks.Addition(n_digits=2)

    def uniform(tokens):
        return (jnp.zeros((*tokens.shape, task.vocab_size)), jnp.zeros((*tokens.shape, 4)))

    prompt, _ = task.sample(jax.random.key(0), 2)
    return evaluation.particle_correctness(key, uniform, task, prompt, num_particles=3)


CALLS = {
    "bco.run": _bco_run,
    "dllm.decode": lambda k: dllm.decode(k, _toy_denoiser, _PROMPT, 3, temperature=1.0,
                                         **_DKW),
    "dllm.decode_threshold": lambda k: dllm.decode_threshold(k, _toy_denoiser, _PROMPT, 3,
                                                             **_DKW),
    "dllm.smc_decode": lambda k: dllm.smc_decode(k, _toy_denoiser, _PROMPT, 3,
                                                 num_particles=3, value_fn=_toy_value,
                                                 ess_threshold=1.0, **_DKW),
    "dllm.best_of_n": lambda k: dllm.best_of_n(k, _toy_denoiser, _PROMPT, 3, num_particles=3,
                                               **_DKW),
    "dllm.run_particles": lambda k: dllm.run_particles(k, _toy_denoiser, _PROMPT, 3,
                                                       num_particles=3, proposal="path",
                                                       temperature=0.0, **_DKW),
    "dllm.sr_smc.sr_smc_decode": lambda k: sr_smc.sr_smc_decode(
        k, _toy_denoiser, _PROMPT, 3, num_particles=3, block_length=1, **_DKW),
    "dllm.particle_correctness": _particle_correctness,
    "dllm.poke.collect_rollouts": lambda k: poke.collect_rollouts(k, _toy_denoiser, _PROMPT,
                                                                  3, mask_id=DMASK),
    "dllm.poke.collect_sibling_rollouts": lambda k: poke.collect_sibling_rollouts(
        k, _toy_denoiser, _PROMPT, 3, siblings=2, mask_id=DMASK),
    "gepc.consistency_features": lambda k: gepc.consistency_features(k, _score_fn, _X, _TS),
    "gepc.gepc_residuals": lambda k: gepc.gepc_residuals(k, _score_fn, _X, _TS),
    "gepc.baselines.score_norm": lambda k: baselines.score_norm(k, _eps_fn, _X, num_noise=2),
    "gepc.baselines.denoising_error_map": lambda k: baselines.denoising_error_map(
        k, _eps_fn, _X, _TS),
    "rfo.train.maybe_evaluate": lambda k: rfo_train.maybe_evaluate(
        k, True, lambda key, p: jax.random.normal(key) + p, 1.0),
}
# decode_threshold is greedy (its key is unused); every other call draws from its key.
DETERMINISTIC = {"dllm.decode_threshold"}


@pytest.mark.heavy
@pytest.mark.parametrize("name", sorted(CALLS))
def test_legacy_and_typed_keys_give_the_same_results(name):
    typed = CALLS[name](jax.random.key(5))
    legacy = CALLS[name](jax.random.PRNGKey(5))
    method_api.assert_trees_close(typed, legacy, rtol=0, atol=0, what=name)
    if name not in DETERMINISTIC:  # the key is used: another key, other draws
        other = method_api.host_leaves(CALLS[name](jax.random.key(6)))
        assert any(not np.array_equal(a, b) for a, b in
                   zip(method_api.host_leaves(typed), other, strict=True)), name


@pytest.mark.heavy
@pytest.mark.parametrize("method", ["bco", "dllm", "gepc", "qlearning"])
def test_init_and_step_take_legacy_and_typed_keys_alike(method):
    alg, init_args, step_args = method_api.build(method)

    def one(key):
        k_init, k_step = jax.random.split(key)
        return alg.step(k_step, alg.init(k_init, *init_args), *step_args)

    method_api.assert_trees_close(one(jax.random.key(3)), one(jax.random.PRNGKey(3)),
                                  rtol=0, atol=0, what=method)


@pytest.mark.parametrize("name,call", [
    ("bco.run", lambda: bco.run(bco.gradient_variation(bco.ball(3), 0.1), jax.random.key(0),
                                bco.losses.QuadraticSeq(jnp.zeros((4, 3)), jnp.float32(1.0)),
                                jnp.zeros(3))),
    ("dllm.decode with a seed", lambda: dllm.decode(0, _toy_denoiser, _PROMPT, 3, **_DKW)),
    ("gepc.gepc_residuals", lambda: gepc.gepc_residuals(_score_fn, _X, jax.random.key(0), _TS)),
    ("baselines.score_norm", lambda: baselines.score_norm(_eps_fn, _X, jax.random.key(0))),
    ("as_key of an int seed", lambda: keys.as_key(0)),
])
def test_a_non_key_in_the_key_position_raises_naming_key(name, call):
    with pytest.raises(TypeError, match="`key`"):
        call()


def test_rfo_env_step_in_another_order_raises_naming_the_argument():
    state = envs.EnvState(None, jnp.zeros(2), jnp.int32(0), jnp.float32(0.0))
    with pytest.raises(TypeError, match="`task`.*step\\(task, state, action\\)"):
        envs.step(state, None, jnp.zeros(1))
    with pytest.raises(TypeError, match="`key`"):
        envs.reset(None, jax.random.key(0))
