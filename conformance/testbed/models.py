"""ONNX models built from the declarative recipes in `models/recipes.yaml`.

A model is a recipe instantiated for one element type and shape. Models are written as the
bytes onnx.helper would make (`serialized`, with onnx_wire: a worker does not import onnx),
refused where onnx.checker refuses them (onnx_types), cached in memory and on disk by the hash
of what they are made from, and written beside the report so that a failure can be reproduced
without the kit.

Nothing on disk is trusted: a model file is named `RECIPE-DTYPE-SHAPE-KEY-CONTENT.onnx`, KEY the
hash of what it is made from (the recipe, element type, shape, opset, IR version and seed) and
CONTENT the hash of its bytes, so that a file read back is the model its recipe makes only when
its bytes hash to its name (`ModelName.holds`). Garbage, a truncated file or another model copied
under that name is removed and the model rebuilt; a symlink is refused, never read through.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conformance import data, safe_io

from conformance.testbed import tensors
from conformance.errors import KitError

if TYPE_CHECKING:  # imported where a model is built: see build()
    import onnx

OPSET = 21
IR_VERSION = 10  # the IR version that goes with opset 21; onnxruntime >= 1.20 reads it
INITIALIZER_SEED = 7
PRODUCER = "ort-ep-conformance"
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
    # onnx is imported here, not at the top: a worker writes its models with onnx_wire
    # (serialized), and importing onnx takes 0.9 s with ml_dtypes 0.7.
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
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name=PRODUCER)
    model.ir_version = IR_VERSION
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        raise UnbuildableModel(f"recipe '{recipe.name}' cannot be built for {dtype.name}: {_first_line(exc)}") from None
    return model


def serialized(recipe: Recipe, dtype: tensors.DType, shape: tuple[int, ...]) -> bytes:
    """`build(recipe, dtype, shape).SerializeToString()`, written by onnx_wire without importing
    onnx where onnx_types knows each of the recipe's operators at OPSET (UnbuildableModel where
    one does not take `dtype`, as onnx.checker refuses it); built with onnx otherwise."""
    from conformance.testbed import onnx_types, onnx_wire

    if OPSET != onnx_types.OPSET or any(op not in onnx_types.TAKES for op in recipe.ops):
        return build(recipe, dtype, shape).SerializeToString()
    for op in recipe.ops:
        first_input, takes = onnx_types.TAKES[op]
        if dtype.name not in takes:
            raise UnbuildableModel(f"recipe '{recipe.name}' cannot be built for {dtype.name}: "
                                   f"ONNX's {op} (opset {OPSET}) does not take tensor({dtype.name}) as its {first_input}")
    dims = list(shape)

    def value(name: str) -> bytes:
        return onnx_wire.value_info(name, dtype.onnx_type, dims)

    return onnx_wire.model([onnx_wire.node(n["op"], n["inputs"], n["outputs"]) for n in recipe.nodes], f"conformance_{recipe.name}",
                           [value(n) for n in recipe.inputs], [value(n) for n in recipe.outputs],
                           [_initializer(n, dtype, shape) for n in recipe.initializers], ir_version=IR_VERSION, opset=OPSET, producer=PRODUCER)


def _initializer(name: str, dtype: tensors.DType, shape: tuple[int, ...]) -> bytes:
    """_tensor's TensorProto, as bytes."""
    from conformance.testbed import onnx_wire

    values = initializer_values(dtype, shape)
    if dtype.name == "string":
        return onnx_wire.tensor(name, dtype.onnx_type, shape, strings=[s.encode() for s in values.reshape(-1)])
    if dtype.numpy_native:
        return onnx_wire.tensor(name, dtype.onnx_type, values.shape, raw=values.tobytes())
    raw = tensors.payload(values, dtype)
    assert not isinstance(raw, list), "strings are made above"
    return onnx_wire.tensor(name, dtype.onnx_type, shape, raw=raw.tobytes())


def warm_up() -> None:
    """Imports what building a model needs ahead of the first model built: a worker started
    with the run has nothing to do while pytest collects. Not onnx: models are written by
    onnx_wire (see there for the 0.9 s that importing onnx costs with ml_dtypes 0.7); a check
    that reads a model with onnx imports it when it runs."""
    try:
        from conformance.testbed import onnx_types, onnx_wire  # noqa: F401
    except Exception:
        pass  # a module that does not import fails the checks that build models, each saying why


class UnbuildableModel(KitError):
    """The recipe's operators do not accept the element type (an ONNX rule, not the EP's)."""


def _first_line(exc: Exception) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def content_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


@dataclass(frozen=True)
class ModelName:
    """What a model file's name says: made from `recipe` for `dtype` and `shape` (their labels),
    with the hash `key` of all it is made of, its bytes hashing to `content`."""

    recipe: str
    dtype: str
    shape: str
    key: str
    content: str

    @classmethod
    def parse(cls, file_name: str) -> "ModelName | None":
        """The name of a model file the kit writes, or None for any other name."""
        stem, dot, suffix = file_name.rpartition(".")
        parts = stem.rsplit("-", 4) if dot and suffix == "onnx" else []
        if len(parts) != 5 or not all(parts) or not all(_is_hex(h, 16) for h in parts[3:]):
            return None
        return cls(*parts)

    @property
    def prefix(self) -> str:
        return f"{self.recipe}-{self.dtype}-{self.shape}-{self.key}-"

    def file_name(self) -> str:
        return f"{self.prefix}{self.content}.onnx"

    def holds(self, data: bytes) -> bool:
        """Whether `data` is the model this name says (its bytes hash to the name)."""
        return content_digest(data) == self.content


