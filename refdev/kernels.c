/* The OrtEp: GetCapability (narrow mode), Compile, the Add and Relu kernels, the placement log. */
#include "refdev.h"

/* ------------------------------------------------------------------------------------------ */
/* The EP: GetCapability, Compile, kernels                                                      */
/* ------------------------------------------------------------------------------------------ */

#define RETURN_IF_STATUS(expr)       \
  do {                               \
    OrtStatus* st_ = (expr);         \
    if (st_ != NULL) return st_;     \
  } while (0)

typedef enum { OP_ADD = 1, OP_RELU = 2 } refdev_op;

typedef struct refdev_compute_info {
  OrtNodeComputeInfo base;
  refdev_ep* ep;
  refdev_op op;
  char name[256];
} refdev_compute_info;

static const char* ORT_API_CALL ep_get_name(const OrtEp* this_ptr) {
  (void)this_ptr;
  return REFDEV_EP_NAME;
}

#define REFDEV_MAX_RANK 16

/* Reads a value info's tensor element type and static shape. rank = -1: not a tensor or no
 * shape. Dims < 0 are dynamic. */
static OrtStatus* value_info_tensor(const OrtValueInfo* vi, ONNXTensorElementDataType* elem, int* rank,
                                    int64_t dims[REFDEV_MAX_RANK]) {
  *elem = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  *rank = -1;
  if (vi == NULL) return NULL;
  const OrtTypeInfo* ti = NULL;
  RETURN_IF_STATUS(g_ort->GetValueInfoTypeInfo(vi, &ti));
  if (ti == NULL) return NULL;
  const OrtTensorTypeAndShapeInfo* tsi = NULL;
  RETURN_IF_STATUS(g_ort->CastTypeInfoToTensorInfo(ti, &tsi));
  if (tsi == NULL) return NULL;
  RETURN_IF_STATUS(g_ort->GetTensorElementType(tsi, elem));
  size_t n = 0;
  RETURN_IF_STATUS(g_ort->GetDimensionsCount(tsi, &n));
  if (n > REFDEV_MAX_RANK) return NULL;
  RETURN_IF_STATUS(g_ort->GetDimensions(tsi, dims, n));
  *rank = (int)n;
  return NULL;
}

/* Narrow mode: ORT_REFDEV_OPS names the ops the EP takes, comma-separated (e.g. "Relu"), as an
 * NPU takes only some operators; unset or empty, it takes every op it implements. Read on each
 * GetCapability, so that a session made after the variable changes sees the new set. */
#define REFDEV_OPS_ENV "ORT_REFDEV_OPS"

static bool op_enabled(const char* op) {
  const char* list = getenv(REFDEV_OPS_ENV);
  if (list == NULL || list[0] == '\0') return true;
  size_t len = strlen(op);
  for (const char* p = list; *p != '\0';) {
    const char* end = strchr(p, ',');
    size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
    if (n == len && strncmp(p, op, len) == 0) return true;
    if (end == NULL) break;
    p = end + 1;
  }
  return false;
}

/* Decides whether a node is one the EP runs. */
static OrtStatus* node_supported(const OrtNode* node, bool* ok) {
  *ok = false;
  const char* op = NULL;
  const char* domain = NULL;
  RETURN_IF_STATUS(g_ort->Node_GetOperatorType(node, &op));
  RETURN_IF_STATUS(g_ort->Node_GetDomain(node, &domain));
  if (domain != NULL && domain[0] != '\0' && strcmp(domain, "ai.onnx") != 0) return NULL;
  size_t want_inputs;
  if (strcmp(op, "Add") == 0) {
    want_inputs = 2;
  } else if (strcmp(op, "Relu") == 0) {
    want_inputs = 1;
  } else {
    return NULL;
  }
  if (!op_enabled(op)) return NULL;
  size_t nin = 0, nout = 0;
  RETURN_IF_STATUS(g_ort->Node_GetNumInputs(node, &nin));
  RETURN_IF_STATUS(g_ort->Node_GetNumOutputs(node, &nout));
  if (nin != want_inputs || nout != 1) return NULL;

  const OrtValueInfo* ins[2] = {NULL, NULL};
  const OrtValueInfo* outs[1] = {NULL};
  RETURN_IF_STATUS(g_ort->Node_GetInputs(node, ins, nin));
  RETURN_IF_STATUS(g_ort->Node_GetOutputs(node, outs, nout));

  ONNXTensorElementDataType et[3];
  int rank[3];
  int64_t dims[3][REFDEV_MAX_RANK];
  size_t nvals = nin + 1;
  for (size_t i = 0; i < nin; ++i) RETURN_IF_STATUS(value_info_tensor(ins[i], &et[i], &rank[i], dims[i]));
  RETURN_IF_STATUS(value_info_tensor(outs[0], &et[nin], &rank[nin], dims[nin]));
  for (size_t i = 0; i < nvals; ++i) {
    if (et[i] != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) return NULL;
  }
  if (want_inputs == 2) {
    /* Add: equal, fully static shapes only (no broadcasting) */
    if (rank[0] < 0 || rank[0] != rank[1]) return NULL;
    for (int d = 0; d < rank[0]; ++d) {
      if (dims[0][d] < 0 || dims[0][d] != dims[1][d]) return NULL;
    }
  }
  *ok = true;
  return NULL;
}

