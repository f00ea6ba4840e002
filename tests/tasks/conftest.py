import pytest

from htam.tasks import builtin_suite


@pytest.fixture(scope="session")
def suite():
    return builtin_suite()


@pytest.fixture(scope="session")
def by_name(suite):
    return {task.name: task for task in suite}
