"""A workdir that cannot lie: tampered unit files and summaries are recomputed with a
warning naming the file, a second writer fails with one line, a changed numeric setting,
package or weight file misses the cache, and a run killed between its figures and its
summary is completed on the next run (``tests/workdir_program.py`` is the study run)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import jax
import ml_collections
import numpy as np
import pytest

from experiments.lib import artifacts, checkpoint, locks, provenance, results, study
from tests import workdir_program

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _config(**kw):
    return ml_collections.ConfigDict({"n": 3, "seed": 0, **kw})


def _unit(calls, name="u"):
    def run(ctx):
        calls.append(name)
        return {"x": np.arange(3, dtype=np.float32) / 3, "k": [1, 2.5]}

    return study.Unit(name, run)


def _same_hash(path, data):
    """``data`` (a unit file) with a numbers-only edit: the stored sha256 is kept."""
    result = study._decode(data["result"])
    result["x"] = result["x"] * 3
    return {"result": study._encode(result), "sha256": data["sha256"]}


def _rehashed_wrong_structure(path, data):
    """Valid JSON, a hash that matches, but not a unit result: must not raise TypeError."""
    bad = {"__dict__": 5}
    return {"result": bad, "sha256": study._unit_hash(path, bad)}


def _other_units_file(path, data):
    """A genuine unit file of another unit name copied over this one."""
    other = os.path.join(os.path.dirname(path), "other-000000000000.json")
    study.save_result(other, {"x": np.zeros(3, np.float32), "k": [0, 0.0]})
    with open(other) as f:
        return json.load(f)


@pytest.mark.parametrize("tamper", [_same_hash, _rehashed_wrong_structure, _other_units_file,
                                    "corrupt", "no_hash"])
def test_tampered_unit_file_is_recomputed_with_a_warning_naming_it(tmp_path, tamper):
    calls = []
    unit = _unit(calls)
    first = study.run_units([unit], _config(), str(tmp_path))["u"]
    _, path = study.unit_path(str(tmp_path), unit, _config())
    with open(path) as f:
        data = json.load(f)
    with open(path, "w") as f:
        if tamper == "corrupt":
            f.write('{"result": [1, 2')
        elif tamper == "no_hash":
            json.dump({"result": data["result"]}, f)
        else:
            json.dump(tamper(path, data), f)
    with pytest.warns(RuntimeWarning, match=f"unit file {path} .*recomputing unit u"):
        out = study.run_units([unit], _config(), str(tmp_path))["u"]
    assert calls == ["u", "u"]
    np.testing.assert_array_equal(out["x"], first["x"])
    assert study.load_result(path)["k"] == [1, 2.5]  # rewritten whole, hash valid again


def test_load_result_names_the_file_for_every_kind_of_damage(tmp_path):
    path = str(tmp_path / "u-k.json")
    for text in ("", "[]", '{"result": 1}', "\xff"):
        with open(path, "w", encoding="latin-1") as f:
            f.write(text)
        with pytest.raises(study.UnitFileError, match=str(path)):
            study.load_result(path)


def _fake_suite(tmp_path, monkeypatch, counter):
    from experiments import suite

    workdir_program.register(monkeypatch.setitem)
    monkeypatch.setenv("TOY_COUNTER", str(counter))
    return lambda: suite.run_suite("smoke", str(tmp_path), ["toy"])["toy"]


def _count(counter):
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def test_suite_reruns_a_corrupt_edited_or_figureless_summary(tmp_path, monkeypatch):
    counter = tmp_path / "count.txt"
    run = _fake_suite(tmp_path / "w", monkeypatch, counter)
    first = run()
    method = tmp_path / "w" / "toy"
    path = method / "summary.json"
    good = path.read_bytes()
    assert first["provenance"]["figures"] == list(workdir_program.FIGURES)
    run()  # trusted and current: reused, no warning
    assert _count(counter) == 1 and path.read_bytes() == good

    edited = json.loads(good)
    edited["mean"] *= 3
    for damage, why in ((b"{not json", "is not valid JSON"), (b"[1, 2]", "has no provenance"),
                        (json.dumps(edited).encode(), "does not match its summary_sha256")):
        path.write_bytes(damage)
        with pytest.warns(RuntimeWarning, match=f"{path} {why}.*; rerunning"):
            out = run()
        assert out["mean"] == first["mean"] and path.read_bytes() == good
    (method / "second.png").unlink()
    with pytest.warns(RuntimeWarning, match=f"lists figure {method / 'second.png'}"):
        run()
    assert (method / "second.png").stat().st_size > 0 and path.read_bytes() == good
    assert _count(counter) == 1  # every rerun reused the finished unit


def _program(*args, env=None):
    return [sys.executable, "-m", "tests.workdir_program", *args]


def _env(**kw):
    return {**os.environ, "JAX_PLATFORMS": "cpu", **{k: str(v) for k, v in kw.items()}}


def test_kill_between_figures_and_summary_then_rerun_regenerates(tmp_path, monkeypatch):
    """The process dies after its first figure: no summary.json may claim the method is
    complete; the next suite run writes every figure and the summary, reusing the unit."""
    counter = tmp_path / "count.txt"
    workdir = tmp_path / "w"
    proc = subprocess.run(_program("suite", str(workdir)), cwd=ROOT, capture_output=True,
                          text=True, timeout=300,
                          env=_env(TOY_KILL_IN_PLOT=1, TOY_COUNTER=counter))
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    method = workdir / "toy"
    assert (method / "first.png").exists() and not (method / "second.png").exists()
    assert not (method / "summary.json").exists()
    assert _count(counter) == 1
    # An older, complete summary is not left standing while a rerun rewrites the figures.
    out = _fake_suite(workdir, monkeypatch, counter)()
    assert results.read_summary(method) == out
    assert all((method / f).stat().st_size > 0 for f in workdir_program.FIGURES)
    assert _count(counter) == 1
    report = (workdir / "REPORT.md").read_text()
    assert "## toy" in report


@pytest.mark.heavy
def test_second_writer_fails_with_one_line_naming_workdir_and_pid(tmp_path):
    """A real study run holds the workdir mid-unit; a second study run, a checkpoint
    writer inside it and a second binary all fail at once; the lock goes with the holder."""
    workdir, started, release = tmp_path / "w", tmp_path / "started", tmp_path / "release"
    log = tmp_path / "holder.log"
    with open(log, "w") as out:
        holder = subprocess.Popen(_program("study", str(workdir)), cwd=ROOT,
                                  env=_env(TOY_STARTED=started, TOY_RELEASE=release),
                                  stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while not started.exists():
            assert holder.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.05)
        one_line = (rf"^workdir {workdir} is in use by another process \(pid "
                    rf"{holder.pid}, lock {workdir / '.lock'}\); wait for it to finish or use "
                    r"another workdir\.$")
        with pytest.raises(locks.Busy, match=one_line):
            study.run_units([_unit([])], _config(), str(workdir))
        with pytest.raises(locks.Busy, match=one_line):
            study.train_and_evaluate(workdir_program.EXPERIMENT, _config(), str(workdir))
        cli = subprocess.run(
            [sys.executable, "-m", "experiments.qlearning",
             "--config=experiments/configs/qlearning.py:smoke", f"--workdir={workdir}"],
            cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
        assert cli.returncode == 1
        errors = [ln for ln in cli.stderr.splitlines() if "Traceback" in ln or "error" in ln]
        assert errors == [f"error: workdir {workdir} is in use by another process (pid "
                          f"{holder.pid}, lock {workdir / '.lock'}); wait for it to finish "
                          "or use another workdir."], cli.stderr[-3000:]
    finally:
        release.write_text("go")
        holder.wait(timeout=300)
    assert holder.returncode == 0 and "DONE" in log.read_text(), log.read_text()[-3000:]
    assert not (workdir / ".lock").exists()  # released on exit
    assert results.read_summary(workdir)["mean"] == pytest.approx(1 / 3)


def test_checkpoint_folder_is_locked_by_its_writer_only(tmp_path):
    """Two writers of one orbax folder in two processes: the second fails before orbax
    creates a temporary step folder; readers take no lock."""
    folder = tmp_path / "ck"
    code = ("import sys; from experiments.lib import checkpoint; import numpy as np\n"
            "ck = checkpoint.Checkpointer(sys.argv[1]); ck.save(1, {'w': np.ones(2)})\n"
            "print('saved', flush=True); sys.stdin.read(); ck.close()\n")
    log = tmp_path / "holder.log"
    with open(log, "w") as err:
        holder = subprocess.Popen([sys.executable, "-c", code, str(folder)], cwd=ROOT,
                                  env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=err, text=True)
    try:
        assert holder.stdout.readline().strip() == "saved", log.read_text()[-3000:]
        with checkpoint.Checkpointer(folder) as reader:  # reading needs no lock
            assert float(reader.restore({"w": np.zeros(2)})["w"].sum()) == 2.0
        writer = checkpoint.Checkpointer(folder)
        with pytest.raises(locks.Busy, match=f"checkpoint folder {folder} is in use by "
                                             f"another process \\(pid {holder.pid},"):
            writer.save(2, {"w": np.zeros(2)})
        writer.close()
        assert sorted(os.listdir(folder)) == [".lock", "1"]
    finally:
        holder.stdin.close()
        holder.wait(timeout=120)
    assert holder.returncode == 0 and not (folder / ".lock").exists()
    with checkpoint.Checkpointer(folder) as ck:  # free again
        ck.save(2, {"w": np.zeros(2)})


def test_locks_are_reentrant_within_a_process(tmp_path):
    with locks.hold(tmp_path):
        with locks.hold(tmp_path):
            assert locks.held(tmp_path)
        assert locks.held(tmp_path) and (tmp_path / ".lock").read_text().strip() == str(
            os.getpid())
    assert not locks.held(tmp_path) and not (tmp_path / ".lock").exists()


@pytest.mark.parametrize("flag,value", [("jax_enable_x64", True),
                                        ("jax_default_matmul_precision", "highest")])
def test_a_flipped_numeric_setting_misses_the_cache(tmp_path, flag, value):
    calls = []
    unit = _unit(calls)
    study.run_units([unit], _config(), str(tmp_path))
    before = getattr(jax.config, flag)
    jax.config.update(flag, value)
    try:
        study.run_units([unit], _config(), str(tmp_path))
        assert calls == ["u", "u"]  # recomputed under the new setting
        assert provenance.record(_config())["numerics"][flag] == value
    finally:
        jax.config.update(flag, before)
    study.run_units([unit], _config(), str(tmp_path))
    assert calls == ["u", "u"]  # the old setting's unit is still there


@pytest.mark.heavy
def test_x64_from_the_environment_misses_the_cache(tmp_path):
    """JAX_ENABLE_X64=1 in a fresh process: the float32 run's unit is not reused."""
    counter = tmp_path / "count.txt"
    for x64 in ("0", "1"):
        proc = subprocess.run(_program("study", str(tmp_path / "w")), cwd=ROOT,
                              capture_output=True, text=True, timeout=300,
                              env=_env(TOY_COUNTER=counter, JAX_ENABLE_X64=x64))
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert _count(counter) == 2
    assert len(os.listdir(tmp_path / "w" / "units")) == 2


