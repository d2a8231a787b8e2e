"""ONNX models as bytes, written and read without the onnx package: the few messages of onnx.proto a
recipe needs (a model, its graph, nodes, typed values and initializers) in protobuf's wire format,
and what a check reads of a model onnxruntime wrote (its graph's nodes, inputs and outputs).

Why not onnx.helper: importing onnx imports ml_dtypes, and ml_dtypes 0.7.0 takes 0.9 s to import
on numpy 2.4 (0.6.0 took 6 ms; measured on the 2-core development machine), which a run's first
worker paid before its first check (and its fork server beside it): a quarter of a CPU-EP run's
wall time (3.9 s, 3.0 s without it). The bytes are the ones
`models.build(...).SerializeToString()` gives (tests/test_models.py compares them for every
recipe and element type), so a model file's name, which hashes its bytes, is the same either way.
What onnx.checker would refuse (an operator that does not take the element type) is known from
`onnx_types.TAKES`, generated from onnx.defs; a recipe with an operator not in it is built with
onnx (models.serialized).

onnx.proto is proto2: a field that is set is written even when it holds its default, repeated
numbers are not packed, and fields are written in the order of their numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

from conformance.errors import KitError

# Field numbers, from onnx.proto.
MODEL_IR_VERSION, MODEL_PRODUCER, MODEL_GRAPH, MODEL_OPSET = 1, 2, 7, 8
OPSET_DOMAIN, OPSET_VERSION = 1, 2
GRAPH_NODE, GRAPH_NAME, GRAPH_INITIALIZER, GRAPH_INPUT, GRAPH_OUTPUT = 1, 2, 5, 11, 12
NODE_INPUT, NODE_OUTPUT, NODE_OP_TYPE = 1, 2, 4
VALUE_NAME, VALUE_TYPE = 1, 2
TYPE_TENSOR = 1
TENSOR_TYPE_ELEM, TENSOR_TYPE_SHAPE = 1, 2
SHAPE_DIM, DIM_VALUE = 1, 1
TENSOR_DIMS, TENSOR_DATA_TYPE, TENSOR_STRING_DATA, TENSOR_NAME, TENSOR_RAW_DATA = 1, 2, 6, 8, 9

_VARINT, _BYTES = 0, 2


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # an int64 below zero: ten bytes of two's complement
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def number(field: int, value: int) -> bytes:
    return _varint(field << 3 | _VARINT) + _varint(value)


def message(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | _BYTES) + _varint(len(payload)) + payload


def text(field: int, value: str) -> bytes:
    return message(field, value.encode("utf-8"))


def _each(field: int, values: Iterable[str]) -> bytes:
    return b"".join(text(field, value) for value in values)


def value_info(name: str, elem_type: int, shape: Iterable[int]) -> bytes:
    """onnx.helper.make_tensor_value_info(name, elem_type, list(shape))."""
    dims = b"".join(message(SHAPE_DIM, number(DIM_VALUE, size)) for size in shape)
    tensor_type = number(TENSOR_TYPE_ELEM, elem_type) + message(TENSOR_TYPE_SHAPE, dims)
    return text(VALUE_NAME, name) + message(VALUE_TYPE, message(TYPE_TENSOR, tensor_type))


def node(op_type: str, inputs: Iterable[str], outputs: Iterable[str]) -> bytes:
    """onnx.helper.make_node(op_type, inputs, outputs)."""
    return _each(NODE_INPUT, inputs) + _each(NODE_OUTPUT, outputs) + text(NODE_OP_TYPE, op_type)


def tensor(name: str, data_type: int, shape: Iterable[int], *, raw: bytes | None = None, strings: Iterable[bytes] = ()) -> bytes:
    """A TensorProto of `raw` bytes (numpy_helper.from_array, or raw_data set) or of `strings`
    (onnx.helper.make_tensor for a string tensor)."""
    out = b"".join(number(TENSOR_DIMS, size) for size in shape) + number(TENSOR_DATA_TYPE, data_type)
    out += b"".join(message(TENSOR_STRING_DATA, item) for item in strings)
    out += text(TENSOR_NAME, name)
    return out + (message(TENSOR_RAW_DATA, raw) if raw is not None else b"")


def model(nodes: Iterable[bytes], graph_name: str, inputs: Iterable[bytes], outputs: Iterable[bytes], initializers: Iterable[bytes], *,
          ir_version: int, opset: int, producer: str | None = None) -> bytes:
    """onnx.helper.make_model(make_graph(nodes, graph_name, inputs, outputs, initializer=...),
    opset_imports=[make_opsetid("", opset)], producer_name=producer), its ir_version set; no
    producer_name where `producer` is None."""
    graph = (b"".join(message(GRAPH_NODE, n) for n in nodes) + text(GRAPH_NAME, graph_name)
             + b"".join(message(GRAPH_INITIALIZER, i) for i in initializers)
             + b"".join(message(GRAPH_INPUT, i) for i in inputs) + b"".join(message(GRAPH_OUTPUT, o) for o in outputs))
    opset_id = text(OPSET_DOMAIN, "") + number(OPSET_VERSION, opset)
    named = text(MODEL_PRODUCER, producer) if producer is not None else b""
    return number(MODEL_IR_VERSION, ir_version) + named + message(MODEL_GRAPH, graph) + message(MODEL_OPSET, opset_id)


# --- reading: what a check reads of a model onnxruntime wrote (an EPContext model) -----------

NODE_ATTRIBUTE, ATTRIBUTE_NAME, ATTRIBUTE_STRING = 5, 1, 4
_FIXED = {1: 8, 5: 4}  # wire types of 64-bit and 32-bit values: their sizes


class NotAModel(KitError):
    """Bytes that are not an ONNX model as protobuf's wire format lays one out."""