static OrtStatus* ORT_API_CALL ep_get_capability(OrtEp* this_ptr, const OrtGraph* graph,
                                                 OrtEpGraphSupportInfo* graph_support_info) {
  (void)this_ptr;
  if (refdev_current_fault() == FAULT_CLAIM_NOTHING) return NULL;
  size_t num_nodes = 0;
  RETURN_IF_STATUS(g_ort->Graph_GetNumNodes(graph, &num_nodes));
  if (num_nodes == 0) return NULL;
  const OrtNode** nodes = (const OrtNode**)calloc(num_nodes, sizeof *nodes);
  if (nodes == NULL) return refdev_make_status(ORT_FAIL, "RefDev: out of memory");
  OrtStatus* st = g_ort->Graph_GetNodes(graph, nodes, num_nodes);
  OrtNodeFusionOptions opts;
  memset(&opts, 0, sizeof opts);
  opts.ort_version_supported = ORT_API_VERSION;
  opts.drop_constant_initializers = false;
  for (size_t i = 0; i < num_nodes && st == NULL; ++i) {
    bool ok = false;
    st = node_supported(nodes[i], &ok);
    if (st == NULL && ok) {
      /* one compiled partition per node: every value between two RefDev nodes stays on RefDev */
      st = g_ep->EpGraphSupportInfo_AddNodesToFuse(graph_support_info, &nodes[i], 1, &opts);
    }
  }
  free(nodes);
  return st;
}

static OrtStatus* ORT_API_CALL ci_create_state(OrtNodeComputeInfo* this_ptr, OrtNodeComputeContext* ctx,
                                               void** state) {
  (void)ctx;
  *state = this_ptr;
  return NULL;
}

static void ORT_API_CALL ci_release_state(OrtNodeComputeInfo* this_ptr, void* state) {
  (void)this_ptr;
  (void)state;
}

/* A kernel input or output: shape, element count, and a host copy of the true values. */
typedef struct tensor_view {
  size_t count;
  size_t rank;
  int64_t dims[REFDEV_MAX_RANK];
  mem_kind kind;
} tensor_view;

static OrtStatus* view_of(refdev_factory* f, const OrtValue* v, tensor_view* tv, const char* what) {
  OrtTensorTypeAndShapeInfo* tsi = NULL;
  RETURN_IF_STATUS(g_ort->GetTensorTypeAndShape(v, &tsi));
  ONNXTensorElementDataType et = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  OrtStatus* st = g_ort->GetTensorElementType(tsi, &et);
  if (st == NULL) st = g_ort->GetTensorShapeElementCount(tsi, &tv->count);
  if (st == NULL) st = g_ort->GetDimensionsCount(tsi, &tv->rank);
  if (st == NULL && tv->rank > REFDEV_MAX_RANK) st = refdev_make_status(ORT_EP_FAIL, "RefDev: %s has rank > 16", what);
  if (st == NULL) st = g_ort->GetDimensions(tsi, tv->dims, tv->rank);
  g_ort->ReleaseTensorTypeAndShapeInfo(tsi);
  if (st != NULL) return st;
  if (et != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
    return refdev_make_status(ORT_EP_FAIL, "RefDev: %s is not float32 (element type %d)", what, (int)et);
  }
  tv->kind = refdev_classify_device(f, g_ep->Value_GetMemoryDevice(v));
  if (tv->kind == MEM_UNKNOWN) {
    return refdev_make_status(ORT_EP_FAIL, "RefDev: %s lives on memory the EP cannot read", what);
  }
  return NULL;
}

