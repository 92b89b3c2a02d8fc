"""Flags and entry point shared by the experiment binaries.

Command-line behaviour (every method binary):
  * ``--workdir`` is required: without it the binary prints one line and exits with 2.
  * ``--help`` prints the binary's docstring, its flags and every field of the chosen
    ``--config`` (default: the binary's preset) with its default value.
  * A mistyped flag (``--workdr``: ``error: unknown flag --workdr (did you mean
    --workdir?)``), a ``--config`` whose file or preset does not exist, a
    ``--config.<field>`` that the chosen config lacks (with the closest fields) or a value
    of the wrong type for it (with the type and the preset's value), a config the
    experiment's ``validate`` rejects, and any other flag error are one line on stderr,
    exit 2 (no traceback, no absl ``FATAL``).
  * The config is written to ``<workdir>/config.json`` (the same JSON as the summary's
    provenance block); ``--show_config`` also prints it before the run.
  * The last line names the results folder and what is in it, e.g.
    ``results: /abs/workdir (summary.json, figures: a.png, b.png)``.
  * JAX's "Unable to initialize backend 'tpu'" INFO line is not printed on machines
    without a TPU.
  * A second process on a ``--workdir`` that a running process is writing is one line
    naming the workdir and the first process's pid, exit 1 (``experiments.lib.locks``).
  * JAX's persistent compilation cache is on (``experiments.lib.compile_cache``: folder
    ``~/.cache/jaxlab/xla``; ``JAXLAB_COMPILATION_CACHE=0`` turns it off).
"""

import difflib
import importlib.util
import json
import logging as pylogging
import os
import sys

from absl import app, flags
from ml_collections import config_flags
from ml_collections.config_flags import tuple_parser

from jaxlab.core import sharding

from . import package_path
from .lib import compile_cache, console, locks, provenance, results, study
from .lib.console import parse_flags, results_line  # the binaries' and the suite's

WORKDIR = flags.DEFINE_string("workdir", None, "Output folder (results + checkpoints).")
COORDINATOR = flags.DEFINE_string("coordinator_address", None,
                                  "host:port of process 0 for multi-host runs.")
NUM_PROCESSES = flags.DEFINE_integer("num_processes", None, "Processes in a multi-host run.")
PROCESS_ID = flags.DEFINE_integer("process_id", None, "This process's id in a multi-host run.")
SHOW_CONFIG = flags.DEFINE_bool("show_config", False, "Also print the config (JSON) before "
                                "the run; it is always written to <workdir>/config.json.")

CONFIG_FILE = "config.json"



class _DropMissingBackendInfo(pylogging.Filter):
    """JAX logs at INFO each accelerator plugin it fails to find (libtpu on every CPU/GPU
    machine); that line reads like an error to a new user and says nothing about the run."""

    def filter(self, record):
        return not (record.levelno < pylogging.WARNING
                    and "Unable to initialize backend" in record.getMessage())


def quiet_backend_probe() -> None:
    """Installs ``_DropMissingBackendInfo`` on JAX's backend logger (idempotent)."""
    logger = pylogging.getLogger("jax._src.xla_bridge")
    if not any(isinstance(f, _DropMissingBackendInfo) for f in logger.filters):
        logger.addFilter(_DropMissingBackendInfo())


def run(train_and_evaluate, config) -> dict:
    """Initialises multi-host JAX if asked, then runs ``train_and_evaluate`` (a
    ``study.Experiment``, or a function of ``(config, workdir)``) into ``--workdir``,
    holding its lock; the config is written first to ``<workdir>/config.json``. A config
    the experiment's ``validate`` rejects is one line on stderr, exit 2."""
    if WORKDIR.value is None:
        raise flags.ValidationError("--workdir is required.")
    sharding.initialize_distributed(COORDINATOR.value, NUM_PROCESSES.value, PROCESS_ID.value)
    workdir = WORKDIR.value
    if isinstance(train_and_evaluate, study.Experiment):
        try:  # before any work: a config the study rejects is the user's input, not a crash
            train_and_evaluate.validate(config)
        except (ValueError, TypeError, FileNotFoundError) as e:
            print(f"error: {console.one_line(e)}", file=sys.stderr)
            sys.exit(2)
    if SHOW_CONFIG.value and sharding.is_main_process():
        print("config:\n" + config_json(config), flush=True)
    with locks.hold(workdir):
        results.write_json(os.path.join(workdir, CONFIG_FILE), provenance.config_dict(config))
        if isinstance(train_and_evaluate, study.Experiment):
            return study.train_and_evaluate(train_and_evaluate, config, workdir)
        return train_and_evaluate(config, workdir)


