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

Your own task: any object with the ``Task`` fields works with the library functions
(``train.train``, ``poke.fit``, the decoders, ``evaluation``). For the study binaries,
``register_task(name, factory)`` in your code, or ``config.task_refs = {name:
"package.module:attr"}`` in the config, adds it (then ``config.tasks = (name,)``) without
editing jaxlab.
"""

import dataclasses
import functools
import importlib
import itertools
import re
import typing

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import validation
from jaxlab.core.types import Array, PRNGKey

__all__ = ["check_task", "Task", "Sudoku4", "Countdown", "StarGraph", "Addition", "BASE_TASKS",
    "HARD_VARIANTS", "TASKS", "TASK_FIELDS", "sudoku4_solutions", "register_task",
    "register_refs", "unregister_task", "task_names", "make_task"]


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

# Hard variants (tasks where the unmasking path matters more): the base task with larger
# sizes, under its own name (its own shipped denoiser). No sudoku variant: the 4x4 carving
# already stops at a minimal unique clue set (>= 4 clues), so "fewer clues" is not available
# without a larger grid. Sizes: one step up from the easy variants (3 -> 4 numbers; degree
# and arms 3 -> 4), which the tiny denoiser learns on a CPU; larger sizes (4 numbers to 25;
# degree 5 x arms of 5 over 32 labels) did not train at that budget.
HARD_VARIANTS = {
    "countdown_hard": ("countdown", {"n_numbers": 4, "max_number": 10}),
    "addition_hard": ("addition", {"n_digits": 10}),
    "star_graph_hard": ("star_graph", {"degree": 4, "arm_length": 4, "num_nodes": 20}),
}
TASKS = {**BASE_TASKS, **{v: BASE_TASKS[base] for v, (base, _) in HARD_VARIANTS.items()}}

# What a task must provide (module docstring); ``check_task`` tests an object against it.
TASK_FIELDS = ("sample", "verify", "prompt_len", "answer_len", "vocab_size", "mask_id")


@typing.runtime_checkable
class Task(typing.Protocol):
    """What ``train.train``, ``poke.fit``, the decoders and the study binaries need of a task.

    Any object with these attributes works (a frozen dataclass like the shipped tasks is
    the easy way): ``sample(key, n) -> (prompt [n, prompt_len] int32, answer [n,
    answer_len] int32)`` and ``verify(prompt, answer) -> [n] bool``, both jittable;
    ``vocab_size`` includes the mask token ``mask_id`` (conventionally ``vocab_size - 1``);
    ``name`` labels logs and progress bars.
    """

    name: str
    vocab_size: int
    prompt_len: int
    answer_len: int

    @property
    def mask_id(self) -> int: ...

    def sample(self, key: PRNGKey, n: int) -> tuple[Array, Array]: ...

    def verify(self, prompt: Array, answer: Array) -> Array: ...


def check_task(task, name: str = "task") -> None:
    """Raises ValueError naming ``name`` unless ``task`` has the ``Task`` fields.

    Checks that ``sample`` and ``verify`` are callable, that the sizes are positive ints and
    that ``mask_id`` is a token id in ``[0, vocab_size)``.

    Args:
      task: the object to check.
      name: how the error names it.

    Example:
      >>> from jaxlab.dllm import tasks
      >>> tasks.check_task(tasks.Addition(n_digits=2))
      >>> tasks.check_task(object())  # doctest: +ELLIPSIS
      Traceback (most recent call last):
      ...
      ValueError: `task` must have the attributes sample, verify, ... object misses sample, ...
    """
    missing = [f for f in TASK_FIELDS if not hasattr(task, f)]
    if missing:
        raise ValueError(f"`{name}` must have the attributes {', '.join(TASK_FIELDS)} "
                         f"(jaxlab.dllm.tasks.Task); {type(task).__name__} misses "
                         f"{', '.join(missing)}.")
    for f in ("sample", "verify"):
        if not callable(getattr(task, f)):
            raise ValueError(f"`{name}.{f}` must be callable, got {getattr(task, f)!r}.")
    for f in ("prompt_len", "answer_len", "vocab_size"):
        validation.check_positive_int(f"{name}.{f}", getattr(task, f))
    mask = task.mask_id
    if not isinstance(mask, int | np.integer) or not 0 <= mask < task.vocab_size:
        raise ValueError(f"`{name}.mask_id` must be an int in [0, vocab_size={task.vocab_size})"
                         f", got {mask!r}.")


def register_task(name: str, factory, *, overwrite: bool = False) -> None:
    """Makes ``make_task(name, **kwargs)`` build ``factory(**kwargs)``.

    After this call the study binaries (``experiments/dllm.py``, ``dllm_train.py``,
    ``poke_train.py``) accept ``name`` in ``config.tasks`` like a shipped task. Without any
    code of yours running first, a config does the same with ``config.task_refs = {name:
    "package.module:attr"}`` (``validate_config`` registers them). Registering the same
    factory twice under one name is a no-op (a module imported twice).

    Args:
      name: the task name (letters, digits and ``_ -``; it names the model folders, result
        units and ``config.task_kwargs`` / ``config.task_train`` entries).
      factory: a callable returning a task (``Task``), e.g. a task class; the keyword
        arguments of ``make_task`` (``config.task_kwargs[name]``) are passed on. Also a
        ready task object (then it takes no keyword arguments) or a string
        ``"package.module:attr"`` naming either (imported now; dotted ``attr`` allowed).
      overwrite: replace another registration of ``name`` (never a shipped task).

    Raises:
      ValueError: a bad or shipped ``name``, ``name`` taken by another factory without
        ``overwrite``, a ``factory`` that is neither callable nor a task, or a reference
        that does not import.

    Example:
      >>> import dataclasses
      >>> import jax
      >>> import jax.numpy as jnp
      >>> from jaxlab.dllm import tasks
      >>> @dataclasses.dataclass(frozen=True)
      ... class Copy:  # answer = the prompt; tokens 0..3, 4 = mask
      ...     length: int = 3
      ...     name: str = "copy"
      ...     vocab_size: int = 5
      ...     mask_id: int = 4
      ...     @property
      ...     def prompt_len(self): return self.length
      ...     @property
      ...     def answer_len(self): return self.length
      ...     def sample(self, key, n):
      ...         p = jax.random.randint(key, (n, self.length), 0, 4)
      ...         return p, p
      ...     def verify(self, prompt, answer):
      ...         return jnp.all(prompt == answer, axis=1)
      >>> tasks.register_task("copy", Copy)
      >>> task = tasks.make_task("copy", length=5)
      >>> prompt, answer = task.sample(jax.random.key(0), 2)
      >>> task.verify(prompt, answer).tolist()
      [True, True]
      >>> tasks.unregister_task("copy")
      >>> tasks.register_task("add2", "jaxlab.dllm.tasks:Addition")  # by reference
      >>> tasks.make_task("add2", n_digits=2).answer_len
      3
      >>> tasks.unregister_task("add2")
    """
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_-]+", name):
        raise ValueError("`name` must be a non-empty string of letters, digits, '_' and '-', "
                         f"got {name!r}.")
    if name in BASE_TASKS or name in HARD_VARIANTS:
        raise ValueError(f"`name`={name!r} is a shipped task; pick another name.")
    factory = _as_factory(factory, name)
    if name in TASKS and TASKS[name] is not factory and not overwrite:
        raise ValueError(f"`name`={name!r} is already registered to {TASKS[name]!r}; pass "
                         "overwrite=True to replace it.")
    TASKS[name] = factory


def register_refs(refs) -> None:
    """``register_task(name, ref)`` for each item of ``refs`` (a dict ``name ->
    "package.module:attr"``, e.g. ``config.task_refs``); None or empty does nothing.

    Raises:
      ValueError: as ``register_task``, naming ``task_refs.<name>``.
    """
    for name, ref in dict(refs or {}).items():
        try:
            register_task(name, ref)
        except ValueError as e:
            raise ValueError(f"`task_refs.{name}` is invalid: {e}") from e


def unregister_task(name: str) -> None:
    """Removes a task added by ``register_task`` (shipped tasks stay).

    Raises:
      ValueError: ``name`` is shipped or not registered.
    """
    if name in BASE_TASKS or name in HARD_VARIANTS:
        raise ValueError(f"`name`={name!r} is a shipped task and cannot be removed.")
    if name not in TASKS:
        raise ValueError(f"`name`={name!r} is not a registered task.")
    del TASKS[name]
    _INSTANCES.pop(name, None)


_INSTANCES: dict = {}  # name -> the wrapper of a ready task object (identity for re-registering)


def _import_ref(ref: str):
    module, _, attr = ref.partition(":")
    if not module or not attr:
        raise ValueError(f"the reference {ref!r} must be 'package.module:attr'.")
    try:
        obj = importlib.import_module(module)
    except ImportError as e:
        raise ValueError(f"the reference {ref!r}: cannot import {module!r} ({e}); is it on "
                         "PYTHONPATH?") from e
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"the reference {ref!r}: {module!r} has no attribute {attr!r}.")
        obj = getattr(obj, part)
    return obj


def _as_factory(obj, name: str):
    """A factory from a callable, a ready task object or a "package.module:attr" string."""
    if isinstance(obj, str):
        obj = _import_ref(obj)
    if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "sample")):
        return obj
    if hasattr(obj, "sample"):
        check_task(obj, name)
        prev = _INSTANCES.get(name)
        if prev is not None and prev.task is obj:
            return prev

        def instance(**kwargs):
            if kwargs:
                raise ValueError(f"task {name!r} is a task object, not a factory: it takes no "
                                 f"keyword arguments, got {sorted(kwargs)}.")
            return obj

        instance.task = obj
        _INSTANCES[name] = instance
        return instance
    raise ValueError(f"`factory` must be a callable returning a task, a task or "
                     f"'package.module:attr', got {type(obj).__name__}.")


def task_names() -> tuple[str, ...]:
    """Sorted names ``make_task`` accepts now (shipped, hard variants, registered)."""
    return tuple(sorted(TASKS))


def make_task(name: str, **kwargs):
    """Builds a task by name.

    Args:
      name: ``sudoku``, ``countdown``, ``star_graph``, ``addition``, a hard variant
        (``HARD_VARIANTS``: its sizes by default, ``kwargs`` override them) or a name added
        by ``register_task``.
      **kwargs: passed to the task's constructor (factory).

    Returns:
      The task (checked by ``check_task``).

    Raises:
      ValueError: an unknown ``name`` or a factory that does not return a task.

    Example:
      >>> from jaxlab.dllm import tasks
      >>> task = tasks.make_task("addition", n_digits=3)
      >>> task.prompt_len, task.answer_len, task.mask_id
      (6, 4, 10)
    """
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}: `name` must be one of {sorted(TASKS)} or a "
                         "name added by tasks.register_task (config.task_refs).")
    if name in HARD_VARIANTS:
        return TASKS[name](**{**HARD_VARIANTS[name][1], **kwargs, "name": name})
    task = TASKS[name](**kwargs)
    if name not in BASE_TASKS:
        check_task(task, f"make_task({name!r})")
    return task
