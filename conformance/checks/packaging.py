"""Packaging: a built-in EP that the installed onnxruntime package lists can run.

onnxruntime-gpu lists CUDAExecutionProvider in get_available_providers() on a machine without
CUDA libraries, and a session asked for it silently runs on the CPU EP (eps.fallback_reason).
The EP under test is not at fault there: its package lists what it cannot deliver. The case is
the package's (subject `package`): a finding against that package, besides the run being
`incomplete` because no other check could run. This check alone runs when the EP is unusable
(`applicability.decide` lets `package` contracts through).
"""

from __future__ import annotations

from typing import Iterator

from conformance.testbed import eps, tensors
from conformance.calls import Call
from conformance.checks.registry import check
from conformance.findings import NotApplicable, Violation
from conformance.checks.context import CheckContext
from conformance import proofs


@check("package.listed-eps-run")
def listed_eps_run(ctx: CheckContext) -> Iterator[Violation]:
    ort, target = ctx.ort, ctx.target
    if target.library or target.plugin_module:
        raise NotApplicable(f"{target.provider} comes from a plugin library, which no onnxruntime package lists")
    package = f"{eps.package_name(ort)} {ort.__version__}"
    if target.provider not in ort.get_available_providers():
        raise NotApplicable(f"{package} does not list {target.provider} in get_available_providers()")
    _, model = ctx.models.get("identity", tensors.DTYPES["float32"], (1,))
    path = str(model) if model is not None else "<the model: not saved in this run>"
    snippet = ctx.snippets.script(
        f"{package} lists {target.provider} and a session for it runs on it",
        f"assert {target.provider!r} in ort.get_available_providers(), ort.get_available_providers()\n"
        f"s = works('creating a session for {target.provider}', ort.InferenceSession, {path!r}, "
        f"providers=[({target.provider!r}, {target.provider_options!r})])\n"
        f"assert {target.provider!r} in s.get_providers(), f'{target.provider} is listed but the session fell back to {{s.get_providers()}}'")
    ctx.attempt(f"creating a session for {target.provider}, which {package} lists", snippet)
    with ctx.calling(Call("InferenceSession creation", note=f"{target.provider} as listed by {package}")):
        reason = eps.fallback_reason(ort, target)
    if reason:
        yield Violation(f"{package} lists {target.provider} in get_available_providers(), but it cannot run here: {reason}",
                        expected=f"a session on {target.provider}, or the provider not listed", actual=reason, reproducer=snippet)
        return
    ctx.prove(proofs.LISTED_AND_RUNS, {"package": package, "provider": target.provider})
