"""A multi-host JAX run on one machine: N CPU processes joined by ``jax.distributed``.

What a pod does with one process per host, this does with local processes, each given
``devices_per_process`` host devices, a shared coordinator on localhost and gloo
collectives. It is how the multi-host path (global meshes, ``sharding.to_host``,
main-process writing) is tested without a pod, and a way to rehearse a pod launch:

  python -m experiments.local_cluster --hosts=2 --devices_per_host=2 -- \\
      -m experiments.qlearning --config=experiments/configs/qlearning.py:smoke --workdir=w

Every process gets the same command plus ``--coordinator_address``, ``--num_processes``
and ``--process_id`` (the flags every jaxlab binary takes).
"""

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import NamedTuple

from jaxlab.core import validation


class ProcessResult(NamedTuple):
    """One process of a local cluster run: its id, exit code and combined output."""

    process_id: int
    returncode: int
    output: str


def free_port() -> int:
    """A TCP port on localhost that is free right now."""
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def run_local_cluster(
    args: Sequence[str],
    num_processes: int = 2,
    devices_per_process: int = 2,
    *,
    timeout_s: float = 900.0,
    cwd: str | None = None,
    echo: bool = False,
) -> list[ProcessResult]:
    """Runs ``python <args>`` as ``num_processes`` jax.distributed processes on this machine.

    Args:
      args: arguments after the interpreter, e.g. ``["-m", "experiments.bco", "--workdir=w"]``.
      num_processes: processes (simulated hosts), >= 1.
      devices_per_process: CPU devices per process (``--xla_force_host_platform_device_count``).
      timeout_s: wall-clock limit; on expiry (or when one process fails) the others are
        killed, so a collective waiting on a dead peer cannot hang the caller.
      cwd: working directory of the processes.
      echo: also print every output line, prefixed with ``[process id]``, as it arrives.

    Returns:
      One ``ProcessResult`` per process, in process-id order.
    """
    if not args:
        raise ValueError("`args` must name what to run, e.g. ['-m', 'experiments.bco', ...].")
    validation.check_positive_int("num_processes", num_processes)
    validation.check_positive_int("devices_per_process", devices_per_process)
    port = free_port()
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices_per_process}"}
    procs, outputs, readers = [], [], []
    for i in range(num_processes):
        cmd = [sys.executable, *args, f"--coordinator_address=localhost:{port}",
               f"--num_processes={num_processes}", f"--process_id={i}"]
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, bufsize=1)
        procs.append(p)
        outputs.append([])
        readers.append(threading.Thread(target=_pump, args=(p, i, outputs[i], echo),
                                        daemon=True))
        readers[-1].start()
    deadline = time.monotonic() + timeout_s
    try:
        while any(p.poll() is None for p in procs):
            failed = any(p.poll() not in (None, 0) for p in procs)
            if failed or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p, r in zip(procs, readers, strict=True):
            p.wait()
            r.join(timeout=10)
    return [ProcessResult(i, p.returncode, "".join(out))
            for i, (p, out) in enumerate(zip(procs, outputs, strict=True))]


def _pump(proc: subprocess.Popen, pid: int, sink: list, echo: bool) -> None:
    for line in proc.stdout:
        sink.append(line)
        if echo:
            print(f"[{pid}] {line}", end="", flush=True)
