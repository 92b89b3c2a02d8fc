"""experiments/bench_poke.py: the SMC-vs-batched-greedy timing's layout (no timed asserts)."""

import jax
import pytest

from experiments import bench_poke
from jaxlab.dllm import tasks


def _task_and_denoiser():
    task = tasks.make_task("addition", n_digits=1)
    table = jax.random.normal(jax.random.key(0), (task.vocab_size, task.vocab_size))

    def denoise_fn(tokens):  # [M, L] -> logits [M, L, V] from each position's own token
        return table[tokens], jax.nn.one_hot(tokens, 4)

    return task, denoise_fn


@pytest.mark.heavy
def test_measure_times_every_contender_per_n_with_its_ratios():
    task, denoise_fn = _task_and_denoiser()
    res = bench_poke.measure(task, denoise_fn, (1, 2), problems=4, repeats=2)
    assert (res["task"], res["problems"], res["steps"]) == ("addition", 4, task.answer_len)
    per = res["per_particles"]
    assert set(per) == {"1", "2"}
    for n, v in per.items():
        sec = v["seconds"]
        assert v["batch_rows"] == 4 * int(n)
        assert v["smc_over_greedy"] == pytest.approx(sec["smc"] / sec["greedy_batched"])
        assert v["smc_over_sampled"] == pytest.approx(sec["smc"] / sec["sampled_batched"])
        tokens = 4 * int(n) * task.answer_len
        for c, s in v["spread_s"].items():  # best of the timed runs, with their spread
            assert s["min"] == sec[c] and s["q75"] >= s["q25"] >= s["min"]
            assert v["tokens_per_s"][c] == pytest.approx(tokens / sec[c])
    assert per["1"]["batching_efficiency"] == {c: 1.0 for c in per["1"]["seconds"]}
    lines = bench_poke.report_lines(res)
    assert len(lines) == 2 + len(per) and lines[2].split()[:2] == ["1", "4"]


def test_measure_rejects_bad_particles():
    task, denoise_fn = _task_and_denoiser()
    for bad in ((), (0, 2)):
        with pytest.raises(ValueError, match="`particles`"):
            bench_poke.measure(task, denoise_fn, bad, problems=2, repeats=1)
