"""Outcomes, the verdict, waivers and applicability: pure functions of data."""

from __future__ import annotations

import dataclasses
import json

import pytest

from conformance import apis

from conformance.rules import applicability, waivers
from conformance.catalogue.contracts import Contract, EpSpec, Location, MemoryDeclaration, Waiver
from conformance.facts import DeviceFacts, EpFacts, MemoryFacts, OnnxruntimeFacts
from conformance.outcomes import Details, Outcome, Result, Verdict, counts, verdict
from conformance.proofs import BYTES_COMPARED, Proven

# --- helpers -------------------------------------------------------------------------------


def result(outcome: Outcome = Outcome.PASS, *, contract: str = "copy.x", severity: str = "required", subject: str = "ep",
           device: str = "dev", message: str = "") -> Result:
    return Result(contract=contract, ep="MyEP", device=device, params={"dtype": "float32"}, outcome=outcome,
                  message=message, spec="specs/contracts/copy.yaml:5", severity=severity, subject=subject)


def contract(**changes) -> Contract:
    base = Contract(id="copy.x", statement="A copy MUST be exact.", subject="ep", severity="required", check="copy.direction",
                    sources=(), applies_when={}, params={}, location=Location("specs/contracts/copy.yaml", 5, 5), family="copy")
    return dataclasses.replace(base, **changes)


def ep_spec(*, waiver_list=(), not_applicable=None) -> EpSpec:
    return EpSpec(name="myep", aliases=(), provider="MyEP", summary="s", packages=(), plugin_module=None,
                  default_memory=MemoryDeclaration("gpu"), host_accessible=None, device_type="gpu", copy_directions=None,
                  not_applicable=not_applicable or {}, waivers=tuple(waiver_list), sources=(), unverified=(),
                  location=Location("myep.yaml", 2, 3))


def waiver(**changes) -> Waiver:
    base = Waiver("copy.x", "driver bug", "https://example.com/issue/9", None, None, Location("myep.yaml", 12, 7))
    return dataclasses.replace(base, **changes)


FACTS = EpFacts("acme", "AcmeExecutionProvider", "acme", onnxruntime=OnnxruntimeFacts("1.32.0"))
DEVICE_MEMORY = {"name": "Dev", "device_type": "gpu", "vendor_id": 1, "device_id": 0, "device_mem_type": "default"}


def run_facts(*, api=None, version="1.32.0", ep_device=True, library=None, plugin_module=None, declared=True) -> EpFacts:
    every_api = {name: True for name in apis.BY_NAME}
    return EpFacts("acme", "AcmeExecutionProvider", "acme", declared=declared, library=library, plugin_module=plugin_module, ep_device=ep_device,
                   onnxruntime=OnnxruntimeFacts(version), api=dict(every_api, **(api or {})))


def device(default=None, host_accessible=None) -> DeviceFacts:
    return DeviceFacts(0, "dev", default_memory=MemoryFacts.from_wire(default), host_accessible_memory=MemoryFacts.from_wire(host_accessible))


# --- the verdict ---------------------------------------------------------------------------


def test_all_required_passing_is_conformant():
    assert verdict([result(), result(contract="copy.y")]) == (Verdict.CONFORMANT, [])


def test_not_applicable_results_do_not_spoil_a_conformant_verdict():
    decided, _ = verdict([result(), result(Outcome.NOT_APPLICABLE, contract="copy.y")])
    assert decided is Verdict.CONFORMANT


def test_waived_required_failure_is_still_conformant():
    decided, _ = verdict([result(), result(Outcome.WAIVED, contract="copy.y")])
    assert decided is Verdict.CONFORMANT


@pytest.mark.parametrize("broken", [Outcome.FAIL, Outcome.CRASH, Outcome.TIMEOUT])
def test_required_ep_contract_broken_is_non_conformant(broken):
    decided, reasons = verdict([result(), result(broken, contract="copy.y")])
    assert decided is Verdict.NON_CONFORMANT
    assert reasons == ["required contract broken: copy.y"]


def test_broken_beats_incomplete():
    decided, _ = verdict([result(Outcome.FAIL), result(Outcome.NOT_RUN, contract="copy.y")], interrupted=True)
    assert decided is Verdict.NON_CONFORMANT


def test_required_contract_that_never_ran_is_incomplete():
    decided, reasons = verdict([result(), result(Outcome.NOT_RUN, contract="copy.y")])
    assert decided is Verdict.INCOMPLETE
    assert reasons == ["required contract could not run: copy.y"]


def test_a_not_run_case_of_a_contract_shown_elsewhere_does_not_block_the_verdict():
    decided, _ = verdict([result(), result(Outcome.NOT_RUN)])
    assert decided is Verdict.CONFORMANT


