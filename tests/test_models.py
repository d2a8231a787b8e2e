"""Model recipes: each builds, passes onnx.checker, runs on the CPU EP, and is cached by hash."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from conformance.run import runfolder
from conformance.testbed import models, tensors
from conformance.testbed.models import ModelCache, UnbuildableModel

FLOAT32 = tensors.DTYPES["float32"]
SHAPE = (2, 3)
RECIPES = models.load_recipes()


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_the_shipped_recipes_are_the_ones_the_contracts_use():
    assert {"identity", "add", "relu", "add_relu", "initializer_output", "passthrough"} <= set(RECIPES)


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_each_recipe_builds_for_float32_and_passes_the_checker(name):
    model = models.build(RECIPES[name], FLOAT32, SHAPE)
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == models.OPSET
    assert model.ir_version == models.IR_VERSION
    assert [n.op_type for n in model.graph.node] == list(RECIPES[name].ops)
    assert [o.name for o in model.graph.output] == list(RECIPES[name].outputs)
    for output in model.graph.output:
        assert output.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
        assert [d.dim_value for d in output.type.tensor_type.shape.dim] == list(SHAPE)


def test_identity_returns_its_input_on_cpu():
    x = np.arange(6, dtype=np.float32).reshape(SHAPE)
    (y,) = session(models.build(RECIPES["identity"], FLOAT32, SHAPE)).run(None, {"x": x})
    np.testing.assert_array_equal(y, x)


def test_add_adds_its_inputs_on_cpu():
    a = np.arange(6, dtype=np.float32).reshape(SHAPE)
    b = np.full(SHAPE, 0.5, dtype=np.float32)
    (c,) = session(models.build(RECIPES["add"], FLOAT32, SHAPE)).run(None, {"a": a, "b": b})
    np.testing.assert_array_equal(c, a + b)


def test_add_relu_clamps_the_sum_on_cpu():
    a = np.array([[-3, -1, 0], [1, 2, 3]], dtype=np.float32)
    b = np.ones(SHAPE, dtype=np.float32)
    (y,) = session(models.build(RECIPES["add_relu"], FLOAT32, SHAPE)).run(None, {"a": a, "b": b})
    np.testing.assert_array_equal(y, np.maximum(a + b, 0))


def test_passthrough_returns_its_input_unchanged():
    x = np.array([[1.5, -0.0, np.inf], [-np.inf, 2, 3]], dtype=np.float32)
    (y,) = session(models.build(RECIPES["passthrough"], FLOAT32, SHAPE)).run(None, {"x": x})
    assert y.tobytes() == x.tobytes()


@pytest.mark.parametrize("dtype", ["float32", "int64", "uint8"])
def test_initializer_output_returns_the_initializer_values(dtype):
    dt = tensors.DTYPES[dtype]
    model = models.build(RECIPES["initializer_output"], dt, SHAPE)
    assert not model.graph.input
    (w,) = session(model).run(None, {})
    expected = models.initializer_values(dt, SHAPE)
    assert w.tobytes() == expected.tobytes()  # bit-exact, NaN payloads included


def test_initializer_values_are_deterministic_and_contain_special_values():
    first = models.initializer_values(FLOAT32, (4, 4))
    assert first.tobytes() == models.initializer_values(FLOAT32, (4, 4)).tobytes()
    assert first.reshape(-1).view(np.uint32)[0] == 0x7FC00001


@pytest.mark.parametrize("dtype", ["bfloat16", "float8e4m3fn", "int4", "string"])
def test_non_numpy_and_string_initializers_build(dtype):
    model = models.build(RECIPES["initializer_output"], tensors.DTYPES[dtype], SHAPE)
    assert model.graph.initializer[0].data_type == tensors.DTYPES[dtype].onnx_type


@pytest.mark.parametrize("recipe, dtype", [("add", "bool"), ("add", "string"), ("relu", "uint8"), ("add", "float8e4m3fn")])
def test_combinations_onnx_forbids_raise_unbuildable_model(recipe, dtype):
    with pytest.raises(UnbuildableModel, match=f"recipe '{recipe}' cannot be built for {dtype}: "):
        models.build(RECIPES[recipe], tensors.DTYPES[dtype], SHAPE)


# --- written without onnx (onnx_wire, onnx_types) -------------------------------------------

SHAPES = [(), (0, 3), (3,), (2, 3), (7, 13)]


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_each_model_is_written_as_onnx_helper_writes_it(name):
    """serialized() writes without onnx the bytes build() makes with it, for every element type
    and shape (a model file's name hashes them), and refuses where onnx.checker refuses."""
    for dtype in tensors.DTYPES.values():
        for shape in SHAPES:
            try:
                expected: bytes | None = models.build(RECIPES[name], dtype, shape).SerializeToString()
            except UnbuildableModel:
                expected = None
            try:
                written: bytes | None = models.serialized(RECIPES[name], dtype, shape)
            except UnbuildableModel as exc:
                assert str(exc).startswith(f"recipe '{name}' cannot be built for {dtype.name}: ONNX's "), exc
                written = None
            assert written == expected, (name, dtype.name, shape)


def test_the_operators_table_is_onnx_defs():
    """onnx_types.TAKES is what onnx.defs says of each recipe operator at the kit's opset; where
    they differ, the message is the table to paste into conformance/testbed/onnx_types.py."""
    from onnx import defs

    from conformance.testbed import onnx_types

    takes = {}
    for op in sorted({op for recipe in RECIPES.values() for op in recipe.ops}):
        schema = defs.get_schema(op, models.OPSET)
        first = schema.inputs[0]
        allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}.get(first.type_str, {first.type_str})
        takes[op] = (first.name, frozenset(d.name for d in tensors.DTYPES.values()
                                           if f"tensor({onnx.TensorProto.DataType.Name(d.onnx_type).lower()})" in allowed))
    assert onnx_types.OPSET == models.OPSET
    assert onnx_types.TAKES == takes, "TAKES = " + repr({op: (first, sorted(names)) for op, (first, names) in takes.items()})


