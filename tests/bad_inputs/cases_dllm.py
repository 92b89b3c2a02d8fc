"""Bad-input cases for ``jaxlab.dllm`` (decoding, SMC, POKE, model, tasks, training, config)."""

import functools
import tempfile

import jax
import jax.numpy as jnp
import numpy as np

from experiments.configs import dllm as dllm_configs
from jaxlab import dllm
from jaxlab.dllm import comparison, decoding, evaluation, loading, path_smc, poke, sr_smc, tasks
from jaxlab.dllm import config as config_lib
from jaxlab.dllm import model as model_lib
from jaxlab.dllm import train as train_lib
from tests.bad_inputs.harness import Case

MASK, V = 3, 4
KEY = jax.random.key(0)
GOOD = np.zeros((2, 1), np.int32)
GOOD2 = np.zeros((2, 2), np.int32)  # two prompts of tasks.Addition(1)


def toy(tokens):
    """Context-free denoiser over V = 4 tokens (mask 3); prompt length 1."""
    m, n = tokens.shape
    logits = jnp.broadcast_to(jnp.log(jnp.array([0.5, 0.3, 0.2, 1e-9])), (m, n, V))
    return logits, jax.nn.one_hot(tokens, V)


def nan_value_fn(hidden, tokens):
    return jnp.full(tokens.shape[0], jnp.nan)


def zero_value_fn(hidden, tokens):
    return jnp.zeros(tokens.shape[0])


def zero_positions(hidden, tokens):
    return jnp.zeros((tokens.shape[0], tokens.shape[1] - 1))


def dec(prompt=GOOD, gen=2, **kw):
    kw = {"mask_id": MASK, "vocab_size": V, **kw}
    return decoding.decode(KEY, toy, prompt, gen, **kw)


def sdec(prompt=GOOD, gen=2, **kw):
    kw = {"mask_id": MASK, "vocab_size": V, "num_particles": 2, **kw}
    return path_smc.smc_decode(KEY, toy, prompt, gen, **kw)


def srs(prompt=GOOD, gen=2, **kw):
    kw = {"mask_id": MASK, "vocab_size": V, "num_particles": 2,
          "block_length": 1, **kw}
    return sr_smc.sr_smc_decode(KEY, toy, prompt, gen, **kw)


def nan_denoiser(tokens):
    logits, hidden = toy(tokens)
    return logits * jnp.nan, hidden


def thr(prompt=GOOD, gen=2, **kw):
    kw = {"mask_id": MASK, "vocab_size": V, **kw}
    return decoding.decode_threshold(KEY, toy, prompt, gen, **kw)


def pll(prompt=GOOD, answer=None, order=None):
    answer = np.zeros((2, 2), np.int32) if answer is None else answer
    order = np.tile([0, 1], (2, 1)) if order is None else order
    return decoding.path_log_likelihood(toy, prompt, answer, order, mask_id=MASK)


TINY = dict(vocab_size=6, d_model=8, n_layers=1, n_heads=2, n_kv_heads=2, mlp_hidden_size=8,
            mask_token_id=5)


def cfg(**kw):
    return model_lib.LLaDAConfig(**{**TINY, **kw})


@functools.cache
def tiny_model():
    return model_lib.init(cfg())


def apply_tokens(tokens):
    graphdef, params = tiny_model()
    return model_lib.apply(graphdef, params, tokens)


def rollouts():
    return poke.Rollouts(jnp.zeros((20, 2, 4)), jnp.ones((20, 2), bool), jnp.zeros(20))


def smoke(**changes):
    c = dllm_configs.get_config("smoke")
    for k, v in changes.items():
        parent = c
        *path, last = k.split(".")
        for p in path:
            parent = parent[p]
        parent[last] = v
    return c


def validate(**changes):
    from jaxlab.dllm import config as config_lib

    return config_lib.validate_config(smoke(**changes))


def smc_state():
    return path_smc.smc(toy, gen_length=2, num_particles=2, mask_id=MASK).init(KEY, GOOD)


def sr_state():
    return sr_smc.sr_smc(toy, gen_length=2, num_particles=2, mask_id=MASK,
                         block_length=2).init(KEY, GOOD)


