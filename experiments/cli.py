"""Console entry points: ``jaxlab <binary> [flags]`` and ``jaxlab-suite [flags]``.

``jaxlab qlearning --workdir=/tmp/q`` is ``python -m experiments.qlearning --workdir=/tmp/q``
from any folder: the binaries' default configs resolve against the installed package. A
missing optional dependency is one line naming the extra to install. ``jaxlab --help`` (the
listing) imports neither jax nor jaxlab, so it answers at once.
"""

import runpy
import sys

# binary -> what it does (the one-line listing of ``jaxlab --help``)
BINARIES = {
    "qlearning": "Periodic Q-learning study (constant vs growing target periods)",
    "bco": "Gradient-variation bandit convex optimization study",
    "avatar": "AvAtar active alignment study (needs [ot])",
    "gepc": "GEPC OOD-detection study (needs [vision])",
    "dllm": "POKE-SMC decoding study on masked-diffusion LMs",
    "rfo": "RFO flow policies through MJX (needs [rl])",
    "sale": "SALE kernels vs their reference on a small head (the suite's SALE run)",
    "sale_accuracy": "SALE sparse-attention accuracy on trained models and synthetic inputs",
    "dllm_train": "trains the dLLM task denoisers",
    "poke_train": "fits the POKE value heads",
    "poke_siblings": "POKE heads trained on sibling particles",
    "gepc_train": "trains the GEPC score model",
    "bench_qlearning": "benchmark: jitted Q-learning scan vs a NumPy loop",
    "bench_bco": "benchmark: jitted BCO learner vs a NumPy loop",
    "bench_sale": "benchmark: SALE density, recall and error vs sequence length",
    "bench_poke": "benchmark: POKE-SMC particles vs N greedy decodes batched the same way",
    "bench_avatar_fullgraph": "benchmark: whole-graph aligners (needs [ot])",
    "avatar_wholegraph": "AvAtar's paper protocol on the whole ACM-DBLP / Foursquare-Twitter",
    "local_cluster": "runs a binary as a multi-process job on this machine",
}

USAGE = "usage: jaxlab <binary> [--flags]   (jaxlab <binary> --help lists its flags)"


def _run_module(module: str, prog: str, args: list[str]) -> int:
    """Runs ``module`` as ``__main__`` with ``args``; a missing extra is one line, exit 2."""
    from jaxlab.core import extras  # imports jax: only once a binary runs, never for --help

    sys.argv = [prog, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except extras.MissingExtraError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``jaxlab <binary> [flags]``: runs ``experiments.<binary>`` (under the name this
    package was imported as: ``jaxlab_experiments`` where the wheel is installed)."""
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help", "help"):
        width = max(map(len, BINARIES))
        print("\n".join([USAGE, "", "binaries:"]
                        + [f"  {k:<{width}}  {v}" for k, v in BINARIES.items()]
                        + ["", "jaxlab-suite runs every method at one preset (--help)."]))
        return 0 if args else 2
    name = args[0]
    if name not in BINARIES:
        print(f"error: unknown binary {name!r}; choose from {', '.join(BINARIES)}",
              file=sys.stderr)
        return 2
    return _run_module(f"{__package__}.{name}", f"jaxlab {name}", args[1:])


def suite(argv: list[str] | None = None) -> int:
    """``jaxlab-suite [flags]``: runs ``experiments.suite``."""
    return _run_module(f"{__package__}.suite", "jaxlab-suite",
                       sys.argv[1:] if argv is None else list(argv))


if __name__ == "__main__":
    sys.exit(main())
