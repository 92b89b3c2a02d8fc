"""Executes one notebook top to bottom in the current directory (CI's Colab check).

  python colab/run_notebook.py colab/qlearning.ipynb [--expect_jaxlab_in=DIR]

Only needs nbclient, nbformat and ipykernel in the running interpreter: the notebook's
install cell must install jaxlab itself (clone ``JAXLAB_REPO`` into ``JAXLAB_DIR`` and
``pip install -e .[extras]``), as on Colab. ``--expect_jaxlab_in`` checks that the kernel's
jaxlab was imported from that folder (the fresh clone, not some other install). Exits
non-zero, with the failing cell's error, on any failure.
"""

import argparse
import os
import re
import sys

import nbclient
import nbformat


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("notebook")
    p.add_argument("--expect_jaxlab_in", default="")
    args = p.parse_args(argv)
    nb = nbformat.read(args.notebook, as_version=4)
    nbclient.NotebookClient(nb, timeout=1800, kernel_name="python3",
                            resources={"metadata": {"path": os.getcwd()}}).execute()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.get("outputs", []))
    # pip's output (captured at the file-descriptor level) can precede it on the same line
    found = re.findall(r"jaxlab: (\S+) \| JAX (\S+)", text)
    if not found:
        print("the install cell printed no 'jaxlab: ... | JAX ...' line", file=sys.stderr)
        return 1
    where, version = found[-1]
    print(f"jaxlab imported from {where}, jax {version}")
    want = os.path.join(os.path.realpath(args.expect_jaxlab_in), "jaxlab")
    # an editable install's link tree (build/__editable__.*/jaxlab) links to the clone's files
    got = os.path.dirname(os.path.realpath(os.path.join(where, "__init__.py")))
    if args.expect_jaxlab_in and got != want:
        print(f"jaxlab was imported from {where}, expected {want}", file=sys.stderr)
        return 1
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    if not any("image/png" in o.get("data", {}) for o in outputs):
        print("the notebook displayed no plot", file=sys.stderr)
        return 1
    print("notebook ran:", args.notebook)
    return 0


if __name__ == "__main__":
    sys.exit(main())