/* race-kernel: the kernels' results pass through one static scratch buffer with no lock, as
 * in a kernel library with one global workspace: window by window, the output's bytes are
 * written into the scratch in RACE_KERNEL_CHUNKS chunks, with refdev_race_pause after each,
 * and read back from there. A run alone is right; two kernels that overlap in time write over
 * each other's results while the other sleeps, so one of them returns the other's values. */
#define RACE_KERNEL_SCRATCH_BYTES ((size_t)256 * 1024)
#define RACE_KERNEL_CHUNKS 2
static unsigned char g_race_kernel_scratch[RACE_KERNEL_SCRATCH_BYTES];

static void race_kernel_through_scratch(unsigned char* out, size_t bytes) {
  for (size_t offset = 0; offset < bytes; offset += RACE_KERNEL_SCRATCH_BYTES) {
    size_t len = bytes - offset < RACE_KERNEL_SCRATCH_BYTES ? bytes - offset : RACE_KERNEL_SCRATCH_BYTES;
    size_t chunk = (len + RACE_KERNEL_CHUNKS - 1) / RACE_KERNEL_CHUNKS;
    for (size_t c = 0; c < len; c += chunk) {
      memcpy(g_race_kernel_scratch + c, out + offset + c, len - c < chunk ? len - c : chunk);
      refdev_race_pause();
    }
    memcpy(out + offset, g_race_kernel_scratch, len);
  }
}

/* Whether a kernel reads and writes memory of `kind` in the device's scrambled format.
 * onnxruntime hands the kernels HOST_ACCESSIBLE inputs and bound outputs as they are (no copy);
 * host-accessible-as-device treats them as device memory, so the EP misreads what the CPU wrote
 * there and leaves scrambled results where the CPU reads them. Copies stay right. */
static bool kernel_sees_device_format(mem_kind kind, const void* p) {
  refdev_fault fault = refdev_current_fault();
  if (kind == MEM_DEVICE) return !refdev_reg_is_plain(p, fault == FAULT_IMPORT_MISREAD);
  if (kind == MEM_HOST && fault == FAULT_IMPORT_MISREAD && refdev_reg_is_plain(p, false)) return true;
  return kind == MEM_HOST && fault == FAULT_HOST_ACCESSIBLE_AS_DEVICE;
}

/* Copies true float values out of (possibly scrambled) memory; `scrambled` is
 * kernel_sees_device_format's answer, taken at the call (the arithmetic may run later, on a
 * stream's thread, when the registry and the environment may have changed). */
static void decode(const void* src, bool scrambled, float* out, size_t count) {
  size_t bytes = count * sizeof(float);
  memcpy(out, src, bytes);
  if (scrambled) {
    unsigned char* b = (unsigned char*)out;
    for (size_t i = 0; i < bytes; ++i) b[i] ^= (unsigned char)REFDEV_KEY;
  }
}

static void encode(const float* in, bool scrambled, void* dst, size_t count) {
  size_t bytes = count * sizeof(float);
  memcpy(dst, in, bytes);
  if (scrambled) {
    unsigned char* b = (unsigned char*)dst;
    for (size_t i = 0; i < bytes; ++i) b[i] ^= (unsigned char)REFDEV_KEY;
  }
  /* every kernel's output is written here, and only here */
  if (refdev_current_fault() == FAULT_RACE_KERNEL) race_kernel_through_scratch((unsigned char*)dst, bytes);
}

/* A kernel's arithmetic, with everything read from onnxruntime at the call: it runs at once, or
 * on the kernel's stream (refdev_async_compute), and frees itself. */
typedef struct kernel_job {
  refdev_op op;
  bool wrong_compute;
  size_t n;
  const void* in[2]; /* NULL: already read at the call (an input in CPU memory) */
  bool in_scrambled[2];
  void* out;
  bool out_scrambled;
  float* a;
  float* b;
  float* r;
} kernel_job;

static void kernel_job_free(kernel_job* j) {
  free(j->a);
  free(j->b);
  free(j->r);
  free(j);
}

