"""A tiny study for the workdir fault tests (tests/test_workdir_faults.py).

``python -m tests.workdir_program study WORKDIR`` runs ``EXPERIMENT`` into WORKDIR;
``python -m tests.workdir_program suite WORKDIR`` runs the suite at the smoke preset with
the study registered as method "toy" (``register``). Environment:

* ``TOY_COUNTER``: a file that gets one line per unit computed (the tests count them).
* ``TOY_STARTED`` / ``TOY_RELEASE``: the unit creates TOY_STARTED, then waits until
  TOY_RELEASE exists (a writer caught in the middle of its run).
* ``TOY_KILL_IN_PLOT=1``: the process SIGKILLs itself after writing the first figure.
"""

import os
import signal
import sys
import time

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import ml_collections  # noqa: E402
import numpy as np  # noqa: E402

from experiments.lib import plots, study  # noqa: E402

FIGURES = ("first.png", "second.png")


def get_config(preset: str = "smoke"):
    return ml_collections.ConfigDict({"n": {"smoke": 3, "quick": 4}[preset], "seed": 0})


def _unit(ctx, config):
    del ctx
    if os.environ.get("TOY_COUNTER"):
        with open(os.environ["TOY_COUNTER"], "a") as f:
            f.write("unit\n")
    if os.environ.get("TOY_STARTED"):
        with open(os.environ["TOY_STARTED"], "w") as f:
            f.write(str(os.getpid()))
        deadline = time.monotonic() + 300
        while not os.path.exists(os.environ["TOY_RELEASE"]) and time.monotonic() < deadline:
            time.sleep(0.05)
    return {"x": np.arange(config.n, dtype=np.float32) / 3}


def _plot(config, summary, out, workdir):
    for i, name in enumerate(FIGURES):
        fig, ax = plt.subplots(figsize=(2, 2))
        ax.plot(out["values"]["x"] * (i + 1))
        plots.save(fig, os.path.join(workdir, name))
        if i == 0 and os.environ.get("TOY_KILL_IN_PLOT") == "1":
            os.kill(os.getpid(), signal.SIGKILL)


EXPERIMENT = study.Experiment(
    name="toy", validate=lambda c: None,
    units=lambda c, w: [study.Unit("values", lambda ctx: _unit(ctx, c))],
    summarize=lambda c, out: {"mean": float(np.mean(out["values"]["x"]))},
    plot=_plot, headline=lambda s: [("mean", f"{s['mean']:.4f}")])


def register(setitem=None) -> None:
    """Registers this module as the suite's method "toy" (``setitem(mapping, key, value)``,
    default plain assignment; tests pass ``monkeypatch.setitem``)."""
    from experiments.lib import registry

    setitem = setitem or (lambda m, k, v: m.__setitem__(k, v))
    module = sys.modules[__name__]
    setitem(sys.modules, "experiments.configs.toy", module)
    setitem(sys.modules, "experiments.toy", module)
    setitem(registry.METHODS, "toy", registry.Method("toy", "Toy", "dev", "-"))


if __name__ == "__main__":
    what, workdir = sys.argv[1:3]
    if what == "suite":
        from experiments import suite

        register()
        suite.run_suite("smoke", workdir, ["toy"])
    else:
        study.train_and_evaluate(EXPERIMENT, get_config(), workdir)
    print("DONE")
