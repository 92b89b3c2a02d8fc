"""Correctness twist: a learned estimate of P(correct | partial unmasking path).

A small MLP on the denoiser's final hidden states predicts, at every step t of a decode,
the probability that the particle's *finished* answer passes the task's verifier. It is
trained with binary cross-entropy on labelled rollouts of training problems and plugged
into ``path_smc`` as its ``value_fn``, V(s_t) = log P(correct | s_t), so the existing
twist machinery steers SMC by it and the ``"last_value"`` selection picks by it.

**Features** (``features``): per sequence, the mean final hidden state over the still-masked
answer positions, the mean over the unmasked answer positions and the fraction masked,
[2 D + 1] (the context part of the POKE head's input, ``poke.ValueHead.positions``,
without its per-position term). They are read off the pass the decoder makes anyway.

**Rollouts** (``collect_rollouts``): N particles per problem of the particle proposal
(``path_smc.SMCConfig``: proposal, policy, temperatures, blocks, the greedy reference),
run as ``path_smc.best_of_n`` runs them (same keys, same steps: the particles are
``run_particles(..., resample=False)``'s, tested), keeping per step the features, L_t,
an optional reference value V(s_t) (e.g. the POKE head) and, per particle, the
verifier's 0/1 label of the finished answer. Every (particle, step) row gets its
particle's label.

**Fit** (``fit``): BCE with logits, AdamW, minibatches of rows; the validation split is by
*problem* (a problem's rows are all in or all out), the features standardised by the
training rows' mean and std (kept in the params), the params of the lowest validation
loss over the evaluations kept, stopping after ``patience`` evaluations without a better
one.

**The twist in path_smc** (``make_twist_fn``; ``path_smc`` docstring). At step t the pass
on s_t gives V_t = log P(correct | s_t) and log w += beta_V (V_t - V_{t-1}) (V_{-1} = 0;
V_0 is the same for all particles of a problem: nothing is committed); the last step
removes beta_V V_{S-1}. So the weighted particles before step t's resampling target
gamma_t proportional to q(s_{0:t}) exp(beta L_t) P(correct | s_t)^beta_V, with beta_V =
``twist_scale`` acting as the inverse temperature of the twist, and the final target is
path_smc's pi, untouched: the twist changes which particles survive resampling only.

What follows Zhao et al. (2024, "Probabilistic Inference in Language Models via Twisted
Sequential Monte Carlo"): intermediate targets twisted by psi_t(s_{1:t}), incremental
weights carrying psi_t / psi_{t-1}, and a twist that estimates the expected future
potential, here the verifier's 0/1: the optimal twist for a binary potential phi is
psi_t = P(phi = 1 | s_{1:t}) under the sampling process, which a classifier fit by BCE on
labelled rollouts estimates (their FUDGE-style baseline; they also learn twists
contrastively, which we do not). What is ours: the diffusion setting (a partial path is
a set of committed positions, not a prefix), the features, rollouts of the path proposal
rather than of the base model (so the head estimates P(correct | s_t) when the proposal
finishes the decode, with no resampling), a final potential dropped at the end (V(s_S)
:= 0 as for POKE, no verifier at decode time) instead of phi, the Path-LL weights with no
proposal correction (``path_smc``), the ``"last_value"`` selection and the diagnostics.

**NFE** (``head_flops``). The twist needs no denoiser pass: the features come from the
hidden states of the step's own pass, so NFE (denoiser passes) stays steps x N per
problem. The head's own cost, one small MLP per particle per step plus the two masked
means over A x D, is reported beside it in FLOPs (``head_flops``).

Diagnostics: ``brier``, ``reliability`` (equal-width bins: counts, mean predicted,
observed rate), ``auroc_within`` (right-vs-wrong sibling pairs of the same problem ordered
correctly, ties 1/2, pooled over problems), ``top1_on_mixed`` (the top-scored particle
is right, on problems with some particles right and some wrong) and ``ranking_table``
(both at fractions of the decode, for several scores side by side).

Checks (eager, at the Python boundary): ``collect_rollouts`` validates ``prompt``,
``num_particles`` and the proposal (as ``path_smc.smc``); ``fit`` the sizes, ``lr``,
``val_fraction`` and the rollouts' shapes, and that both splits hold a problem.
"""

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxlab.core import validation
from jaxlab.core.keys import as_key
from jaxlab.core.types import Array, PRNGKey
from jaxlab.dllm import decoding, path_smc