def test_a_recipe_with_an_operator_the_table_lacks_is_built_with_onnx():
    recipe = dataclasses.replace(RECIPES["relu"], name="abs", nodes=({"op": "Abs", "inputs": ["x"], "outputs": ["y"]},))
    assert models.serialized(recipe, FLOAT32, SHAPE) == models.build(recipe, FLOAT32, SHAPE).SerializeToString()


def test_the_probe_model_is_onnx_helpers():
    from onnx import helper

    from conformance.testbed.eps import probe_model

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])])
    assert probe_model() == helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8).SerializeToString()


def test_a_graph_is_read_as_onnx_reads_it():
    """What ep_context reads of a model onnxruntime wrote: the nodes' operators and string
    attributes, the inputs and outputs, from bytes onnx wrote with more in them than that."""
    from onnx import helper

    from conformance.testbed import onnx_wire

    nodes = [helper.make_node("Relu", ["x"], ["h"], name="first"),
             helper.make_node("EPContext", ["h"], ["y"], domain="com.microsoft", source="MyEp", embed_mode=1,
                              ep_cache_context=b"\x00\xff" * 5000, partition_name="p\u00e9")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n", 3])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                              initializer=[helper.make_tensor("w", onnx.TensorProto.INT64, [2], [-1, 2])])
    data = helper.make_model(graph, producer_name="onnxruntime", doc_string="d", opset_imports=[helper.make_opsetid("", 21)]).SerializeToString()
    read = onnx_wire.read_graph(data)
    assert [n.op_type for n in read.nodes] == ["Relu", "EPContext"]
    assert read.nodes[1].strings == {"source": b"MyEp", "ep_cache_context": b"\x00\xff" * 5000, "partition_name": "p\u00e9".encode()}
    assert (read.inputs, read.outputs) == (("x",), ("y",))
    for model in RECIPES.values():
        written = models.serialized(model, FLOAT32, SHAPE)
        assert [n.op_type for n in onnx_wire.read_graph(written).nodes] == [n.op_type for n in onnx.load_from_string(written).graph.node]


@pytest.mark.parametrize("data", [b"", b"\x3a\x05ab", b"\x3a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", b"\x3b\x00", b"not onnx at all"],
                         ids=["empty", "truncated-graph", "endless-length", "group", "text"])
def test_bytes_that_hold_no_model_are_not_a_model(data):
    from conformance.testbed import onnx_wire

    with pytest.raises(onnx_wire.NotAModel):
        onnx_wire.read_graph(data)


# --- the cache -----------------------------------------------------------------------------


def test_cache_writes_a_file_named_recipe_dtype_shape_hash(tmp_path):
    cache = ModelCache(tmp_path)
    data, path = cache.get("identity", FLOAT32, (3, 5))
    assert path is not None and path.parent == tmp_path
    assert re.fullmatch(r"identity-float32-3x5-[0-9a-f]{16}-[0-9a-f]{16}\.onnx", path.name), path.name
    assert path.name.endswith(f"-{hashlib.sha256(data).hexdigest()[:16]}.onnx")  # the name says what the bytes hash to
    assert path.read_bytes() == data
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left behind
    assert onnx.load_from_string(data).graph.node[0].op_type == "Identity"


def test_cache_names_a_scalar_shape_scalar(tmp_path):
    _, path = ModelCache(tmp_path).get("identity", FLOAT32, ())
    assert path.name.startswith("identity-float32-scalar-")


def test_cache_without_a_directory_keeps_models_in_memory():
    data, path = ModelCache().get("add", FLOAT32, SHAPE)
    assert path is None and onnx.load_from_string(data).graph.node[0].op_type == "Add"


def test_cache_does_not_rebuild_within_one_cache(monkeypatch):
    cache = ModelCache()  # no folder: the second get can only come from the in-memory store
    first = cache.get("add", FLOAT32, SHAPE)
    monkeypatch.setattr(models, "build", lambda *a: pytest.fail("rebuilt a cached model"))
    assert cache.get("add", FLOAT32, SHAPE) == first


def test_a_new_cache_reuses_the_file_on_disk_and_leaves_its_time_alone(tmp_path, monkeypatch):
    data, path = ModelCache(tmp_path).get("add", FLOAT32, SHAPE)
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    monkeypatch.setattr(models, "build", lambda *a: pytest.fail("rebuilt a model that is on disk"))
    again, same = ModelCache(tmp_path).get("add", FLOAT32, SHAPE)
    assert (again, same) == (data, path)
    assert path.stat().st_mtime_ns == 1_000_000_000 and path.read_bytes() == data  # read, neither rewritten nor touched


def test_the_caches_of_a_run_record_each_model_they_hand_out_once_built_or_read(tmp_path):
    record = tmp_path / runfolder.MODELS_USED
    first = ModelCache(tmp_path / "models", record=record)
    _, built = first.get("add", FLOAT32, SHAPE)
    first.get("add", FLOAT32, SHAPE)
    _, read = ModelCache(tmp_path / "models", record=record).get("add", FLOAT32, SHAPE)  # another worker of the run, reading it
    _, other = ModelCache(tmp_path / "models", record=record).get("identity", FLOAT32, SHAPE)
    assert read == built and record.read_text().splitlines() == [built.name, built.name, other.name]
    ModelCache(tmp_path / "in-memory", record=None).get("relu", FLOAT32, SHAPE)  # no record: nothing written anywhere
    assert record.read_text().splitlines() == [built.name, built.name, other.name]


def test_a_runs_models_are_those_its_record_lists_not_every_model_in_the_shared_folder(tmp_path):
    folder = tmp_path / "reports"
    _, earlier = ModelCache(folder / "models").get("add", FLOAT32, SHAPE)  # an earlier run's, left in the shared folder
    _, used = ModelCache(folder / "models", record=folder / runfolder.MODELS_USED).get("identity", FLOAT32, SHAPE)
    assert runfolder.run_files(folder) == [f"models/{used.name}"]
    (folder / runfolder.MODELS_USED).write_text(f"{used.name}\n../secret.onnx\nplanted.onnx\n")  # names of no model file of the folder
    assert runfolder.run_files(folder) == [f"models/{used.name}"]
    (folder / runfolder.MODELS_USED).unlink()  # a folder of a kit that kept no record: every model there
    assert runfolder.run_files(folder) == sorted([f"models/{used.name}", f"models/{earlier.name}"])
    (folder / runfolder.MODELS_USED).symlink_to(folder / "models" / used.name)  # a planted link: no model is known to be the run's
    assert runfolder.run_files(folder) == []


def test_different_dtypes_and_shapes_are_different_files(tmp_path):
    cache = ModelCache(tmp_path)
    paths = {cache.get("identity", tensors.DTYPES[d], s)[1] for d in ("float32", "int64") for s in ((2,), (3,))}
    assert len(paths) == 4


def test_the_hash_changes_when_the_recipe_changes():
    cache = ModelCache(recipes=RECIPES)
    recipe = RECIPES["identity"]
    changed = dataclasses.replace(recipe, nodes=({"op": "Relu", "inputs": ["x"], "outputs": ["y"]},))
    assert cache.key_hash(recipe, FLOAT32, SHAPE) == cache.key_hash(recipe, FLOAT32, SHAPE)
    assert cache.key_hash(recipe, FLOAT32, SHAPE) != cache.key_hash(changed, FLOAT32, SHAPE)
    assert cache.key_hash(recipe, FLOAT32, SHAPE) != cache.key_hash(recipe, tensors.DTYPES["int32"], SHAPE)
    assert cache.key_hash(recipe, FLOAT32, SHAPE) != cache.key_hash(recipe, FLOAT32, (3, 2))


def test_a_changed_recipe_file_gives_a_new_model_file(tmp_path):
    recipes_file = tmp_path / "recipes.yaml"
    recipes_file.write_text("r:\n  summary: one\n  inputs: [x]\n  outputs: [y]\n  nodes:\n    - {op: Identity, inputs: [x], outputs: [y]}\n")
    _, before = ModelCache(tmp_path / "m", models.load_recipes(recipes_file)).get("r", FLOAT32, SHAPE)
    recipes_file.write_text(recipes_file.read_text().replace("Identity", "Relu"))
    data, after = ModelCache(tmp_path / "m", models.load_recipes(recipes_file)).get("r", FLOAT32, SHAPE)
    assert before != after and before.exists() and after.exists()
    assert onnx.load_from_string(data).graph.node[0].op_type == "Relu"


def test_two_writers_of_the_same_model_do_not_collide(tmp_path, monkeypatch):
    """Cache B builds and stores the same model while cache A is about to rename its temporary
    file into place (two workers sharing a models folder under pytest -n 2)."""
    second = ModelCache(tmp_path)
    real_replace = os.replace
    interleaved = []

    def replace(source, destination, *args, **kwargs):
        if not interleaved:
            interleaved.append(source)
            second.get("identity", FLOAT32, SHAPE)  # the other worker, at the worst moment
        return real_replace(source, destination, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    data, path = ModelCache(tmp_path).get("identity", FLOAT32, SHAPE)
    assert interleaved, "the cache no longer renames a temporary file into place; rewrite this test"
    assert path.read_bytes() == data == second.get("identity", FLOAT32, SHAPE)[0]
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


# --- nothing on disk is trusted ------------------------------------------------------------


@pytest.mark.parametrize("planted", ["garbage", "truncated", "another model"])
def test_a_model_file_that_is_not_its_recipes_model_is_rebuilt(tmp_path, planted):
    """Garbage, half a file, or another model copied under a model's own name: a new cache
    (the next run) does not use it; it rebuilds the model and leaves only the right file."""
    data, path = ModelCache(tmp_path).get("add", FLOAT32, SHAPE)
    other, _ = ModelCache(tmp_path).get("identity", FLOAT32, SHAPE)
    path.write_bytes({"garbage": b"not a model", "truncated": data[: len(data) // 2], "another model": other}[planted])
    again, same = ModelCache(tmp_path).get("add", FLOAT32, SHAPE)
    assert (again, same) == (data, path)
    assert path.read_bytes() == data


def test_a_stale_file_of_the_same_recipe_and_key_is_removed(tmp_path):
    data, path = ModelCache(tmp_path).get("add", FLOAT32, SHAPE)
    stale = path.with_name(path.name.rsplit("-", 1)[0] + "-" + "0" * 16 + ".onnx")
    stale.write_bytes(b"whatever was there")
    path.unlink()
    assert ModelCache(tmp_path).get("add", FLOAT32, SHAPE) == (data, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_model_names_round_trip_and_refuse_what_the_kit_does_not_write():
    name = models.ModelName("add_relu", "float32", "7x13", "0123456789abcdef", "fedcba9876543210")
    assert models.ModelName.parse(name.file_name()) == name
    for other in ("add.onnx", "add-float32-7x13-0123456789abcdef.onnx", "a-b-c-0123456789abcdef-XYZ.onnx", f"{name.file_name()}.bak"):
        assert models.ModelName.parse(other) is None, other


def test_recipe_mismatch_checks_a_file_against_its_name_and_its_recipe(tmp_path):
    data, path = ModelCache(tmp_path).get("add", FLOAT32, SHAPE)
    other, _ = ModelCache(tmp_path).get("identity", FLOAT32, SHAPE)
    assert models.recipe_mismatch(path.name, data, RECIPES) == ""
    assert "are not the model its name says" in models.recipe_mismatch(path.name, other, RECIPES)
    forged = path.name.rsplit("-", 1)[0] + f"-{models.content_digest(other)}.onnx"  # renamed to the bytes it holds
    assert models.recipe_mismatch(forged, other, RECIPES) == "it is not the model recipe 'add' makes for float32 2x3"
    assert models.recipe_mismatch("planted.onnx", data, RECIPES).startswith("not a model file this kit writes")


def test_a_run_after_garbage_was_planted_under_its_models_names_rebuilds_them(tmp_path):
    """The issue's case: garbage under reports/models/ with a model's name made the CPU EP
    non_conformant. The next run rebuilds the model and is conformant again."""
    from conftest import conformance_run

    first = conformance_run(tmp_path, "--ep=cpu", "-k", "nodes-on-ep")
    planted = sorted((first.reports / "models").glob("*.onnx"))
    for path in planted:
        path.write_bytes(b"garbage")
    again = conformance_run(tmp_path, "--ep=cpu", "-k", "nodes-on-ep")
    assert again.report["verdict"] == first.report["verdict"] == "conformant", again.report["verdict_reasons"]
    assert planted and all(models.ModelName.parse(p.name).holds(p.read_bytes()) for p in planted)
