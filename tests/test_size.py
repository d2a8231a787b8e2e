"""The size family (specs/contracts/size.yaml): copies past 2 and 4 GiB, and copies that change
their destination and nothing else.

On the reference EP each check passes, and fails with a stand-in for the copy it judges: one that
keeps its byte count in 32 bits (copies nbytes mod 2^32 bytes and leaves the rest), one that writes
a byte past a destination in device memory, an allocator that refuses large blocks (not_applicable
with the figures). The large case's logic is shown with its boundaries shrunk to 2^20 and 2^21
bytes; one test runs it at its real size (8 GiB of memory at once), and the kit's own machine-wide
lock keeps two such cases from running at once under xdist. The refdev cases run in a subprocess
of their own, as tests/test_refdev.py's do.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pytest
import yaml  # noqa: F401  imported at collection: a pytester test run before this module's would otherwise import it first and drop it again, and the Runner here would load its C loader twice

from conformance.calls import Call
from conformance.checks import size, size_plan, size_probe, size_room
from conformance.findings import NotApplicable
from conformance.engine.runner import Runner

GIB = 1 << 30

# What each subprocess starts with: the runner on the reference EP, and the stand-ins.
PRELUDE = """
import ctypes, json, os, sys
from conformance import data
from conformance.engine.runner import Runner
from conformance.checks import size_blocks, size_plan
from conformance.testbed.interop import capi as C

runner = Runner("RefDevExecutionProvider", specs=[str(data.contracts_dir())], library={library!r})
real_copy, real_block = size_blocks.copy_pair, size_blocks.CPath.device_block


def size_of(api, value):
    size = ctypes.c_size_t()
    api.call("GetTensorSizeInBytes", value, ctypes.byref(size))
    return size.value


def view(api, value, offset, nbytes):  # a uint8 tensor over `nbytes` of `value`'s memory from `offset`
    info, out = ctypes.c_void_p(), ctypes.c_void_p()
    api.call("GetTensorMemoryInfo", value, ctypes.byref(info))
    api.call("CreateTensorWithDataAsOrtValue", info, ctypes.c_void_p(C.data_address(api, value) + offset), nbytes,
             (ctypes.c_int64 * 1)(nbytes), 1, 2, ctypes.byref(out))
    return out


def truncating_copy(api, env, source, destination):  # a byte count kept in 32 bits: nbytes mod 2^32 bytes move, the rest stays
    nbytes = size_of(api, source)
    kept = nbytes % size_plan.UINT32_BOUNDARY
    if kept == nbytes:
        return real_copy(api, env, source, destination)
    pair = [view(api, value, 0, kept) for value in (source, destination)]
    C.copy_tensors(api, env, pair[:1], pair[1:])
    for value in pair:
        api.call("ReleaseValue", value)


def overrunning_copy(api, env, source, destination):  # the copy, then one byte more past a destination in device memory
    real_copy(api, env, source, destination)
    if C.memory_of(api, destination)["device_type"] != "cpu":
        byte = (ctypes.c_uint8 * 1)(0xEE)
        pair = [C.cpu_tensor(api, byte, (1,), 2), view(api, destination, size_of(api, destination), 1)]
        C.copy_tensors(api, env, pair[:1], pair[1:])
        for value in pair:
            api.call("ReleaseValue", value)


def refusing_block(self, size, note=""):  # an allocator that refuses blocks above 1 MiB, as a device with a cap does
    if size > 1 << 20:
        raise C.OrtError("CreateTensorAsOrtValue", 6, f"RefDev: cannot allocate {{size}} bytes, above the device's limit of 1048576")
    return real_block(self, size, note)


def case(contract, **params):
    result = runner.run(contract, 0, params)
    violations = result["details"].get("violations") or [{{}}]
    return {{"outcome": result["outcome"], "message": result["message"], "evidence": result["details"].get("evidence"),
            "reproducer": violations[0].get("reproducer", ""), "violations": [v.get("message", "") for v in violations]}}
