"""Generated from onnx.defs (onnx 1.23) by tests/test_models.py, which fails with the table to
paste here when onnx says otherwise; do not edit. For each operator of the kit's model recipes at
the kit's opset (21): the name of its first input and the element types its type constraint
takes, as the kit names them (tensors.DTYPES). onnx_wire writes a recipe's model where each of
its operators takes the element type, and models.serialized refuses it where one does not, as
onnx.checker would, without importing onnx."""

OPSET = 21

TAKES = {
    'Add': ('A', frozenset({
        'bfloat16', 'float16', 'float32', 'float64', 'int16', 'int32', 'int64', 'int8', 'uint16', 'uint32', 'uint64', 'uint8'})),
    'Identity': ('input', frozenset({
        'bfloat16', 'bool', 'float16', 'float32', 'float64', 'float8e4m3fn', 'float8e4m3fnuz', 'float8e5m2', 'float8e5m2fnuz', 'int16', 'int32',
        'int4', 'int64', 'int8', 'string', 'uint16', 'uint32', 'uint4', 'uint64', 'uint8'})),
    'Neg': ('X', frozenset({
        'bfloat16', 'float16', 'float32', 'float64', 'int16', 'int32', 'int64', 'int8'})),
    'Relu': ('X', frozenset({
        'bfloat16', 'float16', 'float32', 'float64', 'int16', 'int32', 'int64', 'int8'})),
    'Sub': ('A', frozenset({
        'bfloat16', 'float16', 'float32', 'float64', 'int16', 'int32', 'int64', 'int8', 'uint16', 'uint32', 'uint64', 'uint8'})),
}