static void kernel_arith(void* arg, bool abandoned) {
  (void)abandoned; /* a kernel writes only memory the EP allocated or imported, whose release waits for it */
  kernel_job* j = (kernel_job*)arg;
  size_t n = j->n;
  float* a = j->a;
  float* b = j->b;
  float* r = j->r;
  if (j->in[0] != NULL) decode(j->in[0], j->in_scrambled[0], a, n);
  if (j->op == OP_ADD) {
    if (j->in[1] != NULL) decode(j->in[1], j->in_scrambled[1], b, n);
    for (size_t i = 0; i < n; ++i) r[i] = a[i] + b[i];
  } else if (j->wrong_compute) {
    memcpy(r, a, n * sizeof(float)); /* wrong on purpose: Relu returns its input */
  } else {
    for (size_t i = 0; i < n; ++i) r[i] = a[i] > 0.0f ? a[i] : (a[i] != a[i] ? a[i] : 0.0f);
  }
  encode(r, j->out_scrambled, j->out, n);
  kernel_job_free(j);
}

/* Placement record: with ORT_REFDEV_INPUT_LOG naming a file, every kernel call
 * appends one line per input, `<node> <input index> <device type> <memory type> <vendor id>`,
 * the memory device onnxruntime handed the kernel (Value_GetMemoryDevice). A file, because the
 * kit's check runs in the process that loaded the library and reads it back after the run: no
 * change to the model (a custom op's output would be a node of its own, placed by onnxruntime
 * like any other) and no new API. The variable is read on every call, so a check sets it only
 * around its own run. misplaced-inputs records input 0 as plain CPU memory: what a kernel would
 * see had onnxruntime handed it CPU memory where the EP declared its DEFAULT memory. */

static void log_input_placement(const char* node, size_t index, const OrtValue* v) {
  const char* path = getenv(REFDEV_INPUT_LOG_ENV);
  if (path == NULL || path[0] == '\0') return;
  const OrtMemoryDevice* d = g_ep->Value_GetMemoryDevice(v);
  const char* type = "unknown";
  const char* mtype = "unknown";
  uint32_t vendor = 0;
  if (d != NULL) {
    switch (g_ep->MemoryDevice_GetDeviceType(d)) {
      case OrtMemoryInfoDeviceType_CPU: type = "cpu"; break;
      case OrtMemoryInfoDeviceType_GPU: type = "gpu"; break;
      case OrtMemoryInfoDeviceType_NPU: type = "npu"; break;
      case OrtMemoryInfoDeviceType_FPGA: type = "fpga"; break;
      default: break;
    }
    mtype = g_ep->MemoryDevice_GetMemoryType(d) == OrtDeviceMemoryType_HOST_ACCESSIBLE ? "host_accessible" : "default";
    vendor = g_ep->MemoryDevice_GetVendorId(d);
  }
  if (index == 0 && refdev_current_fault() == FAULT_MISPLACED_INPUTS) {
    type = "cpu";
    mtype = "default";
    vendor = 0;
  }
  FILE* log = fopen(path, "a");
  if (log == NULL) return;
  fprintf(log, "%s %zu %s %s 0x%X\n", node, index, type, mtype, (unsigned)vendor);
  fclose(log);
}