@dataclass(frozen=True)
class Node:
    op_type: str
    strings: dict[str, bytes]  # its attributes that hold one string (AttributeProto.s), by name


@dataclass(frozen=True)
class Graph:
    nodes: tuple[Node, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def read_graph(data: bytes) -> Graph:
    """The main graph of the model `data`: its nodes' operators and string attributes, and the
    names of its inputs and outputs (what onnx.load(...).graph gives of them). NotAModel for
    bytes that do not hold one; an embedded context blob is not copied."""
    view = memoryview(data)
    graphs = [value for field, value in _fields(view) if field == MODEL_GRAPH and isinstance(value, memoryview)]
    if not graphs:
        raise NotAModel("it holds no graph")
    nodes: list[Node] = []
    inputs: list[str] = []
    outputs: list[str] = []
    for field, value in _fields(graphs[-1]):  # protobuf: the last of a field written twice wins
        if not isinstance(value, memoryview):
            continue
        if field == GRAPH_NODE:
            nodes.append(_node(value))
        elif field in (GRAPH_INPUT, GRAPH_OUTPUT):
            (inputs if field == GRAPH_INPUT else outputs).append(_text_of(value, VALUE_NAME))
    return Graph(tuple(nodes), tuple(inputs), tuple(outputs))


def _node(data: memoryview) -> Node:
    op_type, strings = "", dict[str, bytes]()
    for field, value in _fields(data):
        if field == NODE_OP_TYPE and isinstance(value, memoryview):
            op_type = _decoded(value)
        elif field == NODE_ATTRIBUTE and isinstance(value, memoryview):
            name, string = _text_of(value, ATTRIBUTE_NAME), None
            for inner, item in _fields(value):
                if inner == ATTRIBUTE_STRING and isinstance(item, memoryview):
                    string = bytes(item)
            if string is not None:
                strings[name] = string
    return Node(op_type, strings)


def _text_of(data: memoryview, wanted: int) -> str:
    texts = [_decoded(value) for field, value in _fields(data) if field == wanted and isinstance(value, memoryview)]
    return texts[-1] if texts else ""


def _decoded(value: memoryview) -> str:
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotAModel(f"a name is not UTF-8 text (byte {exc.start})") from None


def _fields(data: memoryview) -> Iterator[tuple[int, int | memoryview]]:
    """(field number, value) of each field of the message `data`: an int for a varint, the bytes
    (a view) of a length-delimited field, a fixed-size value, as bytes too."""
    position, end = 0, len(data)
    while position < end:
        key, position = _read_varint(data, position)
        field, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, position = _read_varint(data, position)
            yield field, value
            continue
        if wire == _BYTES:
            size, position = _read_varint(data, position)
        elif wire in _FIXED:
            size = _FIXED[wire]
        else:
            raise NotAModel(f"field {field} has wire type {wire}, which no ONNX message uses")
        if position + size > end:
            raise NotAModel(f"field {field} runs past the end of its message (truncated?)")
        yield field, data[position:position + size]
        position += size


def _read_varint(data: memoryview, position: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if position >= len(data) or shift > 63:
            raise NotAModel("a number runs past the end of its message (truncated?)")
        byte = data[position]
        value |= (byte & 0x7F) << shift
        position, shift = position + 1, shift + 7
        if not byte & 0x80:
            return value, position