def test_package_versions_key_only_the_methods_numeric_packages(tmp_path, monkeypatch):
    real = provenance._version
    spec = {"unit": "u", "spec": {"seed": 0}}
    base = {m: provenance.unit_key(spec, provenance.method_packages(m))
            for m in ("qlearning", "rfo", "avatar", "gepc")}
    monkeypatch.setattr(provenance, "_version",
                        lambda name: "99.0" if name == "brax" else real(name))
    after = {m: provenance.unit_key(spec, provenance.method_packages(m)) for m in base}
    assert after["qlearning"] == base["qlearning"] and after["avatar"] == base["avatar"]
    assert after["rfo"] != base["rfo"]
    monkeypatch.setattr(provenance, "_version",
                        lambda name: "0.0.1" if name in ("jaxlib", "scipy") else real(name))
    assert all(provenance.unit_key(spec, provenance.method_packages(m)) != base[m]
               for m in base)
    assert provenance.unit_key(spec) != provenance.unit_key(spec, ("jax",))  # default: all


def test_pretrained_weights_are_keyed_by_content_wherever_they_are(tmp_path, monkeypatch):
    weights = tmp_path / "my_weights"
    (weights / "sub").mkdir(parents=True)
    (weights / "sub" / "params.bin").write_bytes(b"\x00" * 64)
    cfg = _config(model={"pretrained_dir": str(weights)}, clutter_pretrained_dir="")
    key = provenance.unit_key(cfg)
    with locks.hold(weights):  # a writer's lock file is not part of the weights
        assert provenance.unit_key(cfg) == key
    (weights / "sub" / "params.bin").write_bytes(b"\x00" * 63 + b"\x01")
    changed = provenance.unit_key(cfg)
    assert changed != key
    shutil.rmtree(weights)
    assert provenance.unit_key(cfg) not in (key, changed)
    # A relative path typed by the user resolves against the cwd, keyed by content too.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "w.bin").write_bytes(b"abc")
    assert artifacts.resolve("mine") == str(tmp_path / "mine")
    rel = provenance.unit_key(_config(pretrained_dir="mine"))
    (tmp_path / "mine" / "w.bin").write_bytes(b"abd")
    assert provenance.unit_key(_config(pretrained_dir="mine")) != rel


