"""Writes colab/<method>.ipynb from one template (run after changing the template).

  python colab/make_notebooks.py

Every notebook: (1) installs jaxlab when it is not already inside a checkout (on Colab it
clones ``JAXLAB_REPO`` and pip-installs the method's extras), (2) loads the method's
experiment config at ``PRESET`` (``smoke`` by default: minutes on a CPU runtime; use
``quick`` / ``full`` on a GPU/TPU runtime), (3) calls the same
``train_and_evaluate(config, workdir)`` as the binary and the suite, (4) shows the
headline table and the PNG plots. tests/test_notebooks.py executes them at smoke size.
"""

import os
import sys

import nbformat
from nbformat import v4

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from experiments.lib import registry  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

METHODS = registry.METHODS

# The clone address of the install cell (README "Colab notebooks"); JAXLAB_REPO overrides it.
REPO_URL = "https://github.com/jaxlab/jaxlab.git"

INSTALL = '''\
# Install. If a checkout is found (importable, editable-installed, or at or above the
# working directory) nothing is installed. Otherwise (Colab) the repository JAXLAB_REPO is
# cloned to JAXLAB_DIR and pip-installed with this method's extras. Runs from any directory.
import importlib
import os
import subprocess
import sys
REPO = os.environ.get("JAXLAB_REPO", "REPO_URL")
EXTRAS = "{extras}"
try:
    import experiments.lib.registry  # noqa: F401
except ModuleNotFoundError:
    def in_checkout(d):
        return os.path.isdir(os.path.join(d, "experiments", "configs"))
    try:  # an editable install (its checkout's experiments/ is installed as jaxlab_experiments)
        import jaxlab_experiments
        root = os.path.dirname(jaxlab_experiments.PACKAGE_DIR)
    except (ModuleNotFoundError, AttributeError):
        root = os.getcwd()
    if not in_checkout(root):
        root = os.getcwd()
    while root != os.path.dirname(root) and not in_checkout(root):
        root = os.path.dirname(root)
    if not in_checkout(root):  # not inside a checkout
        root = os.environ.get("JAXLAB_DIR", "/content/jaxlab")
        if not os.path.isdir(root):
            subprocess.check_call(["git", "clone", "-q", REPO, root])
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "-e",
                               ".[" + EXTRAS + "]"], cwd=root)
    sys.path.insert(0, root)
    importlib.invalidate_caches()
import jax
import jaxlab
print("jaxlab:", os.path.dirname(jaxlab.__file__), "| JAX", jax.__version__,
      "| devices:", jax.devices())'''.replace("REPO_URL", REPO_URL)

PARAMS = '''\
PRESET = "smoke"  # "quick" (CPU, minutes) or "full" (accelerator)
WORKDIR = "results_colab/{method}"
OVERRIDES = {{}}  # flattened config fields, e.g. {{"num_seeds": 8}}'''

RUN = '''\
from experiments.lib import registry

config = registry.get_config("{method}", PRESET)
config.update_from_flattened_dict(OVERRIDES)
summary = registry.train_and_evaluate("{method}", config, WORKDIR)  # same as the binary
experiment = registry.experiment("{method}")'''

SHOW = '''\
import glob
from IPython.display import Image, Markdown, display

rows = ["| metric | value |", "| --- | --- |"]
rows += [f"| {{k}} | {{v}} |" for k, v in experiment.headline(summary)]
display(Markdown("\\n".join(rows)))
pngs = sorted(glob.glob(os.path.join(WORKDIR, "*.png")))
for path in pngs:
    display(Image(filename=path))
assert pngs, "the experiment wrote no plots"'''


SALE_TITLE = ("SALE: low-bit estimation + block-sparse attention", "dev",
              "Relative Attention Score block selection and the block-sparse attention "
              "kernel against dense attention: kept-block density, attention-mass recall and "
              "output error per threshold tau (Pallas interpreter on CPU, compiled on GPU).")

SALE_RUN = '''\
import json
import jax.numpy as jnp
import matplotlib.pyplot as plt
from pallas_kernels.sale import reference as R
from pallas_kernels.sale.estimate import sale_attention_pallas
from pallas_kernels.sale.synthetic import structured_qkv

n = {"smoke": 256, "quick": 1024}.get(PRESET, 4096)
on_gpu = jax.default_backend() == "gpu"
q, k, v = structured_qkv(n, 64, 4, 2, dtype=jnp.bfloat16 if on_gpu else jnp.float32)
dense = R.dense_attention(q, k, v, True)
rows = []
for tau in (1e-4, 1e-3, 1e-2, 3e-2):
    keep = R.block_keep_mask(q, k, tau, causal=True)
    out, _ = sale_attention_pallas(q, k, v, tau, causal=True, interpret=not on_gpu)
    rows.append({"tau": tau, "density": float(keep.mean()),
                 "recall": float(R.attention_recall(q, k, keep, causal=True).mean()),
                 "mean_abs_error": float(jnp.abs(out.astype(jnp.float32) - dense).mean())})
os.makedirs(WORKDIR, exist_ok=True)
with open(os.path.join(WORKDIR, "summary.json"), "w") as f:
    json.dump({"sequence_length": n, "rows": rows}, f, indent=2)
fig, ax = plt.subplots(figsize=(5, 3.5))
taus = [r["tau"] for r in rows]
ax.semilogx(taus, [r["density"] for r in rows], "o-", label="kept-block density")
ax.semilogx(taus, [r["recall"] for r in rows], "s--", label="attention-mass recall")
ax.set(xlabel="tau", title=f"SALE at N={n} (causal)")
ax.legend()
fig.tight_layout()
fig.savefig(os.path.join(WORKDIR, "sale_tau.png"), dpi=120)
plt.close(fig)'''

SALE_SHOW = '''\
import glob
from IPython.display import Image, Markdown, display

table = ["| tau | density | recall | mean abs error |", "| --- | --- | --- | --- |"]
table += [f"| {r['tau']:g} | {r['density']:.3f} | {r['recall']:.4f} | {r['mean_abs_error']:.2e} |"
          for r in rows]
display(Markdown("\\n".join(table)))
for path in sorted(glob.glob(os.path.join(WORKDIR, "*.png"))):
    display(Image(filename=path))'''


def notebook(method: str) -> nbformat.NotebookNode:
    sale = method == "sale"
    title, extras, summary = SALE_TITLE if sale else METHODS[method][1:]
    nb = v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.metadata["colab"] = {"provenance": []}
    nb.cells = [
        v4.new_markdown_cell(
            f"# {title}\n\n{summary}\n\n" + (
                "Calls the same kernels as `python -m experiments.bench_sale` at the `smoke` "
                "size (change `PRESET` below)." if sale else
                f"Runs the `{method}` experiment (`experiments/{method}.py`) at the `smoke` preset "
                f"(change `PRESET` below), the same code as `python -m experiments.{method}`. "
                f"Its guide, `docs/{method}.rst`, has the measured results and their limits.")),
        v4.new_code_cell(INSTALL.format(extras=extras)),
        v4.new_code_cell(PARAMS.format(method=method), metadata={"tags": ["parameters"]}),
        v4.new_code_cell(SALE_RUN if sale else RUN.format(method=method)),
        v4.new_code_cell(SALE_SHOW if sale else SHOW.format()),
    ]
    return nb


def main():
    for method in [*METHODS, "sale"]:
        path = os.path.join(HERE, f"{method}.ipynb")
        nbformat.write(notebook(method), path)
        print("wrote", path)


if __name__ == "__main__":
    main()