"""


def in_refdev(library, body: str, tmp_path, timeout: int = 300) -> dict:
    """`body` run after PRELUDE in a fresh interpreter; what it prints last, as JSON."""
    completed = subprocess.run([sys.executable, "-c", PRELUDE.format(library=str(library)) + body], capture_output=True, text=True,
                               timeout=timeout, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def reproduce(script: str, tmp_path, fault: str | None = None) -> subprocess.CompletedProcess:
    path = tmp_path / "repro.py"
    path.write_text(script)
    env = {k: v for k, v in os.environ.items() if k != "ORT_REFDEV_FAULT"}
    if fault:
        env["ORT_REFDEV_FAULT"] = fault
    return subprocess.run([sys.executable, "-I", str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)


# --- without an EP: where a destination is compared, the bytes a source holds, the room ---------

def test_the_regions_compared_take_in_both_boundaries_the_tail_and_the_bytes_past_the_end():
    nbytes = size_plan.UINT32_BOUNDARY + 4096 + 3
    found = size_plan.regions(nbytes, every_byte=False, past_end=4096)
    covered = lambda at: any(r.start <= at < r.end and r.inside for r in found)  # noqa: E731
    for at in (0, 4098, 4099, size_plan.INT32_BOUNDARY - 1, size_plan.INT32_BOUNDARY, size_plan.UINT32_BOUNDARY - 1,
               size_plan.UINT32_BOUNDARY, size_plan.UINT32_BOUNDARY + 4098, nbytes // 2, nbytes - 1):
        assert covered(at), at
    assert not covered(nbytes) and found[-1] == size_plan.Region(nbytes, 4096, inside=False)
    assert all(r.length <= size_plan.CHUNK for r in found) and size_plan.compared_bytes(found) < 8 << 20
    every = size_plan.regions(3 * size_plan.CHUNK + 5, every_byte=True, past_end=0)
    assert [(r.start, r.length) for r in every] == [(0, size_plan.CHUNK), (size_plan.CHUNK, size_plan.CHUNK),
                                                     (2 * size_plan.CHUNK, size_plan.CHUNK), (3 * size_plan.CHUNK, 5)]


def test_a_source_read_from_an_offset_wrapped_at_either_boundary_delivers_other_bytes():
    for boundary in (size_plan.INT32_BOUNDARY, size_plan.UINT32_BOUNDARY):
        for at in (0, 4099, 12345678):
            assert np.count_nonzero(size_plan.pattern(boundary + at, 4096, 7) != size_plan.pattern(at, 4096, 7)) > 4000
    assert np.array_equal(size_plan.pattern(100, 50, 3), size_plan.pattern(0, 200, 3)[100:150])  # the same bytes whatever the chunk
    assert size_plan.pattern(5, 1 << 17, 3).size == 1 << 17


def test_the_large_tensors_are_past_each_boundary_and_the_int4_one_odd():
    uint8, int4 = size_plan.large_tensors()
    assert uint8.nbytes == uint8.count == (1 << 32) + 4096 + 3
    assert int4.count == (1 << 32) + 8197 and int4.nbytes == (1 << 31) + 4096 + 3 and int4.half_used_last_byte
    assert uint8.describe() == "uint8 [4294971395] (4 GiB + 4 KiB + 3 bytes)"


def test_a_case_that_needs_more_than_the_machine_has_says_the_figures(monkeypatch):
    monkeypatch.setenv(size_room.LIMIT_VARIABLE, "6GiB")
    room = size_room.room_here()
    assert room.available is not None and room.available <= 6 * GIB and room.sources[size_room.LIMIT_VARIABLE] == 6 * GIB
    message = size_room.shortfall(8 * GIB, room, "copying 4 GiB")
    assert message is not None and message.startswith("copying 4 GiB needs 8 GiB at once (host and DEFAULT memory counted together) and 1 GiB to spare")
    assert f"{size_room.LIMIT_VARIABLE} 6 GiB" in message
    assert size_room.shortfall(GIB, room, "x") is None
    monkeypatch.setenv(size_room.LIMIT_VARIABLE, "plenty")
    with pytest.raises(Exception, match="is not a size"):
        size_room.room_here()


def test_a_large_case_waits_for_another_process_holding_the_machines_lock_and_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv(size_room.LIMIT_VARIABLE, raising=False)
    steps: list[str] = []

    class Context:
        def attempt(self, step, reproducer=None):
            steps.append(step)

    holder = open(tmp_path / size_room.LOCK_FILE, "a+")  # another process's case: a lock of another open file
    fcntl.flock(holder, fcntl.LOCK_EX)
    threading.Timer(1.5, lambda: (fcntl.flock(holder, fcntl.LOCK_UN), holder.close())).start()
    started = time.monotonic()
    with size_room.room_for(Context(), 1024, "copying 1 KiB"):
        waited = time.monotonic() - started
    assert waited >= 1.0 and steps and steps[0].startswith("waiting for another process of the kit to free its large tensors")
    monkeypatch.setenv(size_room.LIMIT_VARIABLE, "1MiB")  # the limit alone rules a case out: no wait, the figures said
    with pytest.raises(NotApplicable, match=r"needs 2 GiB at once .* ORT_CONFORMANCE_MEMORY_LIMIT 1 MiB"):
        with size_room.room_for(Context(), 2 * GIB, "copying"):
            pass


def test_the_offset_probe_counts_only_a_clean_exit_as_addressable():
    """A crash, an assertion (wrong bytes) or a hang of the child is 'not addressable', with what it did."""
    crash = size_probe.run_probe("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    assert not crash.addressable and crash.outcome.startswith("the child was ended by SIGSEGV"), crash
    wrong = size_probe.run_probe("raise AssertionError('the block after a copy: 64 of 256 bytes differ')\n")
    assert not wrong.addressable and wrong.outcome == "exit 1: AssertionError: the block after a copy: 64 of 256 bytes differ", wrong
    assert size_probe.run_probe("pass\n").evidence()["addressable"] is True


def test_the_size_checks_find_no_device_end_on_the_cpu_ep(tmp_path):
    """Called past applies_when: the CPU EP's DEFAULT memory is CPU memory (and onnxruntime has no
    CPU-to-CPU data transfer to judge)."""
    runner = Runner("cpu", models_dir=str(tmp_path))
    for contract, params in (("size.large-copy", {}), ("size.neighbours-untouched", {"direction": "cpu>default", "dtype": "int4", "shape": "3"})):
        result = runner.run(contract, 0, params)
        assert result["outcome"] == "not_applicable" and "plain CPU memory" in result["message"], result


# --- on the reference EP -------------------------------------------------------------------------

NEIGHBOURS = """
cases = [dict(direction=d, dtype=t, shape=s) for d in ("cpu>default", "default>cpu", "default>default") for t in ("uint8", "int4")
         for s in ("1", "3", "4097")]
