"""pytest configuration of the Python package's tests."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "whole_example: runs a whole example training script (several PyTorch "
        "processes, minutes under a preloaded ASan runtime); its calls into libgandiva are those "
        "the other tests make, so make test-asan leaves it to make test")