static OrtStatus* ORT_API_CALL ci_compute(OrtNodeComputeInfo* this_ptr, void* state, OrtKernelContext* kctx) {
  (void)state;
  refdev_compute_info* ci = (refdev_compute_info*)this_ptr;
  refdev_factory* f = ci->ep->factory;
  /* kernel-fails: ORT_EP_FAIL is the status Python's InferenceSession.run answers by rerunning
   * the model on the CPU EP, unless the session's fallback is disabled. */
  if (refdev_current_fault() == FAULT_KERNEL_FAILS) {
    return refdev_make_status(ORT_EP_FAIL, "RefDev %s: fault 'kernel-fails': the kernel fails on purpose", ci->name);
  }
  size_t nin = 0, nout = 0;
  RETURN_IF_STATUS(g_ort->KernelContext_GetInputCount(kctx, &nin));
  RETURN_IF_STATUS(g_ort->KernelContext_GetOutputCount(kctx, &nout));
  size_t want = ci->op == OP_ADD ? 2 : 1;
  if (nin != want || nout != 1) {
    return refdev_make_status(ORT_EP_FAIL, "RefDev %s: expected %zu inputs and 1 output, got %zu and %zu", ci->name, want,
                              nin, nout);
  }
  const OrtValue* in[2] = {NULL, NULL};
  tensor_view tv[2];
  for (size_t i = 0; i < nin; ++i) {
    RETURN_IF_STATUS(g_ort->KernelContext_GetInput(kctx, i, &in[i]));
    if (in[i] == NULL) return refdev_make_status(ORT_EP_FAIL, "RefDev %s: missing input %zu", ci->name, i);
    RETURN_IF_STATUS(view_of(f, in[i], &tv[i], "input"));
    log_input_placement(ci->name, i, in[i]);
    /* empty-fails: the node was taken (GetCapability claims empty shapes as any other), and its
     * kernel fails on an input with a zero-sized dimension instead of giving the empty output. */
    if (tv[i].count == 0 && refdev_current_fault() == FAULT_EMPTY_FAILS) {
      return refdev_make_status(ORT_EP_FAIL, "RefDev %s: fault 'empty-fails': input %zu has no elements", ci->name, i);
    }
  }
  if (ci->op == OP_ADD) {
    bool same = tv[0].rank == tv[1].rank;
    for (size_t d = 0; same && d < tv[0].rank; ++d) same = tv[0].dims[d] == tv[1].dims[d];
    if (!same) return refdev_make_status(ORT_EP_FAIL, "RefDev %s: Add needs equal input shapes", ci->name);
  }

  OrtValue* out = NULL;
  RETURN_IF_STATUS(g_ort->KernelContext_GetOutput(kctx, 0, tv[0].dims, tv[0].rank, &out));
  tensor_view ov;
  RETURN_IF_STATUS(view_of(f, out, &ov, "output"));
  size_t n = tv[0].count;
  if (n == 0) return NULL;

  /* The output's shape and memory are settled at the call; the arithmetic runs on the stream
   * onnxruntime gave the kernel, or at once where it gave none. */
  kernel_job* j = (kernel_job*)calloc(1, sizeof *j);
  if (j == NULL) return refdev_make_status(ORT_FAIL, "RefDev: out of memory");
  j->op = ci->op;
  j->wrong_compute = ci->op == OP_RELU && refdev_current_fault() == FAULT_WRONG_COMPUTE;
  j->n = n;
  j->a = (float*)malloc(n * sizeof(float));
  j->b = ci->op == OP_ADD ? (float*)malloc(n * sizeof(float)) : NULL;
  j->r = (float*)malloc(n * sizeof(float));
  OrtStatus* st = NULL;
  void* stream = NULL;
  if (j->a == NULL || j->r == NULL || (ci->op == OP_ADD && j->b == NULL)) {
    st = refdev_make_status(ORT_FAIL, "RefDev: out of memory");
    goto fail;
  }
  for (size_t i = 0; i < nin; ++i) {
    if ((st = g_ort->GetTensorData(in[i], &j->in[i])) != NULL) goto fail;
    j->in_scrambled[i] = kernel_sees_device_format(tv[i].kind, j->in[i]);
    if (tv[i].kind == MEM_CPU) {
      /* onnxruntime hands a kernel CPU memory where a CPU node produced the value (README,
       * "onnxruntime behaviour worth knowing") and reuses it once Compute returns: read now, as a
       * device would upload it, not when the stream gets to the arithmetic */
      decode(j->in[i], j->in_scrambled[i], i == 0 ? j->a : j->b, n);
      j->in[i] = NULL;
    }
  }
  if ((st = g_ort->GetTensorMutableData(out, &j->out)) != NULL) goto fail;
  j->out_scrambled = kernel_sees_device_format(ov.kind, j->out);
  if ((st = g_ort->KernelContext_GetGPUComputeStream(kctx, &stream)) != NULL) goto fail;
  refdev_async_compute(stream, kernel_arith, j);
  return NULL;
fail:
  kernel_job_free(j);
  return st;
}

/* The EPContext node that stands for one compiled partition, where the session writes an EPContext
 * model (ep.context_enable=1; onnxruntime's EP-Context-Design): the fused node's name, inputs and
 * outputs; ep_cache_context holds what refdev would need to rebuild the partition (its operator),
 * embedded; `source` names the EP that made it, as the design asks, or what
 * ORT_REFDEV_EP_CONTEXT_SOURCE says (another name: a node some other EP would take for its own). */