def _is_hex(text: str, length: int) -> bool:
    return len(text) == length and all(c in "0123456789abcdef" for c in text)


def recipe_mismatch(file_name: str, data: bytes, recipes: dict[str, Recipe]) -> str:
    """Why the model file `file_name` with bytes `data` is not the model its recipe makes ('' when
    it is, or when its recipe, as this kit has it, is not the one it was made from)."""
    name = ModelName.parse(file_name)
    if name is None:
        return "not a model file this kit writes (RECIPE-DTYPE-SHAPE-KEY-CONTENT.onnx)"
    if not name.holds(data):
        return f"its bytes (sha256 {hashlib.sha256(data).hexdigest()[:16]}...) are not the model its name says ({name.content}...)"
    recipe, dtype = recipes.get(name.recipe), tensors.DTYPES.get(name.dtype)
    if recipe is None or dtype is None:
        return ""
    try:
        shape = tensors.parse_shape(name.shape, dtype)
    except ValueError:
        return f"its shape {name.shape!r} is not one the kit writes"
    if ModelCache.key_hash(recipe, dtype, shape) != name.key:
        return ""  # made from another version of the recipe: its bytes are checked above
    try:
        if build(recipe, dtype, shape).SerializeToString() != data:
            return f"it is not the model recipe '{name.recipe}' makes for {name.dtype} {name.shape}"
    except UnbuildableModel as exc:
        return str(exc)
    return ""


class ModelCache:
    """Serialized models by (recipe, dtype, shape); written to `directory` when one is given."""

    def __init__(self, directory: Path | None = None, recipes: dict[str, Recipe] | None = None, record: Path | None = None):
        """`record`: a file to which the name of each model file this cache hands out is
        appended, once: the models a run used, which its bundle holds (runfolder.run_files).
        The folder is shared by the runs into one report folder, and a file in it says nothing
        of which run used it; its time is left as it is."""
        self.directory = directory
        self.recipes = recipes if recipes is not None else load_recipes()
        self.record = record
        self._built: dict[tuple[str, str, tuple[int, ...]], tuple[bytes, Path | None]] = {}
        self._listing: list[str] | None = None  # the folder's file names, read once
        self._recorded: set[str] = set()

    @staticmethod
    def key_hash(recipe: Recipe, dtype: tensors.DType, shape: tuple[int, ...]) -> str:
        made_of = json.dumps([recipe.__dict__, dtype.name, shape, OPSET, IR_VERSION, INITIALIZER_SEED], sort_keys=True)
        return hashlib.sha256(made_of.encode()).hexdigest()[:16]

    def get(self, name: str, dtype: tensors.DType, shape: tuple[int, ...]) -> tuple[bytes, Path | None]:
        """The model's bytes, and the file that holds them (None without a directory)."""
        key = (name, dtype.name, shape)
        if key not in self._built:
            recipe = self.recipes[name]
            named = ModelName(name, dtype.name, tensors.shape_label(shape), self.key_hash(recipe, dtype, shape), "")
            found = self._read(named) if self.directory is not None else None
            if found is not None:
                data, path = found
            else:
                data, path = serialized(recipe, dtype, shape), None
                if self.directory is not None:
                    # Written aside and renamed: writers sharing a models folder (pytest -n 2) never
                    # see each other's half-written file.
                    path = safe_io.write_file(self.directory, dataclasses.replace(named, content=content_digest(data)).file_name(), data)
            self._built[key] = (data, path)
            if path is not None:
                self._used(path.name)
        return self._built[key]

    def _used(self, file_name: str) -> None:
        """`file_name` appended to the record, once. Each worker of a run appends to the same
        file: a line is one write in append mode, which never interleaves with another's."""
        if self.record is None or file_name in self._recorded:
            return
        self._recorded.add(file_name)
        try:
            with safe_io.open_in(self.record.parent, self.record.name, "a") as record:
                record.write(f"{file_name}\n")
        except (OSError, safe_io.UnsafeFile):
            pass  # unwritable, or a symlink planted as the record: the run goes on, its bundle without this model

    def _read(self, named: ModelName) -> tuple[bytes, Path] | None:
        """The model file of `named`'s recipe, key and shape whose bytes hash to its name. Read
        with safe_io: a symlink planted as the models folder or as a model file is refused
        (UnsafeFile), never read through. A file of that recipe and key that is not the model
        (garbage, a copy of another model, a stale build) is removed, to be rebuilt."""
        if self._listing is None:
            try:
                self._listing = sorted(os.listdir(self.directory))
            except (FileNotFoundError, NotADirectoryError):
                self._listing = []
        directory = self.directory
        assert directory is not None  # _read is only called for a cache on disk
        for file_name in (f for f in self._listing if f.startswith(named.prefix)):
            data = safe_io.read_in(directory, file_name, MAX_MODEL_BYTES, what="model")
            found = ModelName.parse(file_name)
            if data is not None and found is not None and found.holds(data):
                return data, directory / file_name
            if data is not None:
                with contextlib.suppress(OSError):  # a regular file (read_in refuses a symlink): unlink never follows one
                    os.unlink(directory / file_name)
        return None
