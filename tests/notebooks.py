"""Runs a colab/ notebook with nbclient (papermill-style parameters) for the tests.

Each method's smoke test executes that method's notebook, so the notebook, the binary's
``train_and_evaluate`` and the test share one smoke run instead of three. Every run is also
checked to build no program twice within a unit (``assert_each_program_built_once``).
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
    if name != "sale":  # a study's notebook (SALE's writes a table, not a study run)
        assert_each_program_built_once(workdir)
    with open(os.path.join(workdir, "summary.json")) as f:
        return json.load(f), nb


# Repeated builds shorter than this in all are not counted: third-party code run eagerly
# (ott-jax's solver outputs) builds some millisecond element-wise programs once per weak
# type of the same operands, which give the same HLO.
DUPLICATE_FLOOR_S = 0.05


def assert_each_program_built_once(workdir, floor_s: float | None = DUPLICATE_FLOOR_S) -> None:
    """Fails naming the unit and the programs when a unit of the study run in ``workdir``
    built the same program (same persistent-cache key) more than once, from the
    ``duplicate_programs`` of its ``timing.json`` (``experiments.lib.compile_cache``);
    repeated builds of ``floor_s`` seconds or less in all are let pass (None: none is). Needs the
    persistent compilation cache on (the test run's own folder): without it JAX computes
    no program keys and nothing can be checked."""
    with open(os.path.join(workdir, "timing.json")) as f:
        timing = json.load(f)
    if not timing.get("compile_cache"):
        return
    twice = {unit: row["duplicate_programs"] for unit, row in timing["units"].items()
             if row.get("duplicate_programs")
             and (floor_s is None or row.get("duplicate_s", 0.0) > floor_s)}
    assert not twice, f"programs built more than once within a unit: {twice}"
