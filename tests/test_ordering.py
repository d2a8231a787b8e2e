"""streams.sync-stream on asynchronous EPs: on the CPU EP, stand-ins for onnxruntime's objects
queue what an asynchronous EP would queue (copies given a stream, run only when the stream is
released). Nothing here waits by time.
"""

from __future__ import annotations

import ctypes

import pytest

from conformance.engine.runner import Runner


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    return Runner("cpu", models_dir=str(tmp_path_factory.mktemp("models")))


@pytest.fixture
def ctx(runner, monkeypatch):
    context = runner.context(0)
    monkeypatch.setattr(context.sessions, "_sessions", {})
    return context


# --- streams.sync-stream: a stream whose copies run when it is released -------------------------


class QueueingStream:
    """A sync stream of an asynchronous EP: copies given it wait in its queue; releasing it runs
    them (`drains`), or leaves them undone (a release that does not wait)."""

    def __init__(self, drains: bool = True):
        self.queue: list = []
        self.drains = drains

    def __del__(self):
        if self.drains:
            for copy in self.queue:
                copy()


class StreamingDevice:
    def __init__(self, device, drains: bool):
        self._device, self._drains = device, drains

    def __getattr__(self, name):
        return getattr(self._device, name)

    def create_sync_stream(self):
        return QueueingStream(self._drains)


def _memmove(sources, destinations):
    for source, destination in zip(sources, destinations, strict=True):
        ctypes.memmove(destination.data_ptr(), source.data_ptr(), source.tensor_size_in_bytes())


def queue_stream_copies(monkeypatch, ctx, drains: bool) -> None:
    """The CPU EP made to look like an asynchronous device EP: its DEFAULT memory taken for device
    memory, copies given a stream queued on it, every other copy done at once."""
    monkeypatch.setattr(ctx, "device", StreamingDevice(ctx.device, drains))
    monkeypatch.setattr(ctx, "is_cpu_memory", lambda kind: False)

    def copy(sources, destinations, direction="", stream=None, *, note=""):
        if isinstance(stream, QueueingStream):
            stream.queue.append(lambda: _memmove(sources, destinations))
        else:
            _memmove(sources, destinations)

    monkeypatch.setattr(ctx, "copy", copy)


def test_sync_stream_reads_the_copies_once_the_stream_is_released(runner, ctx, monkeypatch):
    """streams.sync-stream waits for the stream (its release) before it reads the host buffer:
    copies still queued when copy_tensors returned are right then."""
    queue_stream_copies(monkeypatch, ctx, drains=True)
    result = runner.run("streams.sync-stream", 0, {})
    assert result["outcome"] == "pass", result["message"]
    evidence = result["details"]["evidence"]
    assert evidence["queued_at_return"] is True and evidence["stream_created"] is True and evidence["bytes_compared"] == 64 * 33 * 4


def test_a_stream_whose_release_does_not_wait_fails_sync_stream(runner, ctx, monkeypatch):
    queue_stream_copies(monkeypatch, ctx, drains=False)
    result = runner.run("streams.sync-stream", 0, {})
    assert result["outcome"] == "fail"
    assert result["message"].startswith("copies on the EP's sync stream did not deliver the bytes once the stream was released")
    assert "del stream" in result["details"]["violations"][0]["reproducer"]


def test_the_cpu_eps_refused_stream_is_recorded_as_not_created(runner, ctx):
    result = runner.run("streams.sync-stream", 0, {})
    assert result["outcome"] == "pass" and result["details"]["evidence"]["stream_created"] is False
