"""Flags and entry point shared by the experiment binaries."""

from absl import app, flags, logging
from ml_collections import config_flags

from jaxlab.core import sharding

WORKDIR = flags.DEFINE_string("workdir", None, "Output folder (results + checkpoints).")
COORDINATOR = flags.DEFINE_string("coordinator_address", None,
                                  "host:port of process 0 for multi-host runs.")
NUM_PROCESSES = flags.DEFINE_integer("num_processes", None, "Processes in a multi-host run.")
PROCESS_ID = flags.DEFINE_integer("process_id", None, "This process's id in a multi-host run.")


def run(train_and_evaluate, config) -> dict:
    """Initialises multi-host JAX if asked, then calls ``train_and_evaluate(config, workdir)``."""
    if WORKDIR.value is None:
        raise flags.ValidationError("--workdir is required.")
    sharding.initialize_distributed(COORDINATOR.value, NUM_PROCESSES.value, PROCESS_ID.value)
    logging.info("config:\n%s", config)
    return train_and_evaluate(config, WORKDIR.value)


def launch(train_and_evaluate, default_config: str) -> None:
    """The whole body of a method binary: --config (default ``default_config``), --workdir."""
    config = config_flags.DEFINE_config_file("config", default_config)

    def main(argv):
        del argv
        run(train_and_evaluate, config.value)

    app.run(main)
