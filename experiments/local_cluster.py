"""Runs any jaxlab binary as a multi-host job on this machine (N local CPU processes).

  python -m experiments.local_cluster --hosts=2 --devices_per_host=2 -- \
      -m experiments.qlearning --config=experiments/configs/qlearning.py:smoke \
      --workdir=results/qlearning_2hosts

Everything after ``--`` is the command (without the interpreter); each process gets it
plus ``--coordinator_address``, ``--num_processes`` and ``--process_id``.
"""

import sys

from absl import app, flags

from .lib import cluster

_HOSTS = flags.DEFINE_integer("hosts", 2, "Processes (simulated hosts).")
_DEVICES = flags.DEFINE_integer("devices_per_host", 2, "CPU devices per process.")
_TIMEOUT = flags.DEFINE_float("timeout_s", 3600.0, "Kill every process after this long.")


def main(argv):
    command = argv[1:]
    if not command:
        raise app.UsageError("give the command after `--`, e.g. -- -m experiments.bco ...")
    out = cluster.run_local_cluster(command, _HOSTS.value, _DEVICES.value,
                                    timeout_s=_TIMEOUT.value, echo=True)
    codes = [r.returncode for r in out]
    print(f"exit codes by process: {codes}")
    sys.exit(max(abs(c) for c in codes))


if __name__ == "__main__":
    app.run(main)