@pytest.mark.parametrize("severity, subject", [("required", "ep"), ("recommended", "ep"), ("required", "runtime")])
def test_a_kit_error_makes_the_run_incomplete(severity, subject):
    decided, reasons = verdict([result(), result(Outcome.ERROR, contract="copy.y", severity=severity, subject=subject)])
    assert decided is Verdict.INCOMPLETE
    assert len(reasons) == 1 and "copy.y" in reasons[0]


def test_interrupted_run_is_incomplete():
    decided, reasons = verdict([result()], interrupted=True)
    assert decided is Verdict.INCOMPLETE
    assert reasons == ["the run was interrupted before every check finished"]


def test_no_results_is_incomplete():
    assert verdict([]) == (Verdict.INCOMPLETE, ["no check ran"])


def test_nothing_required_passed_is_incomplete():
    decided, reasons = verdict([result(Outcome.NOT_APPLICABLE), result(severity="recommended")])
    assert decided is Verdict.INCOMPLETE
    assert reasons == ["no required contract passed on this EP"]


@pytest.mark.parametrize("broken", [Outcome.FAIL, Outcome.CRASH, Outcome.TIMEOUT])
def test_runtime_subject_failure_does_not_make_the_ep_non_conformant(broken):
    runtime = result(broken, contract="update-inplace.y", subject="runtime")
    assert verdict([result(), runtime]) == (Verdict.CONFORMANT, [])
    assert runtime.is_finding


@pytest.mark.parametrize("severity", ["recommended", "informational"])
def test_non_required_failure_does_not_decide(severity):
    assert verdict([result(), result(Outcome.FAIL, contract="streams.y", severity=severity)]) == (Verdict.CONFORMANT, [])


@pytest.mark.parametrize("broken", [Outcome.FAIL, Outcome.CRASH, Outcome.TIMEOUT])
def test_a_shared_failure_counts_against_the_ep_and_is_a_finding_against_onnxruntime(broken):
    """Subject both: onnxruntime passed a bad request through unchecked and the EP accepted it."""
    shared = result(broken, contract="copy.bad-requests", subject="both")
    assert verdict([result(), shared]) == (Verdict.NON_CONFORMANT, ["required contract broken: copy.bad-requests"])
    assert shared.is_finding and shared.against_ep
    assert verdict([result(), result(contract="copy.bad-requests", subject="both")]) == (Verdict.CONFORMANT, [])


def test_a_required_shared_case_that_could_not_run_counts_like_the_eps_own():
    assert verdict([result(), result(Outcome.NOT_RUN, contract="copy.bad-requests", subject="both")])[0] is Verdict.INCOMPLETE


def test_only_broken_runtime_contracts_are_findings():
    assert not result(Outcome.FAIL).is_finding
    assert not result(Outcome.PASS, subject="runtime").is_finding
    assert not result(Outcome.NOT_RUN, subject="runtime").is_finding


def test_counts_has_every_outcome():
    summary = counts([result(), result(), result(Outcome.CRASH)])
    assert summary == {o.value: {"pass": 2, "crash": 1}.get(o.value, 0) for o in Outcome}


# --- results round-trip ----------------------------------------------------------------------


def test_result_round_trips_through_json():
    original = dataclasses.replace(result(Outcome.TIMEOUT, message="hung"), nodeid="copy.yaml::x[dev]", duration=1.5,
                                   details=Details.from_wire({"violations": [{"message": "m"}]}))
    data = json.loads(json.dumps(original.to_dict()))
    assert data["outcome"] == "timeout"
    assert Result.from_dict(data) == original
    assert Result.from_dict(data).outcome is Outcome.TIMEOUT


def test_details_of_every_kind_round_trip_through_json_as_the_records_they_are():
    from conformance.calls import Call
    from conformance.findings import Violation
    from conformance.outcomes import ExcusedTry, MachineEvent, Tried, WaiverStatus

    killed = MachineEvent(MachineEvent.KILLED, "wait status: SIGKILL")
    details = Details(violations=(Violation("bytes differ", "0x01", "0x02", {"destination": {"name": "Dev"}}, "print(1)", "both"),),
                      evidence=Proven({BYTES_COMPARED: 364}), subject="both", subject_reason="why", step="copying",
                      call=Call("copy_tensors", "cpu>default"), machine=killed,
                      tries=(Tried(Outcome.CRASH, "killed", counted=False), Tried(Outcome.PASS, "")),
                      machine_events=(ExcusedTry(1, killed, "not counted"),), quarantined_call="copy_tensors cpu>default",
                      traceback="Traceback", strict="declared not applicable", waiver="expired",
                      waiver_status=WaiverStatus("copy.x", "applied", "driver bug", "https://example.com/9", None, "dev", "ep.yaml:3"),
                      waived_outcome="fail", waived_message="bytes differ")
    assert all(getattr(details, f.name) for f in dataclasses.fields(Details))  # every field given, so every field is round-tripped
    wire = json.loads(json.dumps(details.to_wire()))
    assert Details.from_wire(wire) == details
    assert wire["tries"][0] == {"outcome": "crash", "message": "killed", "counted": False} and wire["call"]["kind"] == "copy_tensors"
    assert Details().to_wire() == {}  # an empty field is left out, as report.json always had it