def problem(**kw):
    return comparison.Problem(tasks.Addition(1), toy, **kw)


def _list_record() -> str:
    folder = tempfile.mkdtemp()
    with open(f"{folder}/trained_with.json", "w") as f:
        f.write("[1, 2]")
    return folder


def item_keys(n=2):
    return jax.random.split(KEY, n)


def step(**kw):
    kw = {"mask_id": MASK, "prompt_len": 1, "policy": "confidence", "temperature": 0.0,
          "block_length": 2, **kw}
    state = decoding.init_state(GOOD, 2, MASK)
    logits, _ = toy(state.tokens)
    return decoding.decode_step(KEY, state, logits, 1, 0, 0, **kw)[0].tokens


def run_experiment(**changes):
    from experiments.lib import registry

    with tempfile.TemporaryDirectory() as d:
        return registry.train_and_evaluate("dllm", smoke(**changes), d)


CASES = [
    # prompts
    Case("decode: negative prompt id", lambda: dec(np.array([[-3], [0]])), "`prompt`"),
    Case("decode: prompt id >= vocab", lambda: dec(np.array([[99], [0]])), "`prompt`"),
    Case("decode: prompt id == mask", lambda: dec(np.array([[MASK], [0]])), "`prompt`"),
    Case("decode: 1-D prompt", lambda: dec(np.zeros(3, np.int32)), "`prompt`"),
    Case("decode: float prompt", lambda: dec(np.zeros((2, 1), np.float32)), "`prompt`"),
    Case("smc_decode: negative prompt id", lambda: sdec(np.array([[-3], [0]])), "`prompt`"),
    Case("smc_decode: prompt id >= vocab", lambda: sdec(np.array([[99], [0]])), "`prompt`"),
    Case("smc_decode: prompt id == mask", lambda: sdec(np.array([[MASK], [0]])), "`prompt`"),
    Case("smc_decode: 1-D prompt", lambda: sdec(np.zeros(3, np.int32)), "`prompt`"),
    Case("best_of_n: prompt id >= vocab", lambda: path_smc.best_of_n(
        KEY, toy, np.array([[7], [0]]), 2, mask_id=MASK, vocab_size=V, num_particles=2),
        "`prompt`"),
    Case("decode_threshold: prompt id == mask", lambda: thr(np.array([[MASK], [0]])),
         "`prompt`"),
    Case("decode_threshold: 1-D prompt", lambda: thr(np.zeros(3, np.int32)), "`prompt`"),
    Case("path_log_likelihood: prompt id 99", lambda: pll(np.array([[99], [0]])), "`prompt`"),
    Case("path_log_likelihood: answer has mask", lambda: pll(answer=np.full((2, 2), MASK)),
         "`answer`"),
    Case("path_log_likelihood: negative answer id", lambda: pll(answer=-np.ones((2, 2), int)),
         "`answer`"),
    Case("path_log_likelihood: order -1", lambda: pll(order=np.tile([-1, 0], (2, 1))),
         "`order`"),
    Case("path_log_likelihood: order past A", lambda: pll(order=np.tile([0, 5], (2, 1))),
         "`order`"),
    Case("path_log_likelihood: order shape", lambda: pll(order=np.zeros((2, 3), int)),
         "`order`"),
    Case("path_log_likelihood: 1-D prompt", lambda: pll(np.zeros(1, np.int32)), "`prompt`"),
    # decoding settings
    Case("decode: unknown policy", lambda: dec(policy="greedy"), "`policy`"),
    Case("decode: temperature -1", lambda: dec(temperature=-1.0), "`temperature`"),
    Case("decode: temperature NaN", lambda: dec(temperature=float("nan")), "`temperature`"),
    Case("decode: block_length 3 of 4", lambda: dec(gen=4, block_length=3), "`block_length`"),
    Case("decode: steps 0", lambda: dec(steps=0), "`steps`"),
    Case("decode: gen_length 0", lambda: dec(gen=0), "`gen_length`"),
    Case("decode: mask_id outside vocab", lambda: dec(mask_id=V), "`mask_id`"),
    Case("decode: vocab mismatch", lambda: dec(vocab_size=V + 1), "`vocab_size`"),
    Case("decode_threshold: threshold NaN", lambda: thr(threshold=float("nan")), "`threshold`"),
    Case("decode_threshold: threshold 1.5", lambda: thr(threshold=1.5), "`threshold`"),
    Case("decode_threshold: block_length 3 of 4", lambda: thr(gen=4, block_length=3),
         "`block_length`"),
    Case("transfer_schedule: steps > gen_length", lambda: decoding.transfer_schedule(2, 4),
         "`steps`"),
    # SMC settings
    Case("smc_decode: weight_scale NaN", lambda: sdec(weight_scale=float("nan")),
         "`weight_scale`"),
    Case("smc_decode: weight_scale inf", lambda: sdec(weight_scale=float("inf")),
         "`weight_scale`"),
    Case("smc_decode: weight_scale -1", lambda: sdec(weight_scale=-1.0), "`weight_scale`"),
    Case("smc_decode: num_particles 0", lambda: sdec(num_particles=0), "`num_particles`"),
    Case("smc_decode: temperature -2", lambda: sdec(temperature=-2.0), "`temperature`"),
    Case("smc_decode: ess_threshold NaN", lambda: sdec(ess_threshold=float("nan")),
         "`ess_threshold`"),
    Case("smc_decode: ess_threshold 2", lambda: sdec(ess_threshold=2.0), "`ess_threshold`"),
    Case("smc_decode: unknown resampler", lambda: sdec(resampler="greedy"), "`resampler`"),
    Case("smc_decode: unknown policy", lambda: sdec(policy="greedy"), "`policy`"),
    Case("smc_decode: block_length 3 of 4", lambda: sdec(gen=4, block_length=3),
         "`block_length`"),
    Case("smc_decode: NaN value_fn (traced weights)", lambda: sdec(gen=1, value_fn=nan_value_fn),
         "`value_fn`"),
    Case("run_particles: NaN value_fn (traced weights)", lambda: path_smc.run_particles(
        KEY, toy, GOOD, 1, mask_id=MASK, vocab_size=V, num_particles=2,
        value_fn=nan_value_fn), "`value_fn`"),
    # self-rewarding SMC (jaxlab.dllm.sr_smc)
    Case("sr_smc_decode: prompt id == mask", lambda: srs(np.array([[MASK], [0]])), "`prompt`"),
    Case("sr_smc_decode: num_particles 0", lambda: srs(num_particles=0), "`num_particles`"),
    Case("sr_smc_decode: block_length 3 of 4", lambda: srs(gen=4, block_length=3),
         "`block_length`"),
    Case("sr_smc_decode: threshold 0", lambda: srs(threshold=0.0), "`threshold`"),
    Case("sr_smc_decode: threshold NaN", lambda: srs(threshold=float("nan")), "`threshold`"),
    Case("sr_smc_decode: temperature -1", lambda: srs(temperature=-1.0), "`temperature`"),
    Case("sr_smc_decode: ess_threshold 2", lambda: srs(ess_threshold=2.0), "`ess_threshold`"),
    Case("sr_smc_decode: schedule steps 3 for 2 blocks", lambda: srs(threshold=None, steps=3),
         "`steps`"),
    Case("sr_smc_decode: vocab mismatch", lambda: srs(vocab_size=V + 1), "`vocab_size`"),
    Case("sr_smc_decode: NaN logits (traced weights)", lambda: sr_smc.sr_smc_decode(
        KEY, nan_denoiser, GOOD, 2, mask_id=MASK, vocab_size=V, num_particles=2,
        block_length=1), "`denoise_fn`"),
    # the Algorithm constructors and their init
    Case("smc: num_particles 0", lambda: path_smc.smc(
        toy, gen_length=2, num_particles=0, mask_id=MASK), "`num_particles`"),
    Case("smc: ess_threshold -1", lambda: path_smc.smc(
        toy, gen_length=2, num_particles=2, mask_id=MASK, ess_threshold=-1.0), "`ess_threshold`"),
    Case("smc.init: prompt id == mask", lambda: path_smc.smc(
        toy, gen_length=2, num_particles=2, mask_id=MASK).init(KEY, np.array([[MASK], [0]])),
        "`prompt`"),
    Case("smc.init: vocab mismatch", lambda: path_smc.smc(
        toy, gen_length=2, num_particles=2, mask_id=MASK, vocab_size=V + 1).init(KEY, GOOD),
        "`vocab_size`"),
    Case("decoder: unknown policy", lambda: decoding.decoder(
        toy, gen_length=2, mask_id=MASK, policy="greedy"), "`policy`"),
    Case("decoder.init: 1-D prompt", lambda: decoding.decoder(
        toy, gen_length=2, mask_id=MASK).init(KEY, np.zeros(3, np.int32)), "`prompt`"),
    # POKE
    Case("collect_rollouts: prompt id == mask", lambda: poke.collect_rollouts(
        KEY, toy, np.array([[MASK], [0]]), 2, mask_id=MASK), "`prompt`"),
    Case("collect_rollouts: temperature -1", lambda: poke.collect_rollouts(
        KEY, toy, GOOD, 2, mask_id=MASK, temperature=-1.0), "`temperature`"),
    Case("collect_rollouts: unknown policy", lambda: poke.collect_rollouts(
        KEY, toy, GOOD, 2, mask_id=MASK, policy="greedy"), "`policy`"),
    Case("poke.fit: lr 0", lambda: poke.fit(rollouts(), steps=2, num_chunks=1, lr=0.0),
         "`lr`"),
    Case("poke.fit: lr NaN", lambda: poke.fit(rollouts(), steps=2, num_chunks=1,
                                              lr=float("nan")), "`lr`"),
    Case("poke.fit: num_chunks 0", lambda: poke.fit(rollouts(), steps=2, num_chunks=0),
         "`num_chunks`"),
    Case("poke.fit: batch_size 0", lambda: poke.fit(rollouts(), steps=2, num_chunks=1,
                                                    batch_size=0), "`batch_size`"),
    Case("poke.fit: NaN targets", lambda: poke.fit(
        rollouts()._replace(remaining=jnp.full(20, jnp.nan)), steps=2, num_chunks=1),
        "`rollouts.remaining`"),
    # model
    Case("LLaDAConfig: n_heads 0", lambda: cfg(n_heads=0), "`n_heads`"),
    Case("LLaDAConfig: d_model -8", lambda: cfg(d_model=-8), "`d_model`"),
    Case("LLaDAConfig: n_layers 0", lambda: cfg(n_layers=0), "`n_layers`"),
    Case("LLaDAConfig: rope_theta 0", lambda: cfg(rope_theta=0.0), "`rope_theta`"),
    Case("LLaDAConfig: rms_norm_eps NaN", lambda: cfg(rms_norm_eps=float("nan")),
         "`rms_norm_eps`"),
    Case("LLaDAConfig: attention_impl", lambda: cfg(attention_impl="flash"), "`attention_impl`"),
    Case("LLaDAConfig: sale_tau -1", lambda: cfg(sale_tau=-1.0), "`sale_tau`"),
    Case("LLaDAConfig: sale_sizes a tuple", lambda: cfg(sale_sizes=(16, 16, 16)),
         "`sale_sizes`"),
    Case("LLaDAConfig: vocab_size 0", lambda: cfg(vocab_size=0, mask_token_id=-1),
         "`vocab_size`"),
    Case("LLaDAConfig: mask_token_id 6", lambda: cfg(mask_token_id=6), "`mask_token_id`"),
    Case("model.apply: token id 99", lambda: apply_tokens(np.array([[99, 0]])), "`tokens`"),
    Case("model.apply: negative token", lambda: apply_tokens(np.array([[-3, 0]])), "`tokens`"),
    Case("model.apply: float tokens", lambda: apply_tokens(np.zeros((1, 2), np.float32)),
         "`tokens`"),
    Case("model.apply: 1-D tokens", lambda: apply_tokens(np.zeros(2, np.int32)), "`tokens`"),
    # training
    Case("train.train: lr 0", lambda: train_lib.train(
        tasks.Addition(1), cfg(vocab_size=11, mask_token_id=10), steps=2, batch_size=2, lr=0.0,
        num_chunks=1), "`lr`"),
    Case("train.train: batch_size 0", lambda: train_lib.train(
        tasks.Addition(1), cfg(vocab_size=11, mask_token_id=10), steps=2, batch_size=0,
        lr=1e-3, num_chunks=1), "`batch_size`"),
    Case("train.train: num_chunks 0", lambda: train_lib.train(
        tasks.Addition(1), cfg(vocab_size=11, mask_token_id=10), steps=2, batch_size=2,
        lr=1e-3, num_chunks=0), "`num_chunks`"),
    Case("train.mask_answers: t_min 0", lambda: train_lib.mask_answers(
        KEY, jnp.zeros((2, 3), jnp.int32), 3, t_min=0.0), "`t_min`"),
    Case("train.make_optimizer: lr -1", lambda: train_lib.make_optimizer(-1.0, 10), "`lr`"),
    # tasks
    Case("make_task: unknown", lambda: tasks.make_task("chess"), "`name`"),
    Case("Sudoku4: min_clues 17", lambda: tasks.Sudoku4(min_clues=17), "`min_clues`"),
    Case("Addition: n_digits 0", lambda: tasks.Addition(n_digits=0), "`n_digits`"),
    Case("StarGraph: degree 0", lambda: tasks.StarGraph(degree=0), "`degree`"),
    Case("StarGraph: arm_length 0", lambda: tasks.StarGraph(arm_length=0), "`arm_length`"),
    Case("Addition.verify: answer shape", lambda: tasks.Addition(2).verify(
        jnp.zeros((3, 4), jnp.int32), jnp.zeros((3, 2), jnp.int32)), "`answer`"),
    Case("Sudoku4.verify: prompt shape", lambda: tasks.Sudoku4().verify(
        jnp.zeros((3, 15), jnp.int32), jnp.zeros((3, 16), jnp.int32)), "`prompt`"),
    # the comparison (jaxlab.dllm.comparison) and the pieces of the study
    Case("dllm.best_particle: unknown select", lambda: dllm.best_particle(
        smc_state(), 2, select="max"), "`select`"),
    Case("dllm.sr_smc.best_particle: the (state, info) pair", lambda: sr_smc.best_particle(
        (sr_state(), None)), "`state`"),
    Case("dllm.compare: a bare task", lambda: dllm.compare(
        KEY, tasks.Addition(1), contenders=("greedy", "best_of_n"), progress=False),
        "`problem`"),
    Case("dllm.compare: one test item", lambda: dllm.compare(
        KEY, problem(), contenders=("greedy", "best_of_n"), tuning=2, seeds=1,
        progress=False), "`seeds`"),
    Case("dllm.comparison.decoder: unknown name", lambda: comparison.decoder(
        "beam", problem()), "`name`"),
    Case("dllm.comparison.decoder: unknown setting", lambda: comparison.decoder(
        "greedy", problem(), temperature=0.5), "greedy"),
    Case("dllm.comparison.decode_items: batch 0", lambda: comparison.decode_items(
        item_keys(), lambda p, k: None, tasks.Addition(1), batch=0), "`batch`"),
    Case("dllm.comparison.default_goals: one name as a string", lambda: (
        comparison.default_goals("poke_smc")), "`names`"),
    Case("dllm.comparison.fit_value_fn: rollouts 0", lambda: comparison.fit_value_fn(
        KEY, problem(), rollouts=0), "`rollouts`"),
    Case("dllm.comparison.item_problems: a task name", lambda: comparison.item_problems(
        item_keys(), "addition"), "`task`"),
    Case("dllm.config.all_decoders: one count, not a sequence", lambda: (
        config_lib.all_decoders(4)), "`particles`"),
    Case("dllm.config.all_decoders: N 0", lambda: config_lib.all_decoders((0, 2)),
         "`particles`"),
    Case("dllm.config.decoder_selection: unknown decoder", lambda: (
        config_lib.decoder_selection(("beam",), (2,))), "`config.decoders`"),
    Case("dllm.decoding.decode_step: unknown proposal", lambda: step(proposal="paths"),
         "`proposal`"),
    Case("dllm.decoding.decode_step: unknown policy", lambda: step(policy="greedy"),
         "`policy`"),
    Case("dllm.decoding.gumbel_top_k: eligible of another shape", lambda: (
        decoding.gumbel_top_k(KEY, jnp.zeros((2, 3)), jnp.ones((2, 4), bool), 1, 1.0)),
        "`eligible`"),
    Case("dllm.decoding.gumbel_top_k: temperature -1", lambda: decoding.gumbel_top_k(
        KEY, jnp.zeros((2, 3)), jnp.ones((2, 3), bool), 1, -1.0), "`temperature`"),
    Case("dllm.evaluation.particle_correctness: num_particles 0", lambda: (
        evaluation.particle_correctness(KEY, toy, tasks.Addition(1), GOOD2, num_particles=0)),
        "`num_particles`"),
    Case("dllm.loading.load_params: no checkpoint", lambda: loading.load_params(
        "/nonexistent/llada", cfg()), "`path`", errors=(FileNotFoundError,)),
    Case("dllm.loading.save_params: cfg of another depth", lambda: loading.save_params(
        tiny_model()[1], cfg(n_layers=2), tempfile.mkdtemp() + "/model.safetensors"),
        "`cfg`"),
    Case("dllm.model.abstract: a dict config", lambda: model_lib.abstract(TINY), "`cfg`"),
    Case("dllm.poke.collect_sibling_rollouts: siblings 0", lambda: (
        poke.collect_sibling_rollouts(KEY, toy, GOOD, 2, siblings=0, mask_id=MASK)),
        "`siblings`"),
    Case("dllm.poke.make_value_fn: prompt_len -1", lambda: poke.make_value_fn(
        *poke.abstract(8), -1, MASK), "`prompt_len`"),
    Case("dllm.tasks.check_task: an object without fields", lambda: tasks.check_task(
        object()), "`task`"),
    Case("dllm.tasks.register_refs: a reference that does not import", lambda: (
        tasks.register_refs({"mytask": "no_such_package.tasks:MyTask"})), "`task_refs"),
    Case("dllm.tasks.register_task: a shipped name", lambda: tasks.register_task(
        "addition", tasks.Addition), "`name`"),
    Case("dllm.train.diffusion_loss: logits of the whole sequence", lambda: (
        train_lib.diffusion_loss(jnp.zeros((2, 5, V)), jnp.zeros((2, 3), jnp.int32),
                                 jnp.ones((2, 3), bool), jnp.full(2, 0.5))), "`logits`"),
    Case("dllm.train.diffusion_loss: float answer", lambda: train_lib.diffusion_loss(
        jnp.zeros((2, 3, V)), jnp.zeros((2, 3)), jnp.ones((2, 3), bool), jnp.full(2, 0.5)),
        "`answer`"),
    Case("dllm.train.greedy_accuracy_fn: num_problems 0", lambda: (
        train_lib.greedy_accuracy_fn(tasks.Addition(1), tiny_model()[0], 0)),
        "`num_problems`"),
    Case("dllm.train.make_train_step: batch_size 0", lambda: train_lib.make_train_step(
        tasks.Addition(1), tiny_model()[0], train_lib.make_optimizer(1e-3, 10), 0),
        "`batch_size`"),
    # experiment config
    Case("config: temperature -1", lambda: validate(temperature=-1.0), "`config.temperature`"),
    Case("config: threshold 1.5", lambda: validate(threshold=1.5), "`config.threshold`"),
    Case("config: num_problems 1 (bootstrap CI)", lambda: validate(num_problems=1),
         "`config.num_problems`"),
    Case("config: bootstrap 1", lambda: validate(bootstrap=1), "`config.bootstrap`"),
    Case("config: eval_batch 0", lambda: validate(eval_batch=0), "`config.eval_batch`"),
    Case("config: particles has 0", lambda: validate(particles=(0, 2)), "`config.particles`"),
    Case("config: throughput_particles empty", lambda: validate(throughput_particles=()),
         "`config.throughput_particles`"),
    Case("config: train.lr 0", lambda: validate(**{"train.lr": 0.0}), "`config.train.lr`"),
    Case("config: train steps % num_chunks", lambda: validate(**{"train.steps": 41}),
         "`config.train.steps`"),
    Case("config: poke.lr NaN", lambda: validate(**{"poke.lr": float("nan")}),
         "`config.poke.lr`"),
    Case("config: poke.temperature -1", lambda: validate(**{"poke.temperature": -1.0}),
         "`config.poke.temperature`"),
    Case("config: model.n_layers 0", lambda: validate(**{"model.n_layers": 0}),
         "`config.model.n_layers`"),
    Case("config: unknown task", lambda: validate(tasks=("chess",)), "`config.tasks`"),
    Case("config: sale.taus negative", lambda: validate(**{"sale.taus": (-1.0,)}),
         "`config.sale.taus`"),
    Case("config: sale.batch 0", lambda: validate(**{"sale.batch": 0}), "`config.sale.batch`"),
    Case("train_and_evaluate: temperature NaN", lambda: run_experiment(
        temperature=float("nan")), "`config.temperature`"),
    # the twist scale, the selections, the head policy and the genealogy
    Case("smc_decode: twist_scale NaN", lambda: sdec(twist_scale=float("nan")),
         "`twist_scale`"),
    Case("smc_decode: twist_scale -1", lambda: sdec(twist_scale=-1.0), "`twist_scale`"),
    Case("smc_decode: select by the head without value_fn", lambda: sdec(select="value"),
         "`select`"),
    Case("smc_decode: select_mix 1.5", lambda: sdec(select="mix", value_fn=zero_value_fn,
                                                    select_mix=1.5), "`select_mix`"),
    Case("smc_decode: head policy without position_value_fn",
         lambda: sdec(policy="value"), "`position_value_fn`"),
    Case("smc_decode: policy_mix -0.5", lambda: sdec(
        policy="value", position_value_fn=zero_positions, policy_mix=-0.5), "`policy_mix`"),
    Case("smc_decode: position_value_fn returns [M]", lambda: sdec(
        policy="value", position_value_fn=zero_value_fn), "`position_value_fn`"),
    Case("decode: head policy without position_value_fn", lambda: dec(policy="value"),
         "`position_value_fn`"),
    Case("decode: policy_mix NaN", lambda: dec(
        policy="value", position_value_fn=zero_positions, policy_mix=float("nan")),
         "`policy_mix`"),
    Case("best_of_n: select mix without value_fn", lambda: path_smc.best_of_n(
        KEY, toy, GOOD, 2, mask_id=MASK, vocab_size=V, num_particles=2, select="mix"),
        "`select`"),
    Case("make_position_value_fn: prompt_len -1", lambda: poke.make_position_value_fn(
        *poke.init(4, 4), -1, MASK), "`prompt_len`"),
    Case("ancestry: 2-D ancestors", lambda: path_smc.ancestry(np.zeros((2, 3), np.int32)),
         "`ancestors`"),
    Case("ancestry: ancestor index N", lambda: path_smc.ancestry(
        np.full((2, 1, 3), 3, np.int32)), "`ancestors`"),
    Case("dllm.comparison.run_builtin: unknown contender", lambda: comparison.run_builtin(
        "beam", None, problem()), "`name`"),
    Case("dllm.path_smc.smc_config: unknown option", lambda: path_smc.smc_config(beta=2.0),
         "beta"),
    Case("dllm.weights.save_denoiser: a dict as the config", lambda: dllm.save_denoiser(
        tempfile.mkdtemp(), {"d_model": 16}, {}), "`model_config`"),
    Case("dllm.weights.load_denoiser: nothing saved", lambda: dllm.load_denoiser(
        tempfile.mkdtemp() + "/none"), "`path`"),
    Case("dllm.weights.save_value_head: hidden 0", lambda: dllm.save_value_head(
        tempfile.mkdtemp(), {}, d_model=16, hidden=0), "`hidden`"),
    Case("dllm.weights.load_value_head: nothing saved", lambda: dllm.load_value_head(
        tempfile.mkdtemp() + "/none"), "`path`"),
    Case("dllm.weights.read_record: a record that is a list", lambda: dllm.weights.read_record(
        _list_record()), "trained_with.json"),
]

CASES = [c._replace(name=f"dllm/{c.name}") for c in CASES]