__all__ = ["Rollouts", "Fit", "Reliability", "features", "num_features", "collect_rollouts",
           "init_head", "abstract_head", "head_logits", "head_flops", "make_twist_fn",
           "bce", "fit", "brier", "reliability", "auroc_within", "top1_on_mixed",
           "rank_step", "ranking_table"]

# verify_fn(prompt [M, P], answer [M, A]) -> [M] bool: the task's verifier.
VerifyFn = Callable[[Array, Array], Array]


def num_features(d_model: int) -> int:
    """Width of ``features``: 2 * d_model + 1."""
    validation.check_positive_int("d_model", d_model)
    return 2 * int(d_model) + 1


def features(hidden: Array, masked: Array) -> Array:
    """[mean h over masked answer positions, mean h over unmasked ones, fraction masked].

    Args:
      hidden: [M, A, D] the answer positions' final hidden states.
      masked: [M, A] bool, still masked.

    Returns:
      [M, 2 D + 1] float32 (a mean over no position is 0).

    Raises:
      ValueError: ``hidden`` is not 3-D or ``masked`` not [M, A].
    """
    validation.check_ndim("hidden", hidden, 3)
    validation.check_shape("masked", masked, np.shape(hidden)[:2])
    h = jnp.asarray(hidden).astype(jnp.float32)
    m = masked[..., None].astype(jnp.float32)
    n_m = jnp.sum(m, axis=1)
    n_u = h.shape[1] - n_m
    hbar_m = jnp.sum(h * m, axis=1) / jnp.maximum(n_m, 1.0)
    hbar_u = jnp.sum(h * (1.0 - m), axis=1) / jnp.maximum(n_u, 1.0)
    return jnp.concatenate([hbar_m, hbar_u, n_m / h.shape[1]], axis=-1)


class Rollouts(NamedTuple):
    """Labelled rollouts of P problems x N particles over S steps.

    Attributes:
      features: [P, N, S, F] ``features`` of the pass on s_t (t commits done).
      path_ll: [P, N, S] L_t, the Path LL of s_t.
      value: [P, N, S] the reference ``value_fn``'s V(s_t) (0 without one).
      correct: [P, N] bool, the verifier on the finished answer.
      answer: [P, N, A] int32 finished answers.
      final_path_ll: [P, N] L_S, the Path LL of the finished answer.
    """

    features: Array
    path_ll: Array
    value: Array
    correct: Array
    answer: Array
    final_path_ll: Array


