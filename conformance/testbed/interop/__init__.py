"""Imported memory under test: what the import family (conformance/checks/imported_memory.py) stands on.

- `capi`: onnxruntime's C API through ctypes on the wheel's libonnxruntime.so (the interop API
  exists only in C); `slots` is its slot table, generated from the header by `headers`.
- `vulkan`: a producer of exportable memory (VK_MEMORY_OPAQUE_FD) through ctypes on libvulkan;
  `host`: a producer of page-aligned host memory (HOST_ALLOCATION); `mapping`: what both share.
- `handed`: one native handle handed to one import, and whether the importer took it.
- `rig`: what one import check works with (the C environment, the EP device, its importer, the
  producer), made once per worker.
- `probe`: the import answer of the copy matrix (handle types, memory type, working copies).

Nothing here imports pytest or the plugin; `capi`, `mapping`, `vulkan` and `host` import nothing
of the kit but `mapping` (the import family's reproducers carry the producers' source).
"""
