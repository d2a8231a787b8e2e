"""A model the EP under test takes, for a contract about sessions in general whose own models it
takes none of (a narrow EP: an NPU that takes a few operators)."""

from __future__ import annotations

from conformance.checks.context.sessions import SessionInfo, Sessions
from conformance.testbed import tensors
from conformance import proofs


class TakenModels:
    """Finds, among the sessions made and then the recipes, one whose nodes the EP takes."""

    def __init__(self, sessions: Sessions):
        self.sessions = sessions

    def session_on_ep(self, recipe: str, dtype: tensors.DType, shape: tuple[int, ...]) -> SessionInfo:
        """The session of `recipe`, or, where the EP takes no node of it, of a model of the same
        element type the EP does take: one a session of this worker already saw run on it
        (another contract's), else the first of models/recipes.yaml's recipes it takes. A
        narrow EP (an NPU that takes a few operators) still shows a contract about sessions in
        general; which model ran is the evidence `model_substituted`. Where no model of the
        type runs on the EP, the recipe's own session is returned (and `require_nodes_on_ep`
        says not_run). Needs onnxruntime's node assignment (>= 1.24) to tell."""
        info = self.sessions.session(recipe, dtype, shape)
        provider = self.sessions.under_test.target.provider
        if (not self.sessions.models.recipes[recipe].ops or info.assignment.get(provider)
                or not self.sessions.under_test.target.has_api("graph_assignment_info")):
            return info
        substitute = self._model_the_ep_takes(dtype, shape)
        if substitute is None:
            return info
        self.sessions.evidence.prove(proofs.MODEL_SUBSTITUTED, {"asked": recipe, "ran": substitute.recipe,
                                                  "why": f"{provider} takes no node of '{recipe}' ({', '.join(self.sessions.models.recipes[recipe].ops)})"})
        return substitute

    def _model_the_ep_takes(self, dtype: tensors.DType, shape: tuple[int, ...]) -> SessionInfo | None:
        provider = self.sessions.under_test.target.provider
        seen = [info for (name, dt, _), info in self.sessions.made().items()
                if dt == dtype.name and not name.startswith("cpu:") and info.assignment.get(provider)]
        if seen:
            return seen[0]
        for name, recipe in self.sessions.models.recipes.items():
            if not recipe.ops or (name, dtype.name, shape) in self.sessions.made():
                continue
            try:
                info = self.sessions.session(name, dtype, shape)
            except Exception:  # a model the EP or onnxruntime refuses is one it does not take: the next
                continue
            if info.assignment.get(provider):
                return info
        return None
