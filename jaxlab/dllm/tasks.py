"""Reasoning tasks where the unmasking order matters, each with an exact verifier.

A task is a frozen dataclass with static sizes and two jittable functions:

* ``sample(key, n) -> (prompt [n, P] int32, answer [n, A] int32)``: fresh problems and one
  reference answer each (the training target);
* ``verify(prompt, answer) -> [n] bool``: exact correctness of *any* answer (Countdown
  accepts every valid derivation, not only the reference one).

Every task's vocabulary ends with its mask token, ``mask_id = vocab_size - 1``. The model
sees ``concat(prompt, answer)``; decoding fills the answer positions.

Tasks (all small enough that a tiny denoiser learns them on 2 CPU cores):

* ``Sudoku4``: 4x4 Sudoku with a unique solution (uniqueness checked against all 288
  solution grids); prompt = grid with blanks (0), answer = the full grid.
* ``Countdown``: reach a target from ``n_numbers`` numbers with + - * /; the answer is
  ``n_numbers - 1`` equations ``aaa op bbb = ccc`` in fixed-width digits.
* ``StarGraph``: path from the centre to a goal leaf of a star graph given as a shuffled
  edge list (the left-to-right "Clever Hans" failure case; easy goal-first); one token per edge.
* ``Addition``: ``n_digits``-digit a + b, most significant digit first (carries flow
  right to left, against the reading order).

Checks: each task's ``__post_init__`` validates its size fields (``Sudoku4.min_clues`` in
[0, 16], ``Countdown.n_numbers`` 3 or 4 and ``max_number`` in [2, 99], ``StarGraph`` and
``Addition`` sizes positive ints); ``verify`` checks the static shapes of ``prompt``
[n, prompt_len] and ``answer`` [n, answer_len] (also under jit); ``make_task`` names an
unknown ``name``. Hard variants (``HARD_VARIANTS``): ``countdown_hard`` (4 numbers up to
10), ``addition_hard`` (10 digits), ``star_graph_hard`` (degree 4, arms of 4, 20 labels).
"""

import dataclasses
import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import validation
from jaxlab.core.types import Array, PRNGKey


def _check_verify_shapes(task, prompt, answer) -> None:
    validation.check_shape("prompt", prompt, (None, task.prompt_len))
    validation.check_shape("answer", answer, (np.shape(prompt)[0], task.answer_len))


@functools.cache
def sudoku4_solutions() -> np.ndarray:
    """All 288 valid 4x4 Sudoku grids, [288, 16] with digits 1..4 (brute force)."""
    perms = list(itertools.permutations(range(1, 5)))
    grids = []
    for rows in itertools.product(perms, repeat=4):
        g = np.array(rows)
        if any(len(set(g[:, c])) < 4 for c in range(4)):
            continue
        boxes = [g[r:r + 2, c:c + 2].ravel() for r in (0, 2) for c in (0, 2)]
        if all(len(set(b)) == 4 for b in boxes):
            grids.append(g.ravel())
    return np.array(grids, np.int32)


@dataclasses.dataclass(frozen=True)
class Sudoku4:
    """4x4 Sudoku: tokens 0 = blank, 1..4 digits, 5 = mask.

    Attributes:
      min_clues: puzzles keep removing clues (in random order, only while the solution
        stays unique) until this many remain or none can be removed.
    """

    min_clues: int = 4
    name: str = "sudoku"
    vocab_size: int = 6
    prompt_len: int = 16
    answer_len: int = 16

    def __post_init__(self):
        if not isinstance(self.min_clues, int | np.integer) or not 0 <= self.min_clues <= 16:
            raise ValueError(f"`min_clues` must be an integer in [0, 16], got {self.min_clues!r}.")

    @property
    def mask_id(self) -> int:
        return self.vocab_size - 1

    def sample(self, key: PRNGKey, n: int) -> tuple[Array, Array]:
        sols = jnp.asarray(sudoku4_solutions())
        k_sol, k_order = jax.random.split(key)
        idx = jax.random.randint(k_sol, (n,), 0, sols.shape[0])
        grids = sols[idx]
        orders = jax.vmap(lambda k: jax.random.permutation(k, 16))(jax.random.split(k_order, n))

        def carve(grid, order):
            def step(clues, cell):
                trial = clues.at[cell].set(False)
                consistent = jnp.all(~trial[None] | (sols == grid[None]), axis=1)
                ok = (jnp.sum(consistent) == 1) & (jnp.sum(trial) >= self.min_clues)
                return jnp.where(ok, trial, clues), None

            clues, _ = jax.lax.scan(step, jnp.ones(16, bool), order)
            return jnp.where(clues, grid, 0)

        return jax.vmap(carve)(grids, orders).astype(jnp.int32), grids.astype(jnp.int32)

    def verify(self, prompt: Array, answer: Array) -> Array:
        _check_verify_shapes(self, prompt, answer)
        g = answer.reshape(-1, 4, 4)
        onehot = jax.nn.one_hot(g - 1, 4)  # digits outside 1..4 give all-zero rows
        rows = jnp.all(onehot.sum(2) == 1, axis=(1, 2))
        cols = jnp.all(onehot.sum(1) == 1, axis=(1, 2))
        boxes = onehot.reshape(-1, 2, 2, 2, 2, 4).sum((2, 4))
        box_ok = jnp.all(boxes == 1, axis=(1, 2, 3))
        clues = jnp.all((prompt == 0) | (prompt == answer), axis=1)
        return rows & cols & box_ok & clues


