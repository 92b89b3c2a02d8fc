"""Masked diffusion LMs (LLaDA): tasks, denoiser, training, decoding, POKE-SMC.

The decoding method follows the blackjax/optax shape (``jaxlab.core.types.Algorithm``)::

    alg = dllm.smc(denoise_fn, gen_length=A, num_particles=N, mask_id=m,
                   value_fn=None)              # POKE-SMC with a POKE value_fn
    state = alg.init(key, prompt)              # State: N all-mask particles per prompt [B, P]
    for key_t in jax.random.split(key, A):     # one step per denoising step (steps=A)
        state, info = alg.step(key_t, state)   # one unmasking step of every particle + ESS
    result = dllm.best_particle(state, A)      # DecodeResult: answer [B, A], path_ll, nfe

``smc_decode`` / ``run_particles`` are exactly this loop as a ``lax.scan``; ``best_of_n`` is
``smc(..., resample=False)`` without the twist (a ``value_fn`` there serves the ``"value"`` /
``"mix"`` selections only). ``State``, ``Info``, ``init`` and ``step`` are
the module-level pieces ``smc`` binds (``path_smc``). Greedy policy decoding has the same
shape: ``decoding.decoder(...)`` (``init``/``step`` over a ``DecodeState``), and ``decode``
is its scan; ``decode_threshold`` (Fast-dLLM, adaptive NFE) is a ``while_loop``.

A denoiser is any ``tokens [M, L] -> (logits [M, L, V], hidden [M, L, D])``, e.g.
``functools.partial(model.apply, graphdef, params)``. Everything here is pure JAX: the
experiment plumbing (model files, units, plots) is in ``experiments/dllm.py``.

Modules: ``tasks`` (verifiable reasoning tasks), ``model`` (LLaDA architecture),
``loading`` (LLaDA safetensors), ``train`` (masked-diffusion loss and trainer),
``decoding`` (policies, schedules, Path LL), ``path_smc`` (best-of-N, SMC, POKE-SMC),
``sr_smc`` (self-rewarding SMC as in its official code: blocks, threshold commits,
block-end resampling; the baseline POKE-SMC is compared with),
``poke`` (POKE value head), ``correctness`` (a learned P(correct | partial path): the
correctness twist and its diagnostics), ``weights`` (save and load a trained denoiser or value
head; a missing or mismatched folder raises), ``evaluation`` (pass@N, pass@k, best-of-N of N sampled
answers), ``config`` (experiment-config validation).

Your own task: any object with ``tasks.Task``'s fields; ``tasks.register_task`` (or
``config.task_refs``) makes the study binaries take it. The paper's comparison on it:
``dllm.compare(key, dllm.Problem(task, denoise_fn, value_fn), tuning=..., seeds=...)``
(``comparison``: POKE-SMC against greedy, best-of-N, Path-LL SMC and SR-SMC with their
declared grids tuned on validation problems, paired bootstrap CIs on test problems, the
paper's +2 points goal).
"""

from jaxlab.dllm import (
    comparison,
    config,
    correctness,
    decoding,
    evaluation,
    loading,
    model,
    path_smc,
    poke,
    sr_smc,
    tasks,
    train,
    weights,
)
from jaxlab.dllm.comparison import Problem, Proposal, compare, fit_value_fn
from jaxlab.dllm.decoding import (
    DecodeInfo,
    DecodeResult,
    DecodeState,
    decode,
    decode_threshold,
    decoder,
    path_log_likelihood,
)
from jaxlab.dllm.evaluation import best_of_n_correct, particle_correctness, pass_at_k, pass_at_n
from jaxlab.dllm.path_smc import (
    Info,
    State,
    best_of_n,
    best_particle,
    init,
    run_particles,
    smc,
    smc_decode,
    step,
)
from jaxlab.dllm.weights import (
    load_denoiser,
    load_value_head,
    save_denoiser,
    save_value_head,
)

__all__ = [
    "DecodeInfo", "DecodeResult", "DecodeState", "Info", "Problem", "Proposal", "State",
    "best_of_n", "best_of_n_correct", "best_particle", "compare", "comparison", "config",
    "correctness",
    "decode", "decode_threshold", "decoder", "decoding", "evaluation", "fit_value_fn",
    "init", "load_denoiser", "load_value_head", "loading", "model", "particle_correctness",
    "pass_at_k", "pass_at_n",
    "path_log_likelihood", "path_smc", "poke", "run_particles", "smc", "smc_decode",
    "save_denoiser", "save_value_head", "sr_smc", "step", "tasks", "train", "weights",
]
