import os

# Tests run on the CPU (interpret-mode kernels included), whatever the machine has.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# The bad-input sweep (tests/bad_inputs) records each case's outcome; the tally is printed
# at the end of every run that includes it (also under pytest-xdist: the reports carry it).
_BAD_INPUT_OUTCOMES: list[str] = []


def pytest_runtest_logreport(report):
    if report.when == "call":
        _BAD_INPUT_OUTCOMES.extend(v for k, v in report.user_properties
                                   if k == "bad_input_outcome")


def pytest_terminal_summary(terminalreporter):
    if _BAD_INPUT_OUTCOMES:
        from tests.bad_inputs.harness import OUTCOMES

        counts = ", ".join(f"{_BAD_INPUT_OUTCOMES.count(o)} {o}" for o in OUTCOMES)
        terminalreporter.write_line(
            f"bad-input tally: {len(_BAD_INPUT_OUTCOMES)} bad calls: {counts}")
