"""Prints the bad-input tally: ``python -m tests.bad_inputs.tally [-v]``."""

import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from tests.bad_inputs import harness  # noqa: E402


def main(verbose: bool) -> int:
    counts, rows = harness.tally(harness.all_cases())
    for case, outcome, detail in rows:
        if verbose or outcome != "clear":
            print(f"{outcome:17s} {case.name}\n{'':17s} {detail}")
    print(f"{len(rows)} bad calls: " + ", ".join(f"{counts[o]} {o}" for o in harness.OUTCOMES))
    return 0 if counts["clear"] == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main("-v" in sys.argv))
