import os

import torch

# Kernels run in Triton's interpreter on a machine without a GPU; this must be set before any module
# that defines a Triton kernel is imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

# Kernels run where they can: on the GPU when there is one, else in the interpreter on the CPU.
DEVICES = ["cuda"] if torch.cuda.is_available() else ["cpu"]


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(autouse=True)
def _fresh_call_caches():
    # tests patch rules, kernels and module constants: no decision kept from another test applies
    from attnkit import _callcache
    _callcache.clear()
    yield
    _callcache.clear()


@pytest.fixture(autouse=True)
def _seeded_rng():
    # every test draws the same inputs on every run: a failure reproduces, and none comes and goes
    torch.manual_seed(0)
    yield


def _shard(spec):
    # ATTNKIT_TEST_SHARD="i/n": keep every n-th collected test from the i-th (0-based), so n processes side by side
    # run a file's tests once each (scripts/gpu_tier.sh tests-par)
    try:
        i, n = (int(x) for x in spec.split("/"))
    except ValueError:
        raise pytest.UsageError(f"ATTNKIT_TEST_SHARD must be 'i/n' with whole numbers, got {spec!r}") from None
    if not 0 <= i < n:
        raise pytest.UsageError(f"ATTNKIT_TEST_SHARD {spec!r}: need 0 <= i < n")
    return i, n


def pytest_collection_modifyitems(config, items):
    spec = os.environ.get("ATTNKIT_TEST_SHARD")
    if spec:
        i, n = _shard(spec)
        config.hook.pytest_deselected(items=[it for k, it in enumerate(items) if k % n != i])
        items[:] = [it for k, it in enumerate(items) if k % n == i]
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (this run has none: not a pass)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
