"""The suite's SALE entry (experiments/sale.py): the reference and the interpreted Pallas
kernels on a small head, the accuracy check, one figure and the REPORT rows."""

import json

import numpy as np
import pytest

from experiments import sale, suite
from experiments.configs import sale as sale_config
from experiments.lib import registry, study
from pallas_kernels.sale import reference as R
from pallas_kernels.sale.synthetic import structured_qkv


def _config(**overrides):
    c = sale_config.get_config("smoke")
    c.length, c.taus = 256, (1e-4, 3e-2)
    c.update(overrides)
    return c


def test_sale_runs_in_the_suite_but_is_not_a_template_method():
    assert suite.SUITE_METHODS[-1] == "sale" and "sale" not in registry.METHODS
    assert set(suite.SUITE_METHODS) == {*registry.METHODS, "sale"}
    assert registry.method("sale").experiment() is sale.EXPERIMENT
    assert registry.get_config("sale", "quick").length == sale_config.LENGTHS["quick"]
    with pytest.raises(ValueError, match="unknown preset 'smok'"):
        sale_config.get_config("smok")


def test_sale_entry_checks_the_kernels_against_the_reference(tmp_path):
    config = _config()
    summary = study.train_and_evaluate(sale.EXPERIMENT, config, tmp_path)
    assert summary["accuracy_ok"] and summary["kernel_max_abs_diff"] <= config.kernel_atol
    low, high = summary["rows"]
    assert low["kernel_kept_equal"] and high["kernel_kept_equal"]
    # a larger tau keeps fewer blocks and recalls less attention mass
    assert high["density"] <= low["density"] <= 1 and high["recall_mean"] <= low["recall_mean"]
    # the reported error against dense attention, recomputed with dense attention alone
    q, k, v = structured_qkv(256, config.dim, config.heads, config.kv_heads, seed=0)
    dense = np.asarray(R.dense_attention(q, k, v, True))
    out, _ = R.sale_attention(q, k, v, 3e-2, R.BlockSizes(), 8, True)
    err = np.abs(np.asarray(out) - dense).mean() / np.abs(dense).mean()
    np.testing.assert_allclose(high["err_rel"], err, rtol=1e-5)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["provenance"]["figures"] == ["sale_tau.png"]
    rows = sale.headline(summary)
    assert rows[0][1].endswith("(passed)") and rows[0][1].startswith("yes; ")
    assert [r[0].split(":")[0] for r in rows[1:]] == ["tau=0.0001", "tau=0.03"]


def test_the_accuracy_check_fails_below_the_kernels_error(tmp_path):
    summary = study.train_and_evaluate(sale.EXPERIMENT, _config(kernel_atol=1e-12, taus=(1e-3,)),
                                       tmp_path)
    assert summary["kernel_max_abs_diff"] > 1e-12 and not summary["accuracy_ok"]
    assert sale.headline(summary)[0][1].endswith("(FAILED)")


@pytest.mark.parametrize("field, value, says", [
    ("heads", 3, "`config.heads`=3 must be a multiple"),
    ("dim", 8, "`config.dim` must be >= 17"),
    ("taus", (0.0,), "`config.taus`"),
    ("kernel_atol", 0.0, "`config.kernel_atol`"),
])
def test_sale_config_errors_name_the_field(field, value, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(")):
        sale.EXPERIMENT.validate(_config(**{field: value}))
