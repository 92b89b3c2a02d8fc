"""The one list of methods: read by the suite, the notebook generator, the provenance of
cache keys, the TensorBoard export and the tests (mostly through
``experiments.lib.registry``, which adds the lookups by name and running a method).

Each method has a config module (``experiments/configs/<name>.py``, presets ``smoke``,
``quick``, ``full``) and an experiment module (``experiments/<name>.py``) whose
``EXPERIMENT`` is a ``study.Experiment`` and which is also the method's binary. This
module imports no other module of ``experiments.lib``: the config and experiment modules
are found by name when asked for.
"""

import importlib
from typing import NamedTuple

# The name this package is imported under (``experiments`` in a checkout; the installed
# wheel ships it as ``jaxlab_experiments``): method modules are imported under the same one.
_PACKAGE = __name__.rsplit(".", 2)[0]


class Method(NamedTuple):
    """A registered method.

    Attributes:
      name: short name (``results/<name>/``, ``colab/<name>.ipynb``).
      title: human title.
      extras: the pip extra its experiment needs (``dev`` when none beyond the core).
      summary: one line for the notebook and README.
    """

    name: str
    title: str
    extras: str
    summary: str

    @property
    def config_module(self) -> str:
        return f"{_PACKAGE}.configs.{self.name}"

    @property
    def experiment_module(self) -> str:
        return f"{_PACKAGE}.{self.name}"

    @property
    def config_file(self) -> str:
        return f"experiments/configs/{self.name}.py"

    def get_config(self, preset: str = "quick"):
        """The method's ConfigDict at ``preset`` (its config module imported now)."""
        return importlib.import_module(self.config_module).get_config(preset)

    def experiment(self):
        """The method's ``study.Experiment`` (its experiment module imported now)."""
        return importlib.import_module(self.experiment_module).EXPERIMENT


METHODS: dict[str, Method] = {m.name: m for m in [
    Method("qlearning", "Periodic Q-learning", "dev",
           "Constant vs geometrically growing target-update periods on random MDPs: "
           "samples to reach ||Q - Q*||_inf <= eps."),
    Method("bco", "Gradient-variation bandit convex optimization", "dev",
           "Two-point BCO (convex, strongly convex), one-point linear bandits on boxes, "
           "dynamic and universal regret against the anchor baselines."),
    Method("avatar", "AvAtar: active supervision for OT alignment", "ot",
           "Entropic OT / FGW alignment on ott-jax with adjoint-CG utilities choosing "
           "which pairs to label."),
    Method("gepc", "GEPC: equivariance-consistency OOD detection", "vision",
           "Group-equivariant posterior consistency of a diffusion score as an OOD score "
           "against score-norm, MSMA and DiffPath."),
    Method("dllm", "POKE-SMC: masked diffusion LM decoding", "dev",
           "Unmasking policies, best-of-N, Path-LL SMC and POKE-SMC on four reasoning "
           "tasks with exact verifiers (shipped tiny denoisers)."),
    Method("rfo", "RFO: flow policies through MJX", "rl",
           "Flow policies trained by backpropagating through the ODE and MJX physics "
           "against critic-free APG, Gaussian SHAC and PPO at equal environment steps."),
]}


# What the suite runs besides ``METHODS``: SALE, a pair of kernels rather than a study of
# the method list. It is kept out of ``METHODS`` because that list also means "has a
# notebook, a guide, a quickstart, TensorBoard series and a multi-host test made from the
# method template", and SALE's notebook (``colab/sale.ipynb``), guide (``docs/sale.rst``)
# and quickstart are written by hand; every consumer of ``METHODS`` already adds "sale"
# where it belongs. ``experiments/sale.py`` (config ``experiments/configs/sale.py``) is an
# ordinary ``study.Experiment`` and binary all the same.
SUITE_EXTRAS: dict[str, Method] = {m.name: m for m in [
    Method("sale", "SALE: sparse attention kernels", "dev",
           "The reference and the Pallas kernels (interpreted on a CPU) on a small causal "
           "head group of synthetic inputs: kept blocks and outputs compared, density, "
           "attention recall and output error per keep threshold."),
]}


def suite_methods() -> dict[str, Method]:
    """What the suite runs, in order: ``METHODS`` (read now, so a method registered later
    is included), then ``SUITE_EXTRAS``."""
    return {**METHODS, **SUITE_EXTRAS}


class LargerRun(NamedTuple):
    """A method's binary run at a preset larger than the suite's, into
    ``<results>/<method>_<preset>/``: the suite's REPORT.md and the docs' evidence pages
    include it when that folder holds a summary.

    Attributes:
      method: a name in ``METHODS``.
      preset: the config preset (``experiments/configs/<method>.py:<preset>``).
    """

    method: str
    preset: str

    @property
    def folder(self) -> str:
        return f"{self.method}_{self.preset}"

    @property
    def command(self) -> str:
        """The command that writes ``results/<folder>/``."""
        return (f"python -m experiments.{self.method} --config=experiments/configs/"
                f"{self.method}.py:{self.preset} --workdir=results/{self.folder}")


# The runs behind the headline figures that no suite preset produces in minutes.
LARGER_RUNS: tuple[LargerRun, ...] = (LargerRun("dllm", "full"), LargerRun("rfo", "soft_study"))

