import pytest

from tests import memory


# MJX programs are large (a file of them grew a test process by 2 GB): above the limit,
# give memory back after every test here, not only after the file (tests/conftest.py).
@pytest.fixture(autouse=True)
def _release_memory_after_each_test():
    yield
    memory.release_if_above()