_PLUS, _MINUS, _TIMES, _DIV, _EQ = 10, 11, 12, 13, 14


def _digits(x: Array, width: int) -> Array:
    """Non-negative ints [...] -> fixed-width decimal digits [..., width], MSB first."""
    powers = 10 ** jnp.arange(width - 1, -1, -1)
    return (x[..., None] // powers) % 10


def _undigits(d: Array) -> Array:
    width = d.shape[-1]
    powers = 10 ** jnp.arange(width - 1, -1, -1)
    return jnp.sum(d * powers, axis=-1)


@dataclasses.dataclass(frozen=True)
class Countdown:
    """Countdown: tokens 0-9 digits, 10-13 = + - * /, 14 '=', 15 mask.

    Prompt: ``n_numbers`` two-digit numbers then a three-digit target. Answer:
    ``n_numbers - 1`` equations ``a a a op b b b = c c c`` (11 tokens each); each operand
    is an unused input number or an earlier result, and the last result is the target.
    Intermediate values stay in [0, 999]; division must be exact.
    """

    n_numbers: int = 3
    max_number: int = 25
    name: str = "countdown"
    vocab_size: int = 16

    def __post_init__(self):
        if self.n_numbers not in (3, 4):
            raise ValueError(f"`n_numbers` must be 3 or 4, got {self.n_numbers}.")
        if not 2 <= self.max_number <= 99:
            raise ValueError(f"`max_number` must be in [2, 99], got {self.max_number}.")

    @property
    def mask_id(self) -> int:
        return self.vocab_size - 1

    @property
    def prompt_len(self) -> int:
        return 2 * self.n_numbers + 3

    @property
    def answer_len(self) -> int:
        return 11 * (self.n_numbers - 1)

    def sample(self, key: PRNGKey, n: int) -> tuple[Array, Array]:
        return jax.vmap(self._sample_one)(jax.random.split(key, n))

    def _sample_one(self, key):
        m = self.n_numbers
        k_num, k_ops = jax.random.split(key)
        nums = jax.random.randint(k_num, (m,), 1, self.max_number + 1)
        pool = jnp.zeros(2 * m - 1, jnp.int32).at[:m].set(nums)
        avail = jnp.zeros(2 * m - 1, bool).at[:m].set(True)

        def step(carry, inp):
            pool, avail = carry
            i, k = inp
            k1, k2, k3 = jax.random.split(k, 3)
            ia = jax.random.categorical(k1, jnp.where(avail, 0.0, -jnp.inf))
            avail = avail.at[ia].set(False)
            ib = jax.random.categorical(k2, jnp.where(avail, 0.0, -jnp.inf))
            avail = avail.at[ib].set(False)
            a, b = jnp.maximum(pool[ia], pool[ib]), jnp.minimum(pool[ia], pool[ib])
            results = jnp.array([a + b, a - b, a * b, a // jnp.maximum(b, 1)])
            valid = jnp.array([a + b <= 999, b > 0, (a * b <= 999) & (b > 1),
                               (b > 1) & (a % jnp.maximum(b, 1) == 0)])
            op = jax.random.categorical(k3, jnp.where(valid, 0.0, -jnp.inf))
            c = results[op]
            pool = pool.at[m + i].set(c)
            avail = avail.at[m + i].set(True)
            eq = jnp.concatenate([_digits(a, 3), (_PLUS + op)[None], _digits(b, 3),
                                  jnp.array([_EQ]), _digits(c, 3)])
            return (pool, avail), (eq, c)

        _, (eqs, results) = jax.lax.scan(
            step, (pool, avail), (jnp.arange(m - 1), jax.random.split(k_ops, m - 1)))
        prompt = jnp.concatenate([_digits(nums, 2).ravel(), _digits(results[-1], 3)])
        return prompt.astype(jnp.int32), eqs.ravel().astype(jnp.int32)

    def verify(self, prompt: Array, answer: Array) -> Array:
        _check_verify_shapes(self, prompt, answer)
        return jax.vmap(self._verify_one)(prompt, answer)

    def _verify_one(self, prompt, answer):
        m = self.n_numbers
        nums = _undigits(prompt[:2 * m].reshape(m, 2))
        target = _undigits(prompt[2 * m:])
        pool = jnp.zeros(2 * m - 1, jnp.int32).at[:m].set(nums)
        avail = jnp.zeros(2 * m - 1, bool).at[:m].set(True)
        eqs = answer.reshape(m - 1, 11)

        def take(pool, avail, value):
            hit = avail & (pool == value)
            found = jnp.any(hit)
            j = jnp.argmax(hit)
            return avail.at[j].set(jnp.where(found, False, avail[j])), found

        def step(carry, inp):
            pool, avail, ok = carry
            i, eq = inp
            digits_ok = jnp.all(eq[jnp.array([0, 1, 2, 4, 5, 6, 8, 9, 10])] <= 9)
            form_ok = digits_ok & (eq[3] >= _PLUS) & (eq[3] <= _DIV) & (eq[7] == _EQ)
            a, b, c = _undigits(eq[0:3]), _undigits(eq[4:7]), _undigits(eq[8:11])
            op = eq[3]
            value = jnp.select(
                [op == _PLUS, op == _MINUS, op == _TIMES, op == _DIV],
                [a + b, a - b, a * b, a // jnp.maximum(b, 1)], -1)
            exact = jnp.where(op == _DIV, (b > 0) & (a % jnp.maximum(b, 1) == 0), True)
            avail, fa = take(pool, avail, a)
            avail, fb = take(pool, avail, b)
            arith = (value == c) & exact & (value >= 0)
            pool = pool.at[m + i].set(c)
            avail = avail.at[m + i].set(True)
            return (pool, avail, ok & form_ok & fa & fb & arith), c

        (_, _, ok), results = jax.lax.scan(step, (pool, avail, jnp.array(True)),
                                           (jnp.arange(m - 1), eqs))
        return ok & (results[-1] == target)


@dataclasses.dataclass(frozen=True)
class StarGraph:
    """Star graph path finding.

    A centre with ``degree`` arms of ``arm_length`` nodes, random distinct labels from
    ``num_nodes`` (tokens ``0 .. num_nodes - 1``). Each directed edge p -> c is one token
    ``num_nodes + p * num_nodes + c``, so "which edge ends at c" is one attention lookup;
    the last token is the mask. Prompt: the ``degree * arm_length`` edge tokens in random
    order, then the centre and the goal (a leaf). Answer: the ``arm_length`` nodes of the
    goal's arm, from the centre's child to the goal. Left to right, the first token needs
    the whole arm (the "Clever Hans" failure of next-token prediction); goal first, every
    token is one lookup.
    """

    degree: int = 3
    arm_length: int = 3
    num_nodes: int = 16
    name: str = "star_graph"

    def __post_init__(self):
        for name in ("degree", "arm_length", "num_nodes"):
            validation.check_positive_int(name, getattr(self, name))
        if self.num_nodes < 1 + self.degree * self.arm_length:
            raise ValueError(f"`num_nodes`={self.num_nodes} must be >= 1 + degree * "
                             f"arm_length = {1 + self.degree * self.arm_length}.")

    @property
    def vocab_size(self) -> int:
        return self.num_nodes + self.num_nodes ** 2 + 1

    @property
    def mask_id(self) -> int:
        return self.vocab_size - 1

    @property
    def prompt_len(self) -> int:
        return self.degree * self.arm_length + 2

    @property
    def answer_len(self) -> int:
        return self.arm_length

    def edge_token(self, parent: Array, child: Array) -> Array:
        return self.num_nodes + parent * self.num_nodes + child

    def sample(self, key: PRNGKey, n: int) -> tuple[Array, Array]:
        return jax.vmap(self._sample_one)(jax.random.split(key, n))

    def _sample_one(self, key):
        d, length = self.degree, self.arm_length
        k_lab, k_perm, k_goal = jax.random.split(key, 3)
        labels = jax.random.permutation(k_lab, self.num_nodes)[:1 + d * length]
        centre, arms = labels[0], labels[1:].reshape(d, length)
        parents = jnp.concatenate([jnp.full((d, 1), centre), arms[:, :-1]], axis=1)
        edges = self.edge_token(parents.ravel(), arms.ravel())
        edges = edges[jax.random.permutation(k_perm, d * length)]
        goal_arm = jax.random.randint(k_goal, (), 0, d)
        prompt = jnp.concatenate([edges, jnp.stack([centre, arms[goal_arm, -1]])])
        return prompt.astype(jnp.int32), arms[goal_arm].astype(jnp.int32)

    def verify(self, prompt: Array, answer: Array) -> Array:
        _check_verify_shapes(self, prompt, answer)
        e = self.degree * self.arm_length
        edges = prompt[:, :e]
        centre, goal = prompt[:, e], prompt[:, e + 1]
        is_node = (answer >= 0) & (answer < self.num_nodes)
        parents = jnp.concatenate([centre[:, None], answer[:, :-1]], axis=1)
        hops = self.edge_token(parents, answer)  # [n, L]
        is_edge = jnp.any(hops[:, :, None] == edges[:, None, :], -1)
        return jnp.all(is_edge & is_node, axis=1) & (answer[:, -1] == goal)


@dataclasses.dataclass(frozen=True)
class Addition:
    """a + b with ``n_digits`` digits each: tokens 0-9, 10 = mask; MSB first."""

    n_digits: int = 4
    name: str = "addition"
    vocab_size: int = 11

    def __post_init__(self):
        validation.check_positive_int("n_digits", self.n_digits)

    @property
    def mask_id(self) -> int:
        return self.vocab_size - 1

    @property
    def prompt_len(self) -> int:
        return 2 * self.n_digits

    @property
    def answer_len(self) -> int:
        return self.n_digits + 1

    def sample(self, key: PRNGKey, n: int) -> tuple[Array, Array]:
        digits = jax.random.randint(key, (n, 2, self.n_digits), 0, 10)
        prompt = digits.reshape(n, -1)
        return prompt.astype(jnp.int32), _add_digits(digits[:, 0], digits[:, 1])

    def verify(self, prompt: Array, answer: Array) -> Array:
        _check_verify_shapes(self, prompt, answer)
        want = _add_digits(prompt[:, :self.n_digits], prompt[:, self.n_digits:])
        return jnp.all(answer == want, axis=1)


def _add_digits(a: Array, b: Array) -> Array:
    """Digit-wise a + b ([n, D] digits each, MSB first) -> [n, D + 1] digits of the sum.

    Schoolbook carries from the least significant digit, so any D works (an int32
    round trip through the integer values would overflow from D = 10 on)."""
    def column(carry, ab):
        s = ab[0] + ab[1] + carry
        return s // 10, s % 10

    carry, low = jax.lax.scan(column, jnp.zeros(a.shape[0], jnp.int32),
                              (a.T[::-1].astype(jnp.int32), b.T[::-1].astype(jnp.int32)))
    return jnp.concatenate([carry[:, None], low[::-1].T], axis=1).astype(jnp.int32)


BASE_TASKS = {"sudoku": Sudoku4, "countdown": Countdown, "star_graph": StarGraph,
              "addition": Addition}

# Hard variants (issue 20: tasks where the unmasking path matters more): the base task
# with larger sizes, under its own name (its own shipped denoiser). No sudoku variant: the
# 4x4 carving already stops at a minimal unique clue set (>= 4 clues), so "fewer clues" is
# not available without a larger grid. Sizes: one step up from the easy variants (3 -> 4
# numbers; degree and arms 3 -> 4), which the tiny denoiser learns on a CPU; the session-10
# sizes (4 numbers to 25; degree 5 x arms of 5 over 32 labels) did not train at that budget.
HARD_VARIANTS = {
    "countdown_hard": ("countdown", {"n_numbers": 4, "max_number": 10}),
    "addition_hard": ("addition", {"n_digits": 10}),
    "star_graph_hard": ("star_graph", {"degree": 4, "arm_length": 4, "num_nodes": 20}),
}
TASKS = {**BASE_TASKS, **{v: BASE_TASKS[base] for v, (base, _) in HARD_VARIANTS.items()}}


def make_task(name: str, **kwargs):
    """Builds a task by name: ``sudoku``, ``countdown``, ``star_graph``, ``addition`` or a
    hard variant (``HARD_VARIANTS``: its sizes by default, ``kwargs`` override them)."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}: `name` must be one of {sorted(TASKS)}.")
    if name in HARD_VARIANTS:
        return TASKS[name](**{**HARD_VARIANTS[name][1], **kwargs, "name": name})
    return TASKS[name](**kwargs)
