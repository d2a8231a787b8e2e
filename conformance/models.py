"""ONNX models built from the declarative recipes in `models/recipes.yaml`.

A model is a recipe instantiated for one element type and shape. Models are checked with
`onnx.checker`, cached in memory and on disk by the hash of what they are made from, and written
beside the report so that a failure can be reproduced without the kit.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conformance import data, safe_io, tensors

if TYPE_CHECKING:  # imported where a model is built: see build()
    import onnx

OPSET = 21
IR_VERSION = 10  # the IR version that goes with opset 21; onnxruntime >= 1.20 reads it
INITIALIZER_SEED = 7
MAX_MODEL_BYTES = 1 << 30  # a model file read back from the models folder; the kit's are kilobytes


@dataclass(frozen=True)
class Recipe:
    name: str
    summary: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    initializers: tuple[str, ...]
    nodes: tuple[dict[str, Any], ...]

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(node["op"] for node in self.nodes)


def load_recipes(path: Path | None = None) -> dict[str, Recipe]:
    return recipes_from(data.read_recipes(path))


def recipes_from(raw: dict[str, Any]) -> dict[str, Recipe]:
    return {
        name: Recipe(
            name,
            body["summary"],
            tuple(body.get("inputs", ())),
            tuple(body["outputs"]),
            tuple(body.get("initializers", ())),
            tuple(body.get("nodes", ())),
        )
        for name, body in raw.items()
    }


def initializer_values(dtype: tensors.DType, shape: tuple[int, ...]):
    return tensors.sample(dtype, shape, seed=INITIALIZER_SEED)


def _tensor(name: str, dtype: tensors.DType, shape: tuple[int, ...]) -> "onnx.TensorProto":
    import onnx
    from onnx import helper, numpy_helper

    values = initializer_values(dtype, shape)
    if dtype.name == "string":
        return helper.make_tensor(name, dtype.onnx_type, shape, [s.encode() for s in values.reshape(-1)])
    if dtype.numpy_native:
        return numpy_helper.from_array(values, name)
    tensor = onnx.TensorProto(name=name, data_type=dtype.onnx_type, dims=list(shape))
    raw = tensors.payload(values, dtype)
    assert not isinstance(raw, list), "strings are made above"
    tensor.raw_data = raw.tobytes()
    return tensor


def build(recipe: Recipe, dtype: tensors.DType, shape: tuple[int, ...]) -> "onnx.ModelProto":
    # onnx is imported here, not at the top: a worker whose models are all cached on disk
    # never builds one, and importing onnx is about 40 ms of its start.
    import onnx
    from onnx import helper

    def value(name: str) -> "onnx.ValueInfoProto":
        return helper.make_tensor_value_info(name, dtype.onnx_type, list(shape))

    graph = helper.make_graph(
        [helper.make_node(n["op"], n["inputs"], n["outputs"]) for n in recipe.nodes],
        f"conformance_{recipe.name}",
        [value(n) for n in recipe.inputs],
        [value(n) for n in recipe.outputs],
        initializer=[_tensor(n, dtype, shape) for n in recipe.initializers],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="ort-ep-conformance")
    model.ir_version = IR_VERSION
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        raise UnbuildableModel(f"recipe '{recipe.name}' cannot be built for {dtype.name}: {_first_line(exc)}") from None
    return model


def warm_up() -> None:
    """Imports onnx ahead of the first model built. A worker started with the run has nothing
    to do while pytest collects; importing onnx then takes its 40 ms off the first check that
    builds a model, which pytest would otherwise wait for."""
    try:
        import onnx  # noqa: F401
    except Exception:
        pass  # an onnx that does not import fails the checks that build models, each saying why


class UnbuildableModel(Exception):
    """The recipe's operators do not accept the element type (an ONNX rule, not the EP's)."""


def _first_line(exc: Exception) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


class ModelCache:
    """Serialized models by (recipe, dtype, shape); written to `directory` when one is given."""

    def __init__(self, directory: Path | None = None, recipes: dict[str, Recipe] | None = None):
        self.directory = directory
        self.recipes = recipes if recipes is not None else load_recipes()
        self._built: dict[tuple[str, str, tuple[int, ...]], tuple[bytes, Path | None]] = {}

    def key_hash(self, recipe: Recipe, dtype: tensors.DType, shape: tuple[int, ...]) -> str:
        made_of = json.dumps([recipe.__dict__, dtype.name, shape, OPSET, IR_VERSION, INITIALIZER_SEED], sort_keys=True)
        return hashlib.sha256(made_of.encode()).hexdigest()[:16]

    def get(self, name: str, dtype: tensors.DType, shape: tuple[int, ...]) -> tuple[bytes, Path | None]:
        """The model's bytes, and the file that holds them (None without a directory)."""
        key = (name, dtype.name, shape)
        if key not in self._built:
            recipe = self.recipes[name]
            digest = self.key_hash(recipe, dtype, shape)
            path = None
            if self.directory is not None:
                path = self.directory / f"{name}-{dtype.name}-{tensors.shape_label(shape)}-{digest}.onnx"
                # Read and written with safe_io: a symlink planted as the models folder or as a
                # model file is refused (UnsafeFile), never read or written through.
                cached = safe_io.read_in(self.directory, path.name, MAX_MODEL_BYTES, what="model")
                if cached is not None:
                    self._built[key] = (cached, path)
                    return self._built[key]
            data = build(recipe, dtype, shape).SerializeToString()
            if path is not None:
                # Written aside and renamed: writers sharing a models folder (pytest -n 2) never
                # see each other's half-written file.
                safe_io.write_file(path.parent, path.name, data)
            self._built[key] = (data, path)
        return self._built[key]
