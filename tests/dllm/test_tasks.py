"""Task generators and verifiers against independent brute-force references."""

import itertools

import jax
import numpy as np
import pytest

from jaxlab.dllm import tasks


def _count_sudoku_solutions(grid):
    """Backtracking count of completions of a 4x4 grid (0 = blank)."""
    g = list(grid)
    try:
        i = g.index(0)
    except ValueError:
        return 1
    r, c = divmod(i, 4)
    total = 0
    for d in range(1, 5):
        row = g[4 * r:4 * r + 4]
        col = g[c::4]
        br, bc = 2 * (r // 2), 2 * (c // 2)
        box = [g[4 * (br + a) + bc + b] for a in range(2) for b in range(2)]
        if d not in row and d not in col and d not in box:
            g[i] = d
            total += _count_sudoku_solutions(g)
            g[i] = 0
    return total


def test_sudoku_has_288_solutions_and_puzzles_are_unique():
    assert tasks.sudoku4_solutions().shape == (288, 16)
    task = tasks.Sudoku4()
    prompt, answer = task.sample(jax.random.key(0), 40)
    prompt, answer = np.asarray(prompt), np.asarray(answer)
    for p, a in zip(prompt, answer, strict=True):
        assert _count_sudoku_solutions(p) == 1
        assert np.all((p == 0) | (p == a))
        assert (p > 0).sum() >= task.min_clues
    assert np.all(task.verify(prompt, answer))


def _countdown_reference(prompt, answer, m):
    nums = [int("".join(map(str, prompt[2 * i:2 * i + 2]))) for i in range(m)]
    target = int("".join(map(str, prompt[2 * m:])))
    pool = list(nums)
    last = None
    for e in range(m - 1):
        eq = list(answer[11 * e:11 * e + 11])
        digits = eq[0:3] + eq[4:7] + eq[8:11]
        if any(d > 9 for d in digits) or eq[7] != 14 or not 10 <= eq[3] <= 13:
            return False
        a, b, c = (int("".join(map(str, eq[k:k + 3]))) for k in (0, 4, 8))
        for v in (a, b):
            if v not in pool:
                return False
            pool.remove(v)
        op = eq[3]
        if op == 13 and (b == 0 or a % b):
            return False
        val = {10: a + b, 11: a - b, 12: a * b, 13: a // max(b, 1)}[op]
        if val != c or val < 0:
            return False
        pool.append(c)
        last = c
    return last == target


@pytest.mark.heavy
@pytest.mark.parametrize("m", [3, 4])
def test_countdown_verifier_matches_python_reference(m):
    task = tasks.Countdown(n_numbers=m)
    prompt, answer = task.sample(jax.random.key(m), 200)
    prompt, answer = np.asarray(prompt), np.asarray(answer)
    assert np.all(task.verify(prompt, answer))
    rng = np.random.default_rng(0)
    bad = answer.copy()
    rows = np.arange(200)
    cols = rng.integers(0, task.answer_len, 200)
    bad[rows, cols] = rng.integers(0, 15, 200)
    got = np.asarray(task.verify(prompt, bad))
    want = np.array([_countdown_reference(p, a, m) for p, a in zip(prompt, bad, strict=True)])
    np.testing.assert_array_equal(got, want)
    assert 0 < want.mean() < 1  # some mutations keep a valid derivation, most break it


def _star_reference(prompt, answer, degree, length, nn):
    """Decode the edge tokens and walk the graph in Python."""
    e = degree * length
    edges = {divmod(int(t) - nn, nn) for t in prompt[:e]}
    centre, goal = prompt[e], prompt[e + 1]
    if any(not 0 <= a < nn for a in answer):
        return False
    path = [centre, *answer]
    return all((u, v) in edges for u, v in itertools.pairwise(path)) and path[-1] == goal


def test_star_graph_verifier_matches_reference_on_mutations():
    task = tasks.StarGraph(degree=3, arm_length=4, num_nodes=20)
    prompt, answer = map(np.asarray, task.sample(jax.random.key(1), 300))
    assert np.all(task.verify(prompt, answer))
    rng = np.random.default_rng(1)
    bad = answer.copy()
    bad[np.arange(300), rng.integers(0, 4, 300)] = rng.integers(0, 22, 300)
    want = [_star_reference(p, a, 3, 4, 20) for p, a in zip(prompt, bad, strict=True)]
    np.testing.assert_array_equal(np.asarray(task.verify(prompt, bad)), want)
    assert 0 < np.mean(want) < 1


@pytest.mark.heavy
@pytest.mark.parametrize("n_digits", [4, 9, 12])
def test_addition_matches_python_ints(n_digits):
    """Python's unbounded ints as the reference; 12 digits would overflow an int32 round
    trip through the values (the earlier implementation did that)."""
    task = tasks.Addition(n_digits=n_digits)
    prompt, answer = map(np.asarray, task.sample(jax.random.key(2), 100))
    for p, a in zip(prompt, answer, strict=True):
        x = int("".join(map(str, p[:n_digits])))
        y = int("".join(map(str, p[n_digits:])))
        assert int("".join(map(str, a))) == x + y
    assert np.all(task.verify(prompt, answer))
    assert not np.any(task.verify(prompt, (answer + 1) % 10))
    one_off = answer.copy()
    one_off[:, 0] = np.where(one_off[:, 0] == 0, 10, 0)  # a non-digit or a wrong carry
    assert not np.any(task.verify(prompt, one_off))


def test_bad_task_arguments_raise():
    with pytest.raises(ValueError, match="n_numbers"):
        tasks.Countdown(n_numbers=5)
    with pytest.raises(ValueError, match="num_nodes"):
        tasks.StarGraph(degree=4, arm_length=5, num_nodes=10)
    with pytest.raises(ValueError, match="unknown task"):
        tasks.make_task("chess")


@pytest.mark.heavy
@pytest.mark.parametrize("name", sorted(tasks.HARD_VARIANTS))
def test_hard_variants_are_bigger_and_self_consistent(name):
    """Each hard variant is its base task at larger sizes, under its own name (its own
    shipped denoiser); references verify, corrupted ones mostly do not."""
    base_name, sizes = tasks.HARD_VARIANTS[name]
    task, base = tasks.make_task(name), tasks.make_task(base_name)
    assert task.name == name and type(task) is type(base)
    assert task.answer_len > base.answer_len and task.prompt_len > base.prompt_len
    for field, value in sizes.items():
        assert getattr(task, field) == value
    prompt, answer = task.sample(jax.random.key(5), 64)
    assert np.all(np.asarray(task.verify(prompt, answer)))
    wrong = (np.asarray(answer) + 1) % min(task.vocab_size - 1, 10)
    assert np.mean(np.asarray(task.verify(prompt, wrong))) < 0.1
    key = next(iter(sizes))
    smaller = tasks.make_task(name, **{key: getattr(base, key)})  # kwargs override the sizes
    assert getattr(smaller, key) == getattr(base, key) and smaller.name == name
