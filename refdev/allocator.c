/* The allocators of RefDev's memories (DEFAULT, and HOST_ACCESSIBLE where advertised). */
#include "refdev.h"

/* ------------------------------------------------------------------------------------------ */
/* Allocator                                                                                    */
/* ------------------------------------------------------------------------------------------ */

typedef struct refdev_allocator {
  OrtAllocator base;
  const OrtMemoryInfo* info; /* owned by the factory */
  mem_kind kind;
  pthread_mutex_t lock;
  size_t in_use;
  size_t num_allocs;
  size_t max_in_use;
} refdev_allocator;

static void* ORT_API_CALL alloc_impl(OrtAllocator* this_, size_t size) {
  refdev_allocator* a = (refdev_allocator*)this_;
  if (a->kind == MEM_DEVICE && refdev_current_fault() == FAULT_ALLOC_FAIL) return NULL;
  if (refdev_handle_pool_dry()) return NULL; /* nth: a buffer needs a handle too */

  size_t rounded = (size + REFDEV_ALIGN - 1) / REFDEV_ALIGN * REFDEV_ALIGN;
  if (rounded == 0) rounded = REFDEV_ALIGN;
  void* p = aligned_alloc(REFDEV_ALIGN, rounded);
  if (p == NULL) return NULL;
  /* Fresh device memory holds scrambled zeros, fresh host memory plain zeros. */
  memset(p, a->kind == MEM_DEVICE ? (int)REFDEV_KEY : 0, rounded);
  refdev_reg_add(p, size, a->kind);

  pthread_mutex_lock(&a->lock);
  a->in_use += size;
  a->num_allocs += 1;
  if (a->in_use > a->max_in_use) a->max_in_use = a->in_use;
  pthread_mutex_unlock(&a->lock);
  return p;
}

static void ORT_API_CALL free_impl(OrtAllocator* this_, void* p) {
  refdev_allocator* a = (refdev_allocator*)this_;
  if (p == NULL) return;
  uintptr_t base = (uintptr_t)p;
  size_t size = 0;
  pthread_mutex_lock(&g_reg_lock);
  for (alloc_entry* e = g_reg_head; e != NULL; e = e->next) {
    if (e->base == base) {
      size = e->size;
      break;
    }
  }
  pthread_mutex_unlock(&g_reg_lock);
  if (!refdev_reg_remove(p)) {
    fprintf(stderr, "refdev: Free of %p which is not a live RefDev allocation (ignored)\n", p);
    return;
  }
  pthread_mutex_lock(&a->lock);
  a->in_use -= size <= a->in_use ? size : a->in_use;
  pthread_mutex_unlock(&a->lock);
  /* Work queued on a stream may still read or write the memory (onnxruntime frees a kernel's
   * input once the kernel's Compute returned): it goes back once that work has run. */
  if (refdev_async_defer_free(p)) return;
  free(p);
}

static const OrtMemoryInfo* ORT_API_CALL info_impl(const OrtAllocator* this_) {
  const refdev_allocator* a = (const refdev_allocator*)this_;
  return a->info;
}

static void* ORT_API_CALL reserve_impl(OrtAllocator* this_, size_t size) { return alloc_impl(this_, size); }

static void* ORT_API_CALL alloc_on_stream_impl(OrtAllocator* this_, size_t size, OrtSyncStream* stream) {
  (void)stream; /* the virtual device is synchronous */
  return alloc_impl(this_, size);
}

static OrtStatus* ORT_API_CALL get_stats_impl(const OrtAllocator* this_, OrtKeyValuePairs** out) {
  refdev_allocator* a = (refdev_allocator*)this_;
  char buf[32];
  g_ort->CreateKeyValuePairs(out);
  pthread_mutex_lock(&a->lock);
  snprintf(buf, sizeof buf, "%zu", a->in_use);
  g_ort->AddKeyValuePair(*out, "InUse", buf);
  snprintf(buf, sizeof buf, "%zu", a->num_allocs);
  g_ort->AddKeyValuePair(*out, "NumAllocs", buf);
  snprintf(buf, sizeof buf, "%zu", a->max_in_use);
  g_ort->AddKeyValuePair(*out, "MaxInUse", buf);
  pthread_mutex_unlock(&a->lock);
  return NULL;
}

OrtStatus* ORT_API_CALL refdev_factory_create_allocator(OrtEpFactory* this_ptr, const OrtMemoryInfo* memory_info,
                                                        const OrtKeyValuePairs* allocator_options,
                                                        OrtAllocator** allocator) {
  refdev_factory* f = (refdev_factory*)this_ptr;
  (void)allocator_options;
  *allocator = NULL;
  if (memory_info == NULL) {
    return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev: CreateAllocator needs a memory info");
  }
  mem_kind kind = refdev_classify_device(f, g_ep->MemoryInfo_GetMemoryDevice(memory_info));
  const OrtMemoryInfo* own_info = NULL;
  if (kind == MEM_DEVICE) {
    own_info = f->default_infos[g_ep->MemoryDevice_GetDeviceId(g_ep->MemoryInfo_GetMemoryDevice(memory_info))];
    /* host-accessible-inputs: the DEFAULT allocator describes itself with the HOST_ACCESSIBLE
     * memory info, so values it allocates (session inputs among them) report that memory. */
    if (f->fault == FAULT_HOST_ACCESSIBLE_INPUTS && f->host_info != NULL) own_info = f->host_info;
  } else if (kind == MEM_HOST) {
    own_info = f->host_info;
  } else {
    const char* name = "?";
    OrtStatus* nst = g_ort->MemoryInfoGetName(memory_info, &name);
    if (nst != NULL) g_ort->ReleaseStatus(nst);
    return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev: no allocator for memory info '%s'", name);
  }

  refdev_allocator* a = (refdev_allocator*)calloc(1, sizeof *a);
  if (a == NULL) return refdev_make_status(ORT_FAIL, "RefDev: out of memory");
  a->base.version = ORT_API_VERSION;
  a->base.Alloc = alloc_impl;
  a->base.Free = free_impl;
  a->base.Info = info_impl;
  a->base.Reserve = reserve_impl;
  /* no-stats: GetStats is optional (onnxruntime_c_api.h); NULL, as the WebGPU plugin EP leaves it */
  a->base.GetStats = refdev_current_fault() == FAULT_NO_STATS ? NULL : get_stats_impl;
  a->base.AllocOnStream = alloc_on_stream_impl;
  a->info = own_info;
  a->kind = kind;
  pthread_mutex_init(&a->lock, NULL);
  *allocator = &a->base;
  return NULL;
}

void ORT_API_CALL refdev_factory_release_allocator(OrtEpFactory* this_ptr, OrtAllocator* allocator) {
  (void)this_ptr;
  if (allocator == NULL) return;
  refdev_allocator* a = (refdev_allocator*)allocator;
  pthread_mutex_destroy(&a->lock);
  free(a);
}