out = {"good": [case("size.neighbours-untouched", **c) for c in cases]}
size_blocks.copy_pair = overrunning_copy
out["overrun"] = [case("size.neighbours-untouched", **c) for c in cases]
size_blocks.copy_pair = real_copy
os.environ["ORT_REFDEV_FAULT"] = "overrun"  # refdev writes one element past each CPU destination of a device>cpu copy
out["refdev_overrun"] = case("size.neighbours-untouched", direction="default>cpu", dtype="uint8", shape="3")
print(json.dumps(out))
"""


def test_a_copy_that_writes_past_its_destination_fails_neighbours_untouched(refdev_library, tmp_path):
    out = in_refdev(refdev_library, NEIGHBOURS, tmp_path)
    assert all(one["outcome"] == "pass" for one in out["good"]), [one["message"] for one in out["good"] if one["outcome"] != "pass"]
    evidence = out["good"][-1]["evidence"]  # default>default, int4 [4097]
    assert evidence["device_offset_views"]["addressable"] is True and evidence["device_offset_views"]["probe"].startswith("exit 0"), evidence
    assert evidence["tensor"] == {"dtype": "int4", "elements": 4097, "bytes": 2049, "last_byte_half_used": True}
    assert evidence["guard_bytes_each_side"] == 256 and evidence["bytes_compared"] >= 2 * 2049
    # The byte past a destination in device memory: cpu>default and default>default fail, default>cpu (a CPU destination) passes.
    by_direction = {(one["outcome"], i // 6) for i, one in enumerate(out["overrun"])}
    assert by_direction == {("fail", 0), ("pass", 1), ("fail", 2)}
    first = out["overrun"][0]
    assert first["message"] == ("CopyTensors cpu>default of uint8 [1] (1 byte) wrote outside its destination in default memory: "
                                "wrote 1 byte after the end (at +1)"), first["message"]
    # The same stand-in's reproducer is a script of its own: on the good build it passes.
    assert reproduce(first["reproducer"], tmp_path).returncode == 0
    # refdev's own overrun fault (a real broken build): the kit fails it, its reproducer fails with the fault and passes without.
    broken = out["refdev_overrun"]
    assert broken["outcome"] == "fail" and "wrote 1 byte after the end" in broken["message"], broken
    with_fault = reproduce(broken["reproducer"], tmp_path, fault="overrun")
    assert with_fault.returncode == 1 and "guard bytes on each side unchanged" in with_fault.stderr, with_fault.stderr[-2000:]
    assert reproduce(broken["reproducer"], tmp_path).returncode == 0


LARGE_SHRUNK = """
size_plan.INT32_BOUNDARY, size_plan.UINT32_BOUNDARY = 1 << 20, 1 << 21
out = {"good": case("size.large-copy")}
size_blocks.copy_pair = truncating_copy
out["truncating"] = case("size.large-copy")
size_blocks.copy_pair = overrunning_copy
out["overrun"] = case("size.large-copy")
size_blocks.copy_pair = real_copy
size_blocks.CPath.device_block = refusing_block
out["refused"] = case("size.large-copy")
size_blocks.CPath.device_block = real_block
os.environ["ORT_CONFORMANCE_MEMORY_LIMIT"] = "2MiB"
out["short"] = case("size.large-copy")
del os.environ["ORT_CONFORMANCE_MEMORY_LIMIT"]
from conformance.checks.context.load import Load
runner.context(0).load = Load(0.5)  # --conformance-soak=0.5: every byte, rounds until the deadline
out["soak"] = case("size.large-copy")
runner.context(0).load = Load()
os.environ["ORT_REFDEV_FAULT"] = "short-copy"  # refdev copies half the bytes
out["refdev_short_copy"] = case("size.large-copy")
print(json.dumps(out))
"""


def test_the_large_copy_with_its_boundaries_shrunk_fails_with_each_stand_in(refdev_library, tmp_path):
    out = in_refdev(refdev_library, LARGE_SHRUNK, tmp_path)
    good = out["good"]
    assert good["outcome"] == "pass", good["message"]
    uint8_bytes, int4_bytes = (1 << 21) + 4096 + 3, (1 << 20) + 4096 + 3
    evidence = good["evidence"]
    assert evidence["largest_bytes"] == uint8_bytes and evidence["device_offset_views"]["addressable"] is True  # refdev's pointers are addresses
    assert evidence["tensor_size_in_bytes"] == {f"uint8 [{uint8_bytes}] (2 MiB + 4 KiB + 3 bytes)": uint8_bytes,
                                                f"int4 [{(1 << 21) + 8197}] (1 MiB + 4 KiB + 3 bytes)": int4_bytes}
    assert [key.split()[0] for key in evidence["copies"]] == ["cpu>default"] * 2 + ["default>default"] * 2 + ["default>cpu"] * 2
    assert "both sides of 2^20 and 2^21" in next(iter(evidence["copies"].values()))["checked"]
    assert evidence["staging_canaries_intact"] and "needed at once" in evidence["memory_figures"]

    truncating = out["truncating"]
    assert truncating["outcome"] == "fail"
    assert truncating["message"].startswith(f"CopyTensors cpu>default of uint8 [{uint8_bytes}] (2 MiB + 4 KiB + 3 bytes) did not deliver "
                                            "the source bytes: "), truncating["message"]
    assert ("the first at byte 4099: 0x5a instead of" in truncating["message"]
            and f"(the sentinel: left as it was); 4099 is the byte count {uint8_bytes} modulo 2^21, where a count kept in 32 bits ends"
            in truncating["message"]), truncating["message"]
    # each direction's uint8 copy, none of the int4 one (1 MiB + 4 KiB + 3 bytes: under the shrunk uint32 boundary)
    assert [message.split(" of ")[0] for message in truncating["violations"]] == [
        f"CopyTensors {direction}" for direction in ("cpu>default", "default>default", "default>cpu")]
    assert not any("int4" in message for message in truncating["violations"])

    overrun = out["overrun"]
    assert overrun["outcome"] == "fail" and "wrote outside its tensors: the destination (wrote 1 byte after the end" in overrun["message"]
    assert overrun["violations"][1] == (f"CopyTensors cpu>default of int4 [{(1 << 21) + 8197}] (1 MiB + 4 KiB + 3 bytes) wrote outside its "
                                        f"tensors: past the end of the destination, inside its block (1 of the 4096 bytes just past it changed; "
                                        f"the first at +0 (byte {int4_bytes}): 0xee instead of 0x5a)")
    assert len(overrun["violations"]) == 4  # cpu>default and default>default, each tensor once: a guard is laid again once seen

    refused = out["refused"]
    assert refused["outcome"] == "not_applicable", refused
    assert refused["message"].startswith("the EP refused to allocate 2 MiB + 4 KiB + 515 bytes of DEFAULT memory: RefDev: cannot allocate"), refused["message"]
    assert "needed at once" in refused["message"] and "available" in refused["message"] and "the allocator's cap: none reported" in refused["message"]

    short = out["short"]
    assert short["outcome"] == "not_applicable" and "ORT_CONFORMANCE_MEMORY_LIMIT 2 MiB" in short["message"], short

    soak = out["soak"]["evidence"]
    assert out["soak"]["outcome"] == "pass" and soak["rounds"] >= 1
    copies = soak["copies"][f"default>cpu uint8 [{uint8_bytes}] (2 MiB + 4 KiB + 3 bytes)"]
    assert copies["checked"].startswith("every byte") and copies["bytes_compared"] == uint8_bytes

    broken = out["refdev_short_copy"]
    assert broken["outcome"] == "fail" and "did not deliver the source bytes" in broken["message"], broken
    with_fault = reproduce(broken["reproducer"], tmp_path, fault="short-copy")
    assert with_fault.returncode == 1 and "bytes differ" in with_fault.stderr, with_fault.stderr[-2000:]
    assert reproduce(broken["reproducer"], tmp_path).returncode == 0


LARGE_REAL = """
out = {"good": case("size.large-copy")}
if out["good"]["outcome"] == "pass":
    size_blocks.copy_pair = truncating_copy
    out["truncating"] = case("size.large-copy")
