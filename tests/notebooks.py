"""Runs a colab/ notebook with nbclient (papermill-style parameters) for the tests.

Each method's smoke test executes that method's notebook, so the notebook, the binary's
``train_and_evaluate`` and the test share one smoke run instead of three.
"""

import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLAB = os.path.join(ROOT, "colab")


def run_notebook(name: str, workdir, overrides: dict | None = None):
    """Executes colab/<name>.ipynb writing to ``workdir``; returns (summary dict, notebook).

    Raises:
      AssertionError: if the notebook shows no plot or no table, or wrote no summary.
    """
    import nbclient
    import nbformat

    nb = nbformat.read(os.path.join(COLAB, f"{name}.ipynb"), as_version=4)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, "a notebook needs exactly one cell tagged 'parameters'"
    params[0].source = (f'PRESET = "smoke"\nWORKDIR = {os.fspath(workdir)!r}\n'
                        f"OVERRIDES = {overrides or {}!r}")
    # The kernel starts in the workdir, outside the checkout: notebooks run from any directory.
    nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": os.fspath(workdir)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert any("image/png" in o.get("data", {}) for o in outputs), "no plot was displayed"
    assert any("text/markdown" in o.get("data", {}) for o in outputs), "no results table"
    with open(os.path.join(workdir, "summary.json")) as f:
        return json.load(f), nb