def test_resolve_prefers_the_package_over_the_cwd(tmp_path, monkeypatch):
    shipped = "experiments/pretrained/gepc_mnist16"
    assert os.path.isdir(os.path.join(artifacts.ROOT, shipped))
    (tmp_path / shipped).mkdir(parents=True)  # a look-alike in the working directory
    monkeypatch.chdir(tmp_path)
    assert artifacts.resolve(shipped) == os.path.join(artifacts.ROOT, shipped)
    assert artifacts.resolve(str(tmp_path / shipped)) == str(tmp_path / shipped)
    assert artifacts.resolve("") == ""
    assert artifacts.resolve("nowhere") == os.path.join(artifacts.ROOT, "nowhere")


def test_atomic_writes_keep_the_umask_mode_and_leave_no_temporary(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    results.atomic_write_text(tmp_path / "a" / "f.json", "{}")
    results.atomic_write_text(tmp_path / "a" / "f.json", "[]")
    assert (tmp_path / "a" / "f.json").read_text() == "[]"
    assert (tmp_path / "a" / "f.json").stat().st_mode == plain.stat().st_mode
    assert os.listdir(tmp_path / "a") == ["f.json"]


def test_timing_is_read_only_for_the_summary_that_wrote_it(tmp_path, caplog):
    """``results.read_timing``: a timing.json of another unit key, or an unreadable one
    (with a warning naming it), is ignored; the matching one is returned as written."""
    prov = {"unit_key": "k1"}
    assert results.read_timing(tmp_path, prov) is None  # absent
    record = {"unit_key": "k1", "units": {"a": {"wall_s": 1.5}}, "load_avg": [1.0, 2.0, 3.0]}
    (tmp_path / results.TIMING).write_text(json.dumps(record))
    assert results.read_timing(tmp_path, prov) == record
    assert results.read_timing(tmp_path, {"unit_key": "k2"}) is None  # another run's
    assert results.read_timing(tmp_path, {}) is None
    (tmp_path / results.TIMING).write_text("{not json")
    with caplog.at_level("WARNING"):
        assert results.read_timing(tmp_path, prov) is None
    assert results.TIMING in caplog.text and "unreadable" in caplog.text


def test_weights_of_another_task_or_garbage_are_refused_naming_the_folder(tmp_path):
    """Same-shape weights recorded for another task in a task's slot raise, naming the
    folder, the recorded task and the expected one; a damaged checkpoint file raises naming
    the folder, the file and the config field before anything is restored."""
    import shutil

    from experiments import dllm_models
    from experiments.configs import dllm as dllm_config

    shipped = os.path.join(ROOT, "experiments", "pretrained", "dllm")
    shutil.copytree(os.path.join(shipped, "addition_hard"), tmp_path / "w" / "addition")
    cfg = dllm_config.get_config("full")
    cfg.pretrained_dir = str(tmp_path / "w")
    with pytest.raises(ValueError) as e:
        dllm_models.Models(cfg, str(tmp_path / "run")).denoiser("addition")
    msg = str(e.value)
    assert str(tmp_path / "w" / "addition") in msg and "'addition_hard'" in msg
    assert "needs 'addition'" in msg and "`config.pretrained_dir`" in msg

    shutil.rmtree(tmp_path / "w" / "addition")
    shutil.copytree(os.path.join(shipped, "addition"), tmp_path / "w" / "addition")
    data = tmp_path / "w" / "addition" / "2000" / "default" / "_METADATA"
    data.write_bytes(b"garbage")
    with pytest.raises(ValueError, match="`config.pretrained_dir`: the addition denoiser in "
                                         ".*do not match their record.*_METADATA"):
        dllm_models.Models(cfg, str(tmp_path / "run2")).denoiser("addition")
