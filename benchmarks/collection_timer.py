"""A pytest plugin for the benchmark (`-p collection_timer`): prints how long collection took.

pytest's own "collected in" figure is the whole session so far (start-up hooks and the end of
the session included); this one is the `pytest_collection` hook alone.
"""

import time

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session):
    started = time.perf_counter()
    yield
    print(f"\ncollection-timer: {len(session.items)} items in {time.perf_counter() - started:.4f} s")