def collect_rollouts(key: PRNGKey, denoise_fn: decoding.Denoiser, prompt: Array,
                     gen_length: int, *, num_particles: int, mask_id: int,
                     verify_fn: VerifyFn, value_fn: path_smc.ValueFn | None = None,
                     config: path_smc.SMCConfig | None = None, **options) -> Rollouts:
    """N particles of the proposal per problem, with features per step and labels.

    The particles are ``path_smc.run_particles(key, ..., resample=False)``'s (the keys split
    as there), i.e. best-of-N's; ``config`` / ``options`` give the proposal (``SMCConfig``
    fields; the resampling and selection fields are not read).

    Args:
      key: PRNG key.
      denoise_fn: tokens [M, L] -> (logits [M, L, V], hidden [M, L, D]).
      prompt: [P, Pl] int prompts.
      gen_length: answer length A.
      num_particles: N >= 1.
      mask_id: the tokenizer's mask id.
      verify_fn: (prompt [M, Pl], answer [M, A]) -> [M] bool, e.g. ``task.verify``.
      value_fn: a reference value (hidden, tokens) -> [M] recorded per step (the POKE
        head), or None.

    Returns:
      ``Rollouts`` with S = ``config.steps`` (default A) steps.

    Raises:
      ValueError: a bad ``prompt``, ``num_particles`` or proposal setting, or the
        ``value`` policy (it needs a position value function).
    """
    key = as_key(key)
    c = path_smc.smc_config(config, **options)
    if c.policy in decoding.HEAD_POLICIES:
        raise ValueError(f"`policy`={c.policy!r} is not supported here: pick one of "
                         f"{decoding.POLICIES}.")
    # The checks of path_smc.smc (and its init: prompt, vocabulary, value_fn).
    alg = path_smc.smc(denoise_fn, gen_length=gen_length, num_particles=num_particles,
                       mask_id=mask_id, value_fn=value_fn, config=c._replace(resample=False))
    alg.init(key, prompt)
    steps, block_length, _, _ = decoding.step_plan(gen_length, c.steps, c.block_length)
    feats, ll, val, tokens, final_ll = _rollouts(
        key, denoise_fn, jnp.asarray(prompt), gen_length, int(num_particles), mask_id,
        value_fn, c._replace(steps=steps, block_length=block_length,
                             temperature=float(c.temperature),
                             position_temperature=float(c.position_temperature)))
    p, n = prompt.shape[0], int(num_particles)
    answer = tokens[:, -gen_length:]
    ok = jnp.asarray(verify_fn(jnp.repeat(jnp.asarray(prompt), n, axis=0), answer))
    validation.check_shape("verify_fn(prompt, answer)", ok, (p * n,))
    per = lambda x: x.reshape(p, n, *x.shape[1:])  # noqa: E731
    return Rollouts(per(jnp.moveaxis(feats, 0, 1)), per(ll.T), per(val.T),
                    per(ok.astype(bool)), per(answer.astype(jnp.int32)), per(final_ll))


@functools.partial(jax.jit, static_argnums=(1, 3, 4, 5, 6, 7))
def _rollouts(key, denoise_fn, prompt, gen_length, n, mask_id, value_fn, c):
    """The scan of ``collect_rollouts``: path_smc.step without resampling, keeping the
    pass's features. -> (features [S, M, F], L_t [S, M], V_t [S, M], final tokens [M, L],
    L_S [M])."""
    steps, _, schedule, blocks = decoding.step_plan(gen_length, c.steps, c.block_length)
    m = prompt.shape[0] * n
    state = decoding.init_state(jnp.repeat(prompt, n, axis=0), gen_length, mask_id)
    prompt_len = prompt.shape[1]
    greedy = jnp.tile(jnp.arange(n) == 0, prompt.shape[0]) if c.greedy_reference else None

    def body(state, xs):
        t, key_t = xs
        _, k_step = jax.random.split(key_t)  # path_smc.step's split (k_res, k_step)
        logits, hidden = denoise_fn(state.tokens)
        feats = features(hidden[:, prompt_len:], state.order < 0)
        v = (jnp.zeros(m) if value_fn is None
             else value_fn(hidden, state.tokens).reshape(m).astype(jnp.float32))
        new, _, _ = decoding.decode_step(
            k_step, state, logits, jnp.asarray(schedule)[t], jnp.asarray(blocks)[t], t,
            mask_id=mask_id, prompt_len=prompt_len, policy=c.policy,
            temperature=c.temperature, block_length=c.block_length, proposal=c.proposal,
            position_temperature=c.position_temperature, deterministic=greedy,
            max_commit=int(np.max(schedule)))
        return new, (feats, state.path_ll, v)

    state, (feats, ll, val) = jax.lax.scan(
        body, state, (jnp.arange(steps), jax.random.split(key, steps)))
    return feats, ll, val, state.tokens, state.path_ll


