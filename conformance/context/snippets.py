"""Python a person pastes to reproduce what a check did: the set-up of the EP device, a session
made as the check context makes it, and the memory info of a memory kind."""

from __future__ import annotations

from pathlib import Path

from conformance.context.device import DeviceUnderTest

ASSIGNMENT_CONFIG = "session.record_ep_graph_assignment_info"


class Snippets:
    def __init__(self, under_test: DeviceUnderTest):
        self.under_test = under_test

    def preamble(self) -> str:
        target, lines = self.under_test.target, ["import numpy as np, onnxruntime as ort"]
        if target.registration:
            lines.append(f"ort.register_execution_provider_library({target.registration!r}, {target.library!r})")
        if self.under_test.device is not None:
            lines.append(f"dev = [d for d in ort.get_ep_devices() if d.ep_name == {target.provider!r}][{self.under_test.index}]")
        return "\n".join(lines)

    def session_snippet(self, model_path: Path | str | None) -> str:
        """Lines that create `s`, a session of the model on the EP under test (after `preamble`),
        made as `Sessions.create_session` makes it: its node assignment recorded, the EP's options given, no fallback."""
        target = self.under_test.target
        provider_options = target.provider_options
        lines = ["so = ort.SessionOptions()", f"so.add_session_config_entry({ASSIGNMENT_CONFIG!r}, '1')"]
        lines += [f"so.add_session_config_entry({k!r}, {v!r})" for k, v in target.session_config.items()]
        if self.under_test.device is not None:
            lines += [f"so.add_provider_for_devices([dev], {provider_options!r})", f"s = ort.InferenceSession({str(model_path)!r}, so, enable_fallback=0)"]
        else:
            lines.append(f"s = ort.InferenceSession({str(model_path)!r}, so, providers=[({target.provider!r}, {provider_options!r}), 'CPUExecutionProvider'], enable_fallback=0)")
        lines.append("s.disable_fallback()  # no silent retry on the CPU EP: the EP's own error shows")
        return "\n".join(lines)

    def memory_expr(self, kind: str) -> str:
        """The expression of memory `kind`'s OrtMemoryInfo in a snippet ('None': plain CPU memory)."""
        if self.under_test.memory_info(kind) is None:
            return "None"
        return f"dev.memory_info(ort.OrtDeviceMemoryType.{kind.upper()})"
