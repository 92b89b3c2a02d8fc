"""The GPU device check's CPU rehearsal (``--smoke``): every phase writes its JSON lines."""

import json

import pytest

from experiments import device_check_sale


# The device-check script end to end on the CPU: 45 s at -n 2, so -m slow.
@pytest.mark.slow
def test_smoke_run_records_every_phase(tmp_path):
    out = tmp_path / "check.jsonl"
    path = device_check_sale.main(["--smoke", "--time_budget_s=1", f"--out={out}"])
    recs = [json.loads(line) for line in open(path)]
    phases = [r["phase"] for r in recs]
    assert phases[0] == "env" and phases[-1] == "done"
    assert recs[0]["jax"] and recs[0]["default_backend"] == "cpu"
    correct = [r for r in recs if r["phase"] == "correctness"]
    assert {r["backend"] for r in correct} == {"triton", "mosaic_gpu"}
    assert all(r["status"] == "ok" and r["kept_identical"] for r in correct), correct
    assert all(r["kernel_vs_ref_max_abs"] < (1e-5 if r["dtype"] == "float32" else 3e-2)
               for r in correct)
    timed = {(r["backend"], r["what"]) for r in recs
             if r["phase"] == "latency" and r.get("status") == "ok"}
    assert timed == {(b, w) for b in ("triton", "mosaic_gpu")
                     for w in ("all_kept", "sale", "estimate")}
    skipped = [r for r in recs if r.get("status") == "skipped"]
    assert any("no GPU" in r["reason"] for r in skipped)  # cuDNN / Pallas flash baselines
    assert any(r.get("n") == 256 and "budget" in r["reason"] for r in skipped)
    assert sum(r["phase"] == "summary" for r in recs) == 2
    launches = {r["backend"]: r["launch"] for r in recs if r["phase"] == "summary"}
    assert launches["triton"]["num_warps"] == 8  # 2 / 1 heads, b_q = 64: 128 rows, 16 per warp
    assert all(x["heads_per_program"] == 2 for x in launches.values())  # the whole group