def init_head(key: PRNGKey, num_features: int, hidden: int = 64, depth: int = 2) -> dict:
    """Params of a fresh head: ``depth`` GELU layers of width ``hidden``, then one logit.

    Returns:
      {"feature_mean" [F], "feature_std" [F] (0 and 1: ``fit`` sets them), "dense_i":
      {"w", "b"} for i < depth, "out": {"w" [hidden, 1], "b" [1]}} (LeCun-normal weights,
      zero biases).

    Raises:
      ValueError: ``num_features``, ``hidden`` or ``depth`` is not a positive int.
    """
    for name, v in (("num_features", num_features), ("hidden", hidden), ("depth", depth)):
        validation.check_positive_int(name, v)
    keys = jax.random.split(as_key(key), depth + 1)
    widths = [int(num_features)] + [int(hidden)] * int(depth) + [1]
    init = jax.nn.initializers.lecun_normal()
    params = {"feature_mean": jnp.zeros(num_features), "feature_std": jnp.ones(num_features)}
    for i, k in enumerate(keys):
        name = "out" if i == depth else f"dense_{i}"
        params[name] = {"w": init(k, (widths[i], widths[i + 1]), jnp.float32),
                        "b": jnp.zeros(widths[i + 1])}
    return params


def abstract_head(num_features: int, hidden: int = 64, depth: int = 2) -> dict:
    """``init_head``'s params as ``jax.ShapeDtypeStruct`` (the template to restore into)."""
    for name, v in (("num_features", num_features), ("hidden", hidden), ("depth", depth)):
        validation.check_positive_int(name, v)
    return jax.eval_shape(lambda: init_head(jax.random.key(0), num_features, hidden, depth))


def _depth(params: dict) -> int:
    return sum(1 for k in params if k.startswith("dense_"))


def head_logits(params: dict, feats: Array) -> Array:
    """Logit of P(correct) for features [..., F] -> [...].

    Raises:
      ValueError: ``feats``' last axis is not the head's F.
    """
    f = np.shape(params["feature_mean"])[0]
    if np.ndim(feats) < 1 or np.shape(feats)[-1] != f:
        raise ValueError(f"`feats` must end in the head's {f} features, got shape "
                         f"{tuple(np.shape(feats))}.")
    z = (feats - params["feature_mean"]) / params["feature_std"]
    for i in range(_depth(params)):
        z = jax.nn.gelu(z @ params[f"dense_{i}"]["w"] + params[f"dense_{i}"]["b"])
    return (z @ params["out"]["w"] + params["out"]["b"])[..., 0]


def head_flops(params: dict, answer_len: int) -> int:
    """FLOPs of one twist call per sequence: the two masked means over A x D (2 A D
    multiply-adds each, counted as 2 FLOPs per multiply-add) plus the MLP (standardising
    and 2 * fan_in * fan_out per layer; the activations not counted)."""
    validation.check_positive_int("answer_len", answer_len)
    f = int(params["feature_mean"].shape[0])
    d = (f - 1) // 2
    mlp = 2 * f + sum(2 * int(np.prod(params[k]["w"].shape)) + int(params[k]["b"].shape[0])
                      for k in params if k.startswith("dense_") or k == "out")
    return 2 * 2 * int(answer_len) * d + mlp


def make_twist_fn(params: dict, prompt_len: int, mask_id: int) -> path_smc.ValueFn:
    """value_fn(hidden [M, L, D], tokens [M, L]) -> [M] log P(correct | s_t) for
    ``path_smc`` (twist and ``"last_value"`` / ``"value"`` selections; module docstring).

    Raises:
      ValueError: ``prompt_len`` or ``mask_id`` is not an int >= 0.
    """
    validation.check_min_count("prompt_len", prompt_len, 0, "the answer starts after it")
    validation.check_min_count("mask_id", mask_id, 0, "a token id")

    def twist_fn(hidden, tokens):
        h = jax.lax.stop_gradient(hidden[:, prompt_len:])
        feats = features(h, tokens[:, prompt_len:] == mask_id)
        return jax.nn.log_sigmoid(head_logits(params, feats))

    return twist_fn


