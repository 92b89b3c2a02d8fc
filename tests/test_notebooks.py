"""Every method has a notebook; the ones no method test executes run here (smoke size).

Method notebooks are executed by each method's smoke test (tests/<method>/...,
via tests/notebooks.py); this file covers the SALE notebook and the inventory.
"""

import os

import pytest

from tests.notebooks import COLAB, run_notebook

pytest.importorskip("nbclient")


def test_one_notebook_per_method_and_generated_from_the_template():
    from colab import make_notebooks
    from experiments import suite

    names = {f[:-6] for f in os.listdir(COLAB) if f.endswith(".ipynb")}
    assert names == set(suite.METHODS) | {"sale"}
    import nbformat

    for name in names:  # the committed notebooks equal the template's output
        on_disk = nbformat.read(os.path.join(COLAB, f"{name}.ipynb"), as_version=4)
        fresh = make_notebooks.notebook(name)
        assert [c.source for c in on_disk.cells] == [c.source for c in fresh.cells], name


@pytest.mark.heavy
def test_sale_notebook(tmp_path):
    summary, _ = run_notebook("sale", tmp_path)
    rows = summary["rows"]
    dens = [r["density"] for r in rows]
    assert dens == sorted(dens, reverse=True) and dens[0] > dens[-1]  # tau prunes blocks
    assert all(r["recall"] > 0.5 for r in rows)