#define REFDEV_CONTEXT_IO 8
static OrtStatus* ep_context_node(const OrtNode* fused, const char* op, OrtNode** out) {
  const OrtModelEditorApi* editor = g_ort->GetModelEditorApi();
  if (editor == NULL) return refdev_make_status(ORT_NOT_IMPLEMENTED, "RefDev Compile: no model editor API here to make an EPContext node");
  size_t ni = 0, no = 0;
  RETURN_IF_STATUS(g_ort->Node_GetNumInputs(fused, &ni));
  RETURN_IF_STATUS(g_ort->Node_GetNumOutputs(fused, &no));
  if (ni > REFDEV_CONTEXT_IO || no > REFDEV_CONTEXT_IO) {
    return refdev_make_status(ORT_EP_FAIL, "RefDev Compile: %zu inputs and %zu outputs are more than an EPContext node of refdev holds", ni, no);
  }
  const OrtValueInfo* values[REFDEV_CONTEXT_IO];
  const char* inputs[REFDEV_CONTEXT_IO];
  const char* outputs[REFDEV_CONTEXT_IO];
  RETURN_IF_STATUS(g_ort->Node_GetInputs(fused, values, ni));
  for (size_t k = 0; k < ni; ++k) {
    inputs[k] = "";
    if (values[k] != NULL) RETURN_IF_STATUS(g_ort->GetValueInfoName(values[k], &inputs[k]));
  }
  RETURN_IF_STATUS(g_ort->Node_GetOutputs(fused, values, no));
  for (size_t k = 0; k < no; ++k) {
    outputs[k] = "";
    if (values[k] != NULL) RETURN_IF_STATUS(g_ort->GetValueInfoName(values[k], &outputs[k]));
  }
  const char* name = NULL;
  RETURN_IF_STATUS(g_ort->Node_GetName(fused, &name));
  const char* source = getenv("ORT_REFDEV_EP_CONTEXT_SOURCE");
  if (source == NULL || source[0] == '\0') source = REFDEV_EP_NAME;
  int64_t one = 1; /* main_context, embed_mode */
  OrtOpAttr* attributes[4] = {NULL, NULL, NULL, NULL};
  OrtStatus* st = g_ort->CreateOpAttr("main_context", &one, 1, ORT_OP_ATTR_INT, &attributes[0]);
  if (st == NULL) st = g_ort->CreateOpAttr("embed_mode", &one, 1, ORT_OP_ATTR_INT, &attributes[1]);
  if (st == NULL) st = g_ort->CreateOpAttr("ep_cache_context", op, (int)strlen(op), ORT_OP_ATTR_STRING, &attributes[2]);
  if (st == NULL) st = g_ort->CreateOpAttr("source", source, (int)strlen(source), ORT_OP_ATTR_STRING, &attributes[3]);
  if (st == NULL) st = editor->CreateNode("EPContext", "com.microsoft", name != NULL ? name : op, inputs, ni, outputs, no, attributes, 4, out);
  for (size_t k = 0; k < 4; ++k) { /* CreateNode copies them */
    if (attributes[k] != NULL) g_ort->ReleaseOpAttr(attributes[k]);
  }
  return st;
}

static OrtStatus* ORT_API_CALL ep_compile(OrtEp* this_ptr, const OrtGraph** graphs, const OrtNode** fused_nodes,
                                          size_t count, OrtNodeComputeInfo** node_compute_infos,
                                          OrtNode** ep_context_nodes) {
  refdev_ep* ep = (refdev_ep*)this_ptr;
  for (size_t i = 0; i < count; ++i) node_compute_infos[i] = NULL;
  for (size_t i = 0; i < count; ++i) {
    size_t nn = 0;
    RETURN_IF_STATUS(g_ort->Graph_GetNumNodes(graphs[i], &nn));
    if (nn != 1) return refdev_make_status(ORT_EP_FAIL, "RefDev Compile: expected 1 node per partition, got %zu", nn);
    const OrtNode* node = NULL;
    RETURN_IF_STATUS(g_ort->Graph_GetNodes(graphs[i], &node, 1));
    const char* op = NULL;
    RETURN_IF_STATUS(g_ort->Node_GetOperatorType(node, &op));
    refdev_op kind;
    if (strcmp(op, "Add") == 0) {
      kind = OP_ADD;
    } else if (strcmp(op, "Relu") == 0) {
      kind = OP_RELU;
    } else {
      return refdev_make_status(ORT_EP_FAIL, "RefDev Compile: unsupported op %s", op);
    }
    refdev_compute_info* ci = (refdev_compute_info*)calloc(1, sizeof *ci);
    if (ci == NULL) return refdev_make_status(ORT_FAIL, "RefDev: out of memory");
    ci->base.ort_version_supported = ORT_API_VERSION;
    ci->base.CreateState = ci_create_state;
    ci->base.Compute = ci_compute;
    ci->base.ReleaseState = ci_release_state;
    ci->ep = ep;
    ci->op = kind;
    const char* fused_name = NULL;
    if (g_ort->Node_GetName(fused_nodes[i], &fused_name) == NULL && fused_name != NULL) {
      snprintf(ci->name, sizeof ci->name, "%s", fused_name);
    } else {
      snprintf(ci->name, sizeof ci->name, "%s", op);
    }
    node_compute_infos[i] = &ci->base;
    if (ep->context_model && ep_context_nodes != NULL) RETURN_IF_STATUS(ep_context_node(fused_nodes[i], op, &ep_context_nodes[i]));
  }
  return NULL;
}