def bce(params: dict, feats: Array, labels: Array) -> Array:
    """Mean binary cross-entropy of the head's logits on features [M, F], labels [M]."""
    validation.check_shape("labels", labels, np.shape(feats)[:-1])
    return jnp.mean(optax.sigmoid_binary_cross_entropy(head_logits(params, feats),
                                                       labels.astype(jnp.float32)))


class Fit(NamedTuple):
    """``fit``'s result.

    Attributes:
      params: the head's params at the lowest validation loss.
      train_loss: [E] mean training BCE over each evaluation interval.
      val_loss: [E] validation BCE at each evaluation (E evaluations until stopped).
      best_step: optimiser steps done at the kept params.
      train_problems, val_problems: indices of the problems in each split.
    """

    params: dict
    train_loss: np.ndarray
    val_loss: np.ndarray
    best_step: int
    train_problems: np.ndarray
    val_problems: np.ndarray


def _check_rollouts(rollouts) -> None:
    if not isinstance(rollouts, Rollouts):
        raise TypeError(f"`rollouts` must be a correctness.Rollouts, got "
                        f"{type(rollouts).__name__}.")
    validation.check_ndim("rollouts.features", rollouts.features, 4)
    p, n, s, _ = np.shape(rollouts.features)
    validation.check_shape("rollouts.correct", rollouts.correct, (p, n))
    validation.check_shape("rollouts.path_ll", rollouts.path_ll, (p, n, s))
    validation.check_finite("rollouts.features", rollouts.features)