print(json.dumps(out))
"""


def test_the_large_copy_at_its_real_size_passes_and_a_32_bit_byte_count_fails(refdev_library, tmp_path):
    """The one test that holds 8 GiB: the fault-free reference EP copies past 2 and 4 GiB, and a
    byte count kept in 32 bits fails at 4 GiB + 4 KiB + 3 bytes. The kit's lock (size_room) keeps
    any other large case of this machine waiting meanwhile."""
    out = in_refdev(refdev_library, LARGE_REAL, tmp_path, timeout=590)
    good = out["good"]
    if good["outcome"] == "not_applicable" and "needs" in good["message"]:
        pytest.skip(f"this machine has no room for the large case now: {good['message']}")
    assert good["outcome"] == "pass", good["message"]
    assert good["evidence"]["largest_bytes"] == (1 << 32) + 4096 + 3
    assert len(good["evidence"]["copies"]) == 6
    truncating = out["truncating"]
    assert truncating["outcome"] == "fail"
    assert "the first at byte 4099: 0x5a instead of" in truncating["message"]
    assert "4099 is the byte count 4294971395 modulo 2^32, where a count kept in 32 bits ends" in truncating["message"], truncating["message"]


OPAQUE = """
from conformance.checks import size_probe
size_probe.offset_views = lambda ctx: size_probe.OffsetProbe(False, "the child was ended by SIGSEGV (a stand-in)")
cases = [dict(direction=d, dtype=t, shape=s) for d in ("cpu>default", "default>cpu", "default>default") for t in ("uint8", "int4")
         for s in ("1", "3", "4097")]