def test_details_read_back_from_a_file_keep_what_they_can_and_drop_what_is_not_one_of_theirs():
    wire = {"violations": [{"message": "m", "unknown": 1}, "junk"], "tries": [{"outcome": "exploded"}, {"outcome": "pass"}],
            "call": {"no": "kind"}, "machine": {"kind": "eaten"}, "machine_events": [{"kind": "killed"}], "evidence": [1], "other": 2}
    details = Details.from_wire(wire)
    assert [v.message for v in details.violations] == ["m"] and [t.outcome for t in details.tries] == [Outcome.PASS]
    assert (details.call, details.machine, details.machine_events, details.evidence) == (None, None, (), Proven())
    assert Details.from_wire(None) == Details.from_wire("x") == Details()


def test_result_from_dict_rejects_an_unknown_outcome():
    data = dict(result().to_dict(), outcome="exploded")
    with pytest.raises(ValueError):
        Result.from_dict(data)


# --- waivers -------------------------------------------------------------------------------


@pytest.mark.parametrize("broken", [Outcome.FAIL, Outcome.CRASH, Outcome.TIMEOUT, Outcome.NOT_RUN])
def test_waiver_turns_a_broken_or_unrun_check_into_waived(broken):
    waived = waivers.apply(result(broken, message="bytes differ"), ep_spec(waiver_list=[waiver()]), FACTS)
    assert waived.outcome is Outcome.WAIVED
    assert waived.message == f"waived (https://example.com/issue/9): driver bug; was {broken.value}: bytes differ"
    assert waived.details.waived_outcome == broken.value
    assert waived.details.waived_message == "bytes differ"


def test_waiver_on_a_passing_check_reports_it_is_no_longer_needed():
    passed = waivers.apply(result(Outcome.PASS), ep_spec(waiver_list=[waiver()]), FACTS)
    assert passed.outcome is Outcome.PASS
    assert "waiver no longer needed" in passed.details.waiver
    assert "myep.yaml:12" in passed.details.waiver
    assert "no longer needed" in passed.message


@pytest.mark.parametrize("until", ["1.32", "1.32.0", "1.30"])
def test_expired_waiver_does_not_apply(until):
    failed = waivers.apply(result(Outcome.FAIL), ep_spec(waiver_list=[waiver(until=until)]), FACTS)
    assert failed.outcome is Outcome.FAIL
    assert failed.details.waiver.startswith(f"expired: held until onnxruntime {until}, this is 1.32.0")


def test_waiver_until_a_later_version_applies():
    assert waivers.expiry(waiver(until="1.33"), "1.32.0", None) == ""
    assert waivers.apply(result(Outcome.FAIL), ep_spec(waiver_list=[waiver(until="1.33")]), FACTS).outcome is Outcome.WAIVED


def test_waiver_compares_versions_numerically_not_as_text():
    assert waivers.expiry(waiver(until="1.4"), "1.32.0", None)
    assert not waivers.expiry(waiver(until="1.100"), "1.32.0", None)
    assert waivers.expiry(waiver(until="1.32"), "1.32.0.dev20250101", None)


def test_waiver_for_another_contract_or_device_does_not_apply():
    spec = ep_spec(waiver_list=[waiver(contract="copy.other"), waiver(device="gpu:1")])
    assert waivers.apply(result(Outcome.FAIL, device="gpu:0"), spec, FACTS).outcome is Outcome.FAIL
    on_device = ep_spec(waiver_list=[waiver(device="gpu:0")])
    assert waivers.apply(result(Outcome.FAIL, device="gpu:0"), on_device, FACTS).outcome is Outcome.WAIVED


def test_without_a_spec_nothing_is_waived():
    failed = result(Outcome.FAIL)
    assert waivers.apply(failed, None, FACTS) is failed