static void ORT_API_CALL ep_release_node_compute_infos(OrtEp* this_ptr, OrtNodeComputeInfo** infos, size_t n) {
  (void)this_ptr;
  for (size_t i = 0; i < n; ++i) free(infos[i]);
}

static OrtStatus* ORT_API_CALL ep_get_preferred_data_layout(OrtEp* this_ptr, OrtEpDataLayout* layout) {
  (void)this_ptr;
  *layout = OrtEpDataLayout_NCHW;
  return NULL;
}

/* Whether the session's config entry `key` (a provider option: ep.<ep name in lower case>.<option>)
 * is `want`. */
static bool session_option_is(const OrtSessionOptions* so, const char* key, const char* want) {
  if (so == NULL) return false;
  int has = 0;
  OrtStatus* st = g_ort->HasSessionConfigEntry(so, key, &has);
  if (st != NULL) {
    g_ort->ReleaseStatus(st);
    return false;
  }
  if (!has) return false;
  char value[64];
  size_t size = sizeof value;
  st = g_ort->GetSessionConfigEntry(so, key, value, &size);
  if (st != NULL) {
    g_ort->ReleaseStatus(st);
    return false;
  }
  return strcmp(value, want) == 0;
}

OrtStatus* ORT_API_CALL refdev_factory_create_ep(OrtEpFactory* this_ptr, const OrtHardwareDevice* const* devices,
                                                 const OrtKeyValuePairs* const* ep_metadata, size_t num_devices,
                                                 const OrtSessionOptions* session_options, const OrtLogger* logger,
                                                 OrtEp** out) {
  refdev_factory* f = (refdev_factory*)this_ptr;
  (void)devices;
  *out = NULL;
  if (num_devices != 1) {
    return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev: expected to be selected for exactly one device, got %zu",
                              num_devices);
  }
  refdev_ep* ep = (refdev_ep*)calloc(1, sizeof *ep);
  if (ep == NULL) return refdev_make_status(ORT_FAIL, "RefDev: out of memory");
  ep->base.ort_version_supported = ORT_API_VERSION;
  ep->base.GetName = ep_get_name;
  ep->base.GetCapability = ep_get_capability;
  ep->base.Compile = ep_compile;
  ep->base.ReleaseNodeComputeInfos = ep_release_node_compute_infos;
  ep->base.GetPreferredDataLayout = ep_get_preferred_data_layout;
  /* CreateAllocator left NULL: onnxruntime then uses the factory's. The streams are the EP's
   * own, so that the EP can drain the session's streams at the end of a run (streams.c). */
  ep->base.CreateSyncStreamForDevice = refdev_ep_create_sync_stream;
  ep->base.OnRunEnd = refdev_ep_on_run_end;
#if ORT_API_VERSION >= 25
  ep->base.Sync = refdev_ep_sync;
#endif
  ep->factory = f;
  ep->logger = logger;
  const char* device_id = ep_metadata != NULL && ep_metadata[0] != NULL ? g_ort->GetKeyValue(ep_metadata[0], "refdev.device_id") : NULL;
  ep->device = device_id != NULL ? atoi(device_id) : REFDEV_DEVICE_ID;
  ep->async_option = session_option_is(session_options, "ep.refdevexecutionprovider.async", "1");
  ep->context_model = session_option_is(session_options, "ep.context_enable", "1");
  *out = &ep->base;
  return NULL;
}

void ORT_API_CALL refdev_factory_release_ep(OrtEpFactory* this_ptr, OrtEp* ep) {
  (void)this_ptr;
  free(ep);
}