def fit(key: PRNGKey, rollouts: Rollouts, *, hidden: int = 64, depth: int = 2,
        steps: int = 2000, batch_size: int = 512, lr: float = 1e-3,
        weight_decay: float = 1e-4, val_fraction: float = 0.2, eval_every: int = 100,
        patience: int = 5) -> Fit:
    """Fits the head by BCE on every (problem, particle, step) row of ``rollouts``.

    Args:
      key: PRNG key (the split, the init and the minibatches).
      rollouts: ``collect_rollouts``' labelled rollouts.
      hidden, depth: the MLP (``init_head``).
      steps: at most this many AdamW steps (batches of ``batch_size`` rows, with
        replacement), evaluated every ``eval_every`` steps.
      lr, weight_decay: AdamW's (cosine-decayed learning rate).
      val_fraction: share of the problems held out (by problem, never by row).
      patience: stop after this many evaluations without a lower validation loss.

    Returns:
      ``Fit`` (the params of the lowest validation BCE).

    Raises:
      ValueError: bad sizes, ``lr``, ``val_fraction``, or fewer than two problems.
      TypeError: ``rollouts`` is not a ``Rollouts``.
    """
    for name, v in (("steps", steps), ("batch_size", batch_size), ("eval_every", eval_every),
                    ("patience", patience), ("hidden", hidden), ("depth", depth)):
        validation.check_positive_int(name, v)
    validation.check_in_range("lr", lr, 0.0, low_inclusive=False)
    validation.check_finite("lr", lr)
    validation.check_in_range("weight_decay", weight_decay, 0.0)
    validation.check_in_range("val_fraction", val_fraction, 0.0, 1.0, low_inclusive=False,
                              high_inclusive=False)
    _check_rollouts(rollouts)
    p, n, s, f = np.shape(rollouts.features)
    validation.check_min_count("rollouts problems", p, 2, "one to train on and one to hold "
                               "out; `rollouts`")
    key = as_key(key)
    k_split, k_init, k_batch = jax.random.split(key, 3)
    order = np.asarray(jax.random.permutation(k_split, p))
    n_val = min(max(1, int(round(val_fraction * p))), p - 1)
    val_idx, train_idx = np.sort(order[:n_val]), np.sort(order[n_val:])

    def rows(idx):
        x = jnp.asarray(rollouts.features)[idx].reshape(-1, f).astype(jnp.float32)
        y = jnp.broadcast_to(jnp.asarray(rollouts.correct)[idx][..., None],
                             (len(idx), n, s)).reshape(-1)
        return x, y

    (x_tr, y_tr), (x_va, y_va) = rows(train_idx), rows(val_idx)
    params = init_head(k_init, f, hidden, depth)
    params["feature_mean"] = jnp.mean(x_tr, axis=0)
    params["feature_std"] = jnp.maximum(jnp.std(x_tr, axis=0), 1e-6)
    trainable = {k: v for k, v in params.items() if not k.startswith("feature_")}
    frozen = {k: v for k, v in params.items() if k.startswith("feature_")}
    opt = optax.adamw(optax.cosine_decay_schedule(lr, steps), weight_decay=weight_decay)

    @jax.jit
    def chunk(tr, opt_state, k, x_tr, y_tr, x_va, y_va):
        def one(carry, k_b):
            tr, o = carry
            idx = jax.random.randint(k_b, (batch_size,), 0, x_tr.shape[0])
            loss, g = jax.value_and_grad(lambda q: bce({**q, **frozen}, x_tr[idx],
                                                       y_tr[idx]))(tr)
            upd, o = opt.update(g, o, tr)
            return (optax.apply_updates(tr, upd), o), loss

        (tr, opt_state), losses = jax.lax.scan(one, (tr, opt_state),
                                               jax.random.split(k, eval_every))
        return tr, opt_state, jnp.mean(losses), bce({**tr, **frozen}, x_va, y_va)

    opt_state = opt.init(trainable)
    best, best_val, best_step, since = trainable, np.inf, 0, 0
    train_loss, val_loss = [], []
    for i in range(-(-steps // eval_every)):
        trainable, opt_state, tl, vl = chunk(trainable, opt_state,
                                             jax.random.fold_in(k_batch, i),
                                             x_tr, y_tr, x_va, y_va)
        train_loss.append(float(tl))
        val_loss.append(float(vl))
        if val_loss[-1] < best_val:
            best, best_val, best_step, since = trainable, val_loss[-1], (i + 1) * eval_every, 0
        else:
            since += 1
            if since >= patience:
                break
    return Fit({**best, **frozen}, np.asarray(train_loss), np.asarray(val_loss), best_step,
               train_idx, val_idx)


def brier(prob: Array, label: Array) -> Array:
    """Mean squared error of probabilities [M] against 0/1 labels [M]."""
    validation.check_shape("label", label, np.shape(prob))
    return jnp.mean((jnp.asarray(prob, jnp.float32) - jnp.asarray(label, jnp.float32)) ** 2)


class Reliability(NamedTuple):
    """Reliability-diagram bins: ``edges`` [K + 1]; per bin ``counts`` [K], ``mean_predicted``
    [K] and ``observed_rate`` [K] (NaN in an empty bin)."""

    edges: Array
    counts: Array
    mean_predicted: Array
    observed_rate: Array


def reliability(prob: Array, label: Array, num_bins: int = 10) -> Reliability:
    """Equal-width bins of [0, 1] (the last one closed): per bin the count, the mean
    predicted probability and the observed rate of label 1.

    Args:
      prob: [M] probabilities in [0, 1].
      label: [M] 0/1 labels.
      num_bins: K >= 1.
    """
    validation.check_positive_int("num_bins", num_bins)
    validation.check_shape("label", label, np.shape(prob))
    p = jnp.asarray(prob, jnp.float32)
    y = jnp.asarray(label, jnp.float32)
    b = jnp.clip(jnp.floor(p * num_bins).astype(jnp.int32), 0, num_bins - 1)
    one = jax.nn.one_hot(b, num_bins)  # [M, K]
    counts = jnp.sum(one, axis=0)
    safe = jnp.where(counts > 0, counts, 1.0)
    empty = counts == 0
    return Reliability(jnp.linspace(0.0, 1.0, num_bins + 1), counts.astype(jnp.int32),
                       jnp.where(empty, jnp.nan, p @ one / safe),
                       jnp.where(empty, jnp.nan, y @ one / safe))


def auroc_within(scores: Array, labels: Array) -> Array:
    """Within-problem AUROC: over every (right, wrong) pair of particles of the same
    problem, pooled over problems, the share the score orders right above wrong (ties 1/2).

    Args:
      scores: [P, N].
      labels: [P, N] bool.

    Returns:
      scalar (NaN when no problem has both a right and a wrong particle).
    """
    validation.check_ndim("scores", scores, 2)
    validation.check_shape("labels", labels, np.shape(scores))
    s = jnp.asarray(scores, jnp.float32)
    y = jnp.asarray(labels, bool)
    pair = y[:, :, None] & ~y[:, None, :]  # [P, i right, j wrong]
    win = jnp.where(s[:, :, None] > s[:, None, :], 1.0,
                    jnp.where(s[:, :, None] == s[:, None, :], 0.5, 0.0))
    total = jnp.sum(pair)
    return jnp.where(total > 0, jnp.sum(win * pair) / jnp.maximum(total, 1), jnp.nan)


def top1_on_mixed(scores: Array, correct: Array) -> tuple[Array, Array]:
    """Whether each problem's top-scored particle is right (ties: the lowest index, as
    ``path_smc.best_particle``), and which problems are mixed.

    Args:
      scores: [P, N].
      correct: [P, N] bool.

    Returns:
      (hit [P] bool, mixed [P] bool: some particles right and some wrong); the top-1
      rate on mixed problems is ``hit[mixed].mean()``.
    """
    validation.check_ndim("scores", scores, 2)
    validation.check_shape("correct", correct, np.shape(scores))
    c = jnp.asarray(correct, bool)
    hit = jnp.take_along_axis(c, jnp.argmax(jnp.asarray(scores), axis=1)[:, None], 1)[:, 0]
    return hit, jnp.any(c, axis=1) & ~jnp.all(c, axis=1)


def rank_step(fraction: float, steps: int) -> int:
    """The step read at ``fraction`` of an S-step decode: round(f S) clipped to [1, S - 1]
    (as the study's preconditions; 0 for S = 1)."""
    validation.check_positive_int("steps", steps)
    validation.check_in_range("fraction", fraction, 0.0, 1.0)
    return int(min(max(round(fraction * steps), 1), steps - 1)) if steps > 1 else 0


def ranking_table(scores: dict, correct: Array,
                  fractions: tuple[float, ...] = (0.25, 0.5, 0.75)) -> dict:
    """Top-1 on mixed problems and within-problem AUROC of several scores at fractions
    of the decode.

    Args:
      scores: {name: [P, N, S] score of each particle at each step}.
      correct: [P, N] bool.
      fractions: fractions of the S steps (``rank_step``).

    Returns:
      {f"{fraction:g}": {"step": t, "mixed_problems": count, name: {"top1": rate,
      "auroc_within": value}}} (rates as floats, None when no problem is mixed).
    """
    if not scores:
        raise ValueError("`scores` must name at least one score.")
    shapes = {k: np.shape(v) for k, v in scores.items()}
    first = next(iter(shapes.values()))
    if len(first) != 3 or any(s != first for s in shapes.values()):
        raise ValueError(f"`scores` must all be [P, N, S] arrays of one shape, got {shapes}.")
    validation.check_shape("correct", correct, first[:2])
    out = {}
    for f in fractions:
        t = rank_step(f, first[2])
        row = {"step": t}
        for name, sc in scores.items():
            hit, mixed = (np.asarray(a) for a in top1_on_mixed(np.asarray(sc)[:, :, t],
                                                                correct))
            row["mixed_problems"] = int(mixed.sum())
            row[name] = {"top1": float(hit[mixed].mean()) if mixed.any() else None,
                         "auroc_within": float(auroc_within(np.asarray(sc)[:, :, t],
                                                            correct))}
        out[f"{f:g}"] = row
    return out