def test_waiver_leaves_not_applicable_and_error_alone():
    spec = ep_spec(waiver_list=[waiver()])
    assert waivers.apply(result(Outcome.NOT_APPLICABLE), spec, FACTS).outcome is Outcome.NOT_APPLICABLE
    assert waivers.apply(result(Outcome.ERROR), spec, FACTS).outcome is Outcome.ERROR


# --- applicability -------------------------------------------------------------------------


def test_default_memory_device_contract_applies_to_device_memory_only():
    about_device = contract(applies_when={"default_memory": "device"})
    assert applicability.decide(about_device, run_facts(), device(default=DEVICE_MEMORY), None) is None
    skip = applicability.decide(about_device, run_facts(), device(), None)
    assert skip.outcome is Outcome.NOT_APPLICABLE
    assert skip.reason.startswith("the EP's DEFAULT memory is plain CPU memory")


def test_default_memory_cpu_contract_applies_to_cpu_memory_only():
    about_cpu = contract(applies_when={"default_memory": "cpu"})
    assert applicability.decide(about_cpu, run_facts(), device(), None) is None
    cpu_typed = dict(DEVICE_MEMORY, device_type="cpu")
    assert applicability.decide(about_cpu, run_facts(), device(default=cpu_typed), None) is None
    skip = applicability.decide(about_cpu, run_facts(), device(default=DEVICE_MEMORY), None)
    assert skip.outcome is Outcome.NOT_APPLICABLE
    assert skip.reason.startswith("the EP's DEFAULT memory is device memory")


def test_host_accessible_contract_needs_host_accessible_memory():
    about_host = contract(applies_when={"host_accessible": True})
    skip = applicability.decide(about_host, run_facts(), device(default=DEVICE_MEMORY), None)
    assert skip == applicability.Skip(Outcome.NOT_APPLICABLE, "the EP device advertises no HOST_ACCESSIBLE memory")
    host = dict(DEVICE_MEMORY, device_mem_type="host_accessible")
    assert applicability.decide(about_host, run_facts(), device(DEVICE_MEMORY, host), None) is None


def test_missing_api_is_not_run_and_names_the_versions():
    needs = contract(requires_api=("ep_devices", "copy_tensors"))
    skip = applicability.decide(needs, run_facts(api={"copy_tensors": False}, version="1.22.1"), device(), None)
    assert skip.outcome is Outcome.NOT_RUN
    assert skip.reason == "needs copy_tensors (onnxruntime >= 1.23); onnxruntime 1.22.1 lacks it"


def test_spec_not_applicable_entry_wins_and_says_where_and_why():
    spec = ep_spec(not_applicable={"copy.x": "no such memory on this NPU"})
    needs = contract(requires_api=("copy_tensors",))
    skip = applicability.decide(needs, run_facts(api={"copy_tensors": False}), device(), spec)
    assert skip.outcome is Outcome.NOT_APPLICABLE
    assert skip.reason == "declared not applicable by myep.yaml:2: no such memory on this NPU"


@pytest.mark.parametrize("key, facts, reason", [
    ("ep_device", {"ep_device": False}, "the EP is not listed by get_ep_devices()"),
    ("declared", {"declared": False}, "no vendor declaration (EP spec) was given for this EP"),
    ("plugin_library", {}, "the EP is built into onnxruntime, not loaded from a plugin library"),
])
def test_other_predicates_explain_why_they_do_not_hold(key, facts, reason):
    skip = applicability.decide(contract(applies_when={key: True}), run_facts(**facts), device(), None)
    assert skip == applicability.Skip(Outcome.NOT_APPLICABLE, reason)


def test_plugin_library_predicate_holds_for_a_library_or_plugin_module():
    about_plugins = contract(applies_when={"plugin_library": True})
    assert applicability.decide(about_plugins, run_facts(library="/x/libep.so"), device(), None) is None
    assert applicability.decide(about_plugins, run_facts(plugin_module="ep_pkg"), device(), None) is None


def test_the_schemas_api_enum_is_the_table_of_apis():
    from conformance.catalogue import schema as spec_schema

    schema = spec_schema.load_schema(spec_schema.CONTRACTS_SCHEMA)
    assert schema["$defs"]["api"]["enum"] == [api.name for api in apis.APIS]
    assert all(api.since.count(".") == 1 for api in apis.APIS)


def test_a_contract_needing_an_api_the_build_lacks_is_not_run_with_the_version_from_the_table(monkeypatch):
    needs_copy = contract(requires_api=("copy_tensors",))
    monkeypatch.setattr(apis, "BY_NAME", dict(apis.BY_NAME, copy_tensors=dataclasses.replace(apis.BY_NAME["copy_tensors"], since="9.9")))
    skip = applicability.decide(needs_copy, run_facts(api={"copy_tensors": False}), device(), None)
    assert skip.outcome is Outcome.NOT_RUN and "(onnxruntime >= 9.9)" in skip.reason