out = {"neighbours": [case("size.neighbours-untouched", **c) for c in cases]}
os.environ["ORT_REFDEV_FAULT"] = "overrun"
out["neighbours_overrun"] = case("size.neighbours-untouched", direction="default>cpu", dtype="uint8", shape="3")
del os.environ["ORT_REFDEV_FAULT"]
size_plan.INT32_BOUNDARY, size_plan.UINT32_BOUNDARY = 1 << 20, 1 << 21
out["good"] = case("size.large-copy")
size_blocks.copy_pair = truncating_copy
out["truncating"] = case("size.large-copy")
size_blocks.copy_pair = real_copy
os.environ["ORT_REFDEV_FAULT"] = "short-copy"
out["refdev_short_copy"] = case("size.large-copy")
print(json.dumps(out))
"""


def test_where_default_data_pointers_are_no_addresses_the_checks_copy_whole_tensors_and_judge_host_guards(refdev_library, tmp_path):
    """The probe stood in to say 'not addressable' (an EP whose data pointers are handles): no
    tensor is wrapped at an offset in DEFAULT memory. Neighbours with a DEFAULT destination are
    not_applicable with the reason; default>cpu is judged with a whole DEFAULT source and host
    guards; the large copy goes host -> A -> B -> host whole, passes on refdev and fails with a
    32-bit byte count and with refdev's short copy, whose reproducer takes the same path."""
    out = in_refdev(refdev_library, OPAQUE, tmp_path)
    outcomes = [(one["outcome"], i // 6) for i, one in enumerate(out["neighbours"])]
    assert set(outcomes) == {("not_applicable", 0), ("pass", 1), ("not_applicable", 2)}, [o["message"] for o in out["neighbours"]]
    assert out["neighbours"][0]["message"].startswith(
        "the EP's DEFAULT data pointers are not addresses: a tensor wrapped at block + 64 of DEFAULT memory is not those bytes "
        "(the child was ended by SIGSEGV (a stand-in)); guard bytes in device memory cannot be placed"), out["neighbours"][0]["message"]
    judged = out["neighbours"][11]["evidence"]  # default>cpu, int4 [4097]
    assert judged["device_offset_views"] == {"addressable": False, "probe": "the child was ended by SIGSEGV (a stand-in)"}
    assert judged["device_guards"].startswith("none") and judged["guard_bytes_each_side"] == 256
    broken = out["neighbours_overrun"]  # refdev writes past a CPU destination: the host guard sees it
    assert broken["outcome"] == "fail" and "wrote 1 byte after the end" in broken["message"], broken
    with_fault = reproduce(broken["reproducer"], tmp_path, fault="overrun")
    assert with_fault.returncode == 1 and "guard bytes on each side unchanged" in with_fault.stderr, with_fault.stderr[-2000:]
    assert reproduce(broken["reproducer"], tmp_path).returncode == 0

    good = out["good"]
    assert good["outcome"] == "pass", good["message"]
    evidence, uint8_bytes = good["evidence"], (1 << 21) + 4096 + 3
    assert evidence["largest_bytes"] == uint8_bytes and all(copy["whole_tensor"] for copy in evidence["copies"].values())
    assert [key.split()[0] for key in evidence["copies"]] == ["cpu>default", "default>default", "default>cpu"] * 2
    checked = next(iter(evidence["chains"].values()))["checked"]
    assert "both sides of 2^20 and 2^21" in checked and "guards in DEFAULT memory cannot be placed" in checked, checked

    truncating = out["truncating"]
    assert truncating["outcome"] == "fail"
    assert truncating["message"].startswith(f"the chain host -> DEFAULT -> DEFAULT -> host of uint8 [{uint8_bytes}] (2 MiB + 4 KiB + 3 bytes) "
                                            "(whole tensors) did not deliver the source bytes: "), truncating["message"]
    assert f"4099 is the byte count {uint8_bytes} modulo 2^21" in truncating["message"], truncating["message"]

    short = out["refdev_short_copy"]
    assert short["outcome"] == "fail" and "did not deliver the source bytes" in short["message"], short
    body = short["reproducer"].split("REGIONS = ")[1]  # its DEFAULT ends are whole tensors; blocks with guards only in host memory
    assert "first = device_tensor(COUNT, TYPE)" in body and not re.search(r"Block\(\d+, True\)", body), body[:2000]
    with_fault = reproduce(short["reproducer"], tmp_path, fault="short-copy")
    assert with_fault.returncode == 1 and "bytes differ" in with_fault.stderr, with_fault.stderr[-2000:]
    assert reproduce(short["reproducer"], tmp_path).returncode == 0


def test_a_crashed_large_copy_quarantines_copies_of_that_tensor_only():
    """The quarantine keys calls by value: a crash of the 4 GiB copy (the WebGPU plugin EP's, past
    its maxBufferSize) must not stop the ordinary CopyTensors default>cpu that concurrency.copies
    and endurance.allocations make after it, while a crash of an ordinary copy still stops this
    check at its probe, which is the bare key."""
    items = size.large_tensors()
    keys = {size._large_copy_call("default>cpu", item) for item in items}
    assert len(keys) == len(items) and Call("CopyTensors", "default>cpu") not in keys
    assert all(key.kind == "CopyTensors" and key.direction == "default>cpu" for key in keys)
    assert {key.note for key in keys} == {item.describe() for item in items}
