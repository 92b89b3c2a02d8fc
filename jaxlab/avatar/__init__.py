"""AvAtar: active supervision for entropic-OT alignment with adjoint-state gradients.

The method's API (``jaxlab.core.types.Algorithm``, the key always first)::

    alg = avatar.active(task, "avatar", rounds=10)   # constructor: checks, binds settings
    state = alg.init(key)                            # avatar.State(anchors, test, ...)
    state, info = alg.step(key, state)               # one round -> avatar.Info

``avatar.init(key, task, ...)`` / ``avatar.step(key, state, task, ...)`` take the task and
settings as arguments; ``avatar.evaluate(state, task)`` measures the current anchors;
``avatar.run_active(key, task, strategy, ...)`` is the whole protocol (a ``lax.scan`` of
``step``). Modules: ``tasks`` (alignment problems), ``alignment`` (anchor costs, metrics),
``solvers`` (ott-jax Sinkhorn / FGW, imported lazily), ``utilities`` and ``adjoint`` (the
adjoint-CG cost gradient), ``scores`` (node scores: ``official``, ``abs``, ``gain``),
``datasets`` (ACM-DBLP / Foursquare-Twitter loaders and subsamples), ``loop`` (the active
loop: this API; ``protocol="paper"`` or ``"fixed"``), ``comparison`` (``compare(key, problem,
*, contenders, tuning, seeds, goals, pairs, metrics, settings, ...)``: the study's paired
comparison on your task, the paper's, never-queried and removal-only lines of one run).
Whole graphs: ``parrot_official`` (PARROT as its official code runs it), ``wholegraph``
(AvAtar's protocol round by round, warm starts, a state to resume from after any round),
``teaching`` (ours: the released score reweighted so its labels go where the plan is
unsure; ``wholegraph``'s ``avatar_*`` variants and ``"ours"``).
Nothing here writes a file unless asked (``compare``'s ``results_path``); ``compare``
reports progress on stderr (``progress=False``: silent); the experiments cache task builds
and checkpoint runs (``experiments/lib``).
"""

from jaxlab.avatar import (
    adjoint,
    alignment,
    baselines,
    comparison,
    datasets,
    loop,
    parrot,
    parrot_official,
    scores,
    solvers,
    tasks,
    teaching,
    utilities,
    wholegraph,
)
from jaxlab.avatar.adjoint import cost_gradient
from jaxlab.avatar.comparison import compare
from jaxlab.avatar.loop import (
    PROTOCOLS,
    SCORES,
    STRATEGIES,
    ActiveResult,
    Info,
    State,
    active,
    align,
    evaluate,
    informativeness,
    init,
    run_active,
    run_active_switch,
    step,
)
from jaxlab.avatar.tasks import AlignmentTask

__all__ = ["PROTOCOLS", "SCORES", "STRATEGIES", "ActiveResult", "AlignmentTask", "Info",
           "State", "active", "adjoint", "align", "alignment", "compare", "comparison",
           "cost_gradient", "datasets", "evaluate", "scores",
           "informativeness", "init", "loop", "parrot", "parrot_official", "baselines",
           "run_active", "run_active_switch", "solvers", "step", "tasks", "teaching",
           "utilities", "wholegraph"]