def test_the_readmes_outcome_table_lists_exactly_the_outcomes():
    """Every outcome the README documents is one the kit produces, and none is left out."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    table = readme.split("### Outcomes and verdict", 1)[1].split("\n\n")[1]
    documented = {name for row in table.splitlines()[2:] for name in re.findall(r"`([a-z_]+)`", row.split("|")[1])}
    assert documented == {outcome.value for outcome in Outcome}


# --- API levels and contested rules ----------------------------------------------------------


def test_a_contract_above_the_builds_api_level_is_not_applicable_naming_the_level():
    needs = contract(since="1.30", requires_api=("memory_info_alloc", "copy_tensors"))
    skip = applicability.decide(needs, run_facts(api={"memory_info_alloc": False}, version="1.24.1"), device(), None)
    assert skip == applicability.Skip(Outcome.NOT_APPLICABLE, "needs onnxruntime 1.30's API (memory_info_alloc); onnxruntime 1.24.1 "
                                                              "is at API level 1.24, the level this run certifies")
    # At the contract's level it applies; a build of that level that lacks the API is not_run.
    assert applicability.decide(needs, run_facts(version="1.30.0"), device(), None) is None
    skip = applicability.decide(needs, run_facts(api={"memory_info_alloc": False}, version="1.30.0"), device(), None)
    assert skip.outcome is Outcome.NOT_RUN
    # A contract that does not apply says why, whatever its API level.
    about_device = contract(since="1.30", applies_when={"default_memory": "device"})
    assert applicability.decide(about_device, run_facts(version="1.24.1"), device(), None).reason.startswith("the EP's DEFAULT memory is plain CPU")


def test_a_case_needing_an_api_above_the_builds_level_is_not_applicable_and_one_at_its_level_not_run():
    from conformance.checks.context.device import DeviceUnderTest
    from conformance.facts import DeviceFacts, EpFacts
    from conformance.findings import NotApplicable, NotRun
    from conformance.testbed.eps import EpTarget

    class Ort:
        __version__ = "1.24.1"

    target = EpTarget("Stand-in", "StandInExecutionProvider", None, [], {},
                      facts=EpFacts("Stand-in", "StandInExecutionProvider", "stand-in", api={"update_inplace_ortvalue": False}))
    under_test = DeviceUnderTest(Ort, target, 0, None, DeviceFacts(0, "stand-in"))
    with pytest.raises(NotApplicable, match=r"needs onnxruntime 1.26's API \(update_inplace_ortvalue\); onnxruntime 1.24.1 is at API level 1.24, "
                                             r"the level this run certifies \(this build has no update_inplace\(OrtValue\)\)"):
        under_test.require_api("update_inplace_ortvalue", "has no update_inplace(OrtValue)")
    Ort.__version__ = "1.27.0"
    with pytest.raises(NotRun, match=r"onnxruntime 1.27.0 has no update_inplace\(OrtValue\) \(needs >= 1.26\)"):
        under_test.require_api("update_inplace_ortvalue", "has no update_inplace(OrtValue)")


def test_a_contested_rule_selects_the_eps_and_builds_it_names():
    from conformance.catalogue import selectors
    from conformance.catalogue.contracts import Contested

    held = Contested("plugin EPs may keep inputs in their HOST_ACCESSIBLE memory",
                     {"plugin_library": True, "host_accessible": True, "onnxruntime": ">=1.27"}, "PR 28037 says so",
                     (("never HOST_ACCESSIBLE", "issue"), ("HOST_ACCESSIBLE", "PR")))
    about = contract(contested=held)
    host = dict(DEVICE_MEMORY, device_mem_type="host_accessible")
    plugin = run_facts(library="/x/libep.so", version="1.27.0")
    assert selectors.selects(held.where, plugin, device(None, host))
    assert selectors.contested_rule(about, plugin, device(None, host)).startswith("contested: judged by the rule held for plugin_library=True")
    for run, dev in [(run_facts(version="1.32.0"), device(None, host)),  # built into onnxruntime
                     (run_facts(library="/x/libep.so", version="1.26.0"), device(None, host)),  # before PR 28037
                     (plugin, device(DEVICE_MEMORY))]:  # no HOST_ACCESSIBLE memory
        assert not selectors.selects(held.where, run, dev)
        assert selectors.contested_rule(about, run, dev).startswith("contested: judged by the statement's rule")
    assert selectors.contested_rule(contract(), plugin, device(None, host)) == ""