def config_json(config) -> str:
    """``config`` as the indented JSON of ``config.json`` (tuples as lists)."""
    return json.dumps(provenance.config_dict(config), indent=2, sort_keys=True)




def _flag_value(argv, name):
    """The value of ``--name=v`` or ``--name v`` in ``argv`` (last one wins), else None."""
    value = None
    for i, a in enumerate(argv):
        if a.startswith(f"--{name}="):
            value = a.split("=", 1)[1]
        elif a == f"--{name}" and i + 1 < len(argv):
            value = argv[i + 1]
    return value


def resolve_config_spec(spec: str) -> str:
    """``path.py[:arg]`` with ``path`` made absolute against the installed package when it
    does not exist relative to the cwd (so ``experiments/configs/x.py`` works from any
    folder); an existing path or one found nowhere is returned unchanged."""
    path, sep, arg = spec.partition(":")
    if not os.path.exists(path) and os.path.exists(package_path(path)):
        path = package_path(path)
    return f"{path}{sep}{arg}"


def _is_config_value(argv, i) -> bool:
    """True when ``argv[i]`` is the value of a preceding bare ``--config``."""
    return argv[i - 1] == "--config"


def load_config(spec: str):
    """The ConfigDict of ``path.py[:arg]`` (path relative to the cwd or the package root)."""
    path, _, arg = resolve_config_spec(spec).partition(":")
    if not os.path.exists(path):
        raise FileNotFoundError(f"`--config`: no config file {path!r}.")
    module_spec = importlib.util.spec_from_file_location("_jaxlab_config", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.get_config(arg) if arg else module.get_config()


def config_fields(config, prefix: str = "config") -> dict:
    """{"config.a.b": default} for every leaf field of ``config`` (nested dicts flattened)."""
    out = {}
    for key, value in config.items():
        name = f"{prefix}.{key}"
        if hasattr(value, "items"):
            out.update(config_fields(value, name))
        else:
            out[name] = value
    return out


def check_argv(argv, default_config: str, doc: str | None = None) -> str | None:
    """Checks the command line before absl parses it.

    Returns:
      None when the run may go on; otherwise the text to print (help, or a one-line error)
      and the caller exits (0 for help, 2 for an error: see ``launch``).
    """
    args = argv[1:]
    spec = _flag_value(args, "config") or default_config
    if any(a in ("--help", "-h", "--helpshort", "-?") for a in args):
        try:
            fields = config_fields(load_config(spec))
        except Exception as e:  # noqa: BLE001 - help still prints the flags
            fields = {f"(config {spec!r} could not be loaded: {e})": ""}
        lines = [(doc or "").strip(), "", "Flags:",
                 "  --config=PATH.py[:PRESET]  the experiment config (default "
                 f"{default_config})",
                 "  --workdir=DIR              output folder (results, checkpoints); required",
                 "  --show_config              also print the config (always written to "
                 f"<workdir>/{CONFIG_FILE})",
                 "  --coordinator_address, --num_processes, --process_id  multi-host runs",
                 "", f"Config fields of {spec} (override with --config.FIELD=VALUE):"]
        width = max(map(len, fields), default=0)
        lines += [f"  --{k:<{width}}  default: {v!r}" for k, v in fields.items()]
        return "\n".join(lines)
    for name in console.flag_names(args):  # --preset is the suite's: answered below
        if (name not in ("config", "preset") and not name.startswith("config.")
                and name not in flags.FLAGS):
            return console.unknown_flag_message(name, [*flags.FLAGS, "config"])
    if _flag_value(args, "workdir") is None:
        return (f"error: --workdir is required (the folder for results and checkpoints), e.g. "
                f"--workdir=results/{os.path.basename(argv[0]).removesuffix('.py')}")
    preset = _flag_value(args, "preset")
    if preset is not None:
        return (f"error: --preset={preset}: a method binary takes its preset in --config, e.g. "
                f"--config={default_config.partition(':')[0]}:{preset}")
    try:
        fields = config_fields(load_config(spec))
    except Exception as e:  # noqa: BLE001 - a bad file or preset is the user's input
        return f"error: --config={spec}: {console.one_line(e).removeprefix('`--config`: ')}"
    groups = {k.rsplit(".", i)[0] for k in fields for i in range(k.count("."))}
    for name, value in _overrides(args):
        if name not in fields and name not in groups:
            close = difflib.get_close_matches(name, list(fields), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join('--' + c for c in close)}?" if close else ""
            return (f"error: --{name}: the config {spec} has no field "
                    f"{name.removeprefix('config.')!r}{hint} (--help lists the fields)")
        expected = None if value is None or name not in fields else _type_error(
            value, fields[name])
        if expected:
            return (f"error: --{name}={value}: expected {expected} (the value in {spec} is "
                    f"{fields[name]!r}; --help lists the fields)")
    return None


def _overrides(args) -> list[tuple[str, str | None]]:
    """(``config.<field>``, value or None) of every ``--config.<field>[=value]`` in
    ``args``; the value of ``--config.<field> value`` is the next argument."""
    out = []
    for i, a in enumerate(args):
        if not a.startswith("--config."):
            continue
        name, eq, value = a[2:].partition("=")
        if not eq:
            nxt = args[i + 1] if i + 1 < len(args) else None
            value = None if nxt is None or nxt.startswith("-") else nxt
        out.append((name, value))
    return out


def _is_number(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _type_error(value: str, default) -> str | None:
    """What ``value`` should have been for a field whose preset value is ``default`` (parsed
    as ml_collections parses overrides), or None when it fits."""
    parsers = ((bool, flags.BooleanParser(), "true or false"),
               (int, flags.IntegerParser(), "an integer"),
               (float, flags.FloatParser(), "a number"))
    for kind, parser, expected in parsers:
        if isinstance(default, kind):
            try:
                parser.parse(value)
            except ValueError:
                return expected
            return None
    if isinstance(default, tuple) and default:
        try:
            items = tuple_parser.TupleParser().parse(value)
        except ValueError:
            return "a tuple"
        if all(map(_is_number, default)) and not all(map(_is_number, items)):
            return "a tuple of numbers"
        if all(isinstance(x, str) for x in default) and not all(
                isinstance(x, str) for x in items):
            return "a tuple of names"
    return None






def launch(train_and_evaluate, default_config: str) -> None:
    """The whole body of a method binary: --config (default ``default_config``), --workdir.

    Args:
      train_and_evaluate: a ``study.Experiment`` or a function of ``(config, workdir)``.
      default_config: ``path.py:preset`` used when --config is not given.
    """
    quiet_backend_probe()
    compile_cache.enable()
    main_doc = getattr(sys.modules.get("__main__"), "__doc__", None)
    message = check_argv(sys.argv, default_config, main_doc)
    if message is not None:
        is_help = not message.startswith("error:")
        print(message, file=sys.stdout if is_help else sys.stderr)
        sys.exit(0 if is_help else 2)
    # Config paths resolve against the installed package when the cwd lacks them.
    sys.argv = [resolve_config_spec(a) if i and _is_config_value(sys.argv, i) else a
                for i, a in enumerate(sys.argv)]
    sys.argv = [f"--config={resolve_config_spec(a[9:])}" if a.startswith("--config=") else a
                for a in sys.argv]
    config = config_flags.DEFINE_config_file("config", resolve_config_spec(default_config))

    def main(argv):
        del argv
        try:
            run(train_and_evaluate, config.value)
        except locks.Busy as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(1)
        if sharding.is_main_process():
            print(results_line(WORKDIR.value, CONFIG_FILE), flush=True)

    app.run(main, flags_parser=parse_flags)
