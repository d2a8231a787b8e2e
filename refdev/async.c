/* The asynchronous device's machinery: FIFO queues of work, each served by its own thread, every
 * item held back until something waits for it or its hold has passed; the private ("stray")
 * queue of the async fault modes; frees held back while queued work may still touch the memory.
 * streams.c builds the sync streams and their notifications on it; nothing here calls
 * onnxruntime. */
#include "refdev.h"

#include <signal.h>

/* ------------------------------------------------------------------------------------------ */
/* Settings                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* The async fault modes break the ordering contracts of an asynchronous device, which a
 * synchronous one cannot break: they make the device asynchronous as ORT_REFDEV_ASYNC=1 does,
 * so that a run with only ORT_REFDEV_FAULT set still shows what the mode breaks. */
bool refdev_async_fault(refdev_fault fault) {
  return fault == FAULT_DROP_STREAM || fault == FAULT_NO_WAIT || fault == FAULT_NO_DRAIN ||
         fault == FAULT_EARLY_RETURN;
}

bool refdev_async_wanted(void) { return refdev_env_flag(REFDEV_ASYNC_ENV) || refdev_async_fault(refdev_current_fault()); }

/* How long an item nobody waits for is held back once it is next in its queue. An item that a
 * drain, a sync, a stream's release or a notification's wait is waiting for runs at once
 * (urge_locked), so a read that nobody waited for comes before the work it should have waited
 * for every time: nothing lets that work run before the hold has passed, and the hold is far
 * longer than the call and the read between which a caller should have waited. */
#define DEFAULT_HOLD_MS 1000
long refdev_async_hold_ms(void) {
  const char* v = getenv(REFDEV_ASYNC_DELAY_ENV);
  if (v == NULL || v[0] == '\0') return DEFAULT_HOLD_MS;
  char* end = NULL;
  long ms = strtol(v, &end, 10);
  if (end == v || ms < 0) return DEFAULT_HOLD_MS;
  return ms > 60000 ? 60000 : ms;
}

/* The record of the asynchronous device: with ORT_REFDEV_ASYNC_LOG naming a file, each entry
 * point that queues, runs or waits appends a line saying which (README.md), so that a check can
 * tell what onnxruntime asked of the streams. Written by the calling threads only (the stream
 * threads read no environment). */
void refdev_async_log(const char* fmt, ...) {
  const char* path = getenv(REFDEV_ASYNC_LOG_ENV);
  if (path == NULL || path[0] == '\0') return;
  FILE* log = fopen(path, "a");
  if (log == NULL) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(log, fmt, ap);
  va_end(ap);
  fputc('\n', log);
  fclose(log);
}

/* The stray queue holds its work back longer than the streams do, so that what a caller queues
 * on a stream right after a stray copy and nobody waits for still runs before that copy lands. */
#define STRAY_HOLD_FACTOR 4

/* ------------------------------------------------------------------------------------------ */
/* Queued work and the library's list of outstanding work                                      */
/* ------------------------------------------------------------------------------------------ */

typedef struct queued_op {
  struct queued_op* next;  /* in its queue, oldest first */
  struct queued_op* gprev; /* in g_outstanding, oldest first */
  struct queued_op* gnext;
  uint64_t gseq; /* order of queueing across every queue of the library */
  refdev_work_fn fn;
  void* arg;
  bool abandoned; /* atomic: set under either lock, read by the worker */
  int device;        /* the queue's device, REFDEV_ANY_DEVICE for the stray queue */
  const void* owner; /* the queue's owner (the EP that made the stream), or NULL */
} queued_op;

struct refdev_queue {
  pthread_mutex_t lock;
  pthread_cond_t work_cv; /* to the worker: work was queued, or it is to stop */
  pthread_cond_t done_cv; /* to drainers: an item ran */
  queued_op* head;        /* running or next to run; stays queued until it has run */
  queued_op* tail;
  uint64_t queued; /* items queued so far */
  uint64_t done;   /* items run so far (FIFO: the first `done` of them) */
  uint64_t urged;  /* the first `urged` items are waited for: they run without their hold */
  long hold_ms;
  int device;
  const void* owner;
  bool stopping; /* no more work is taken; the worker leaves once the queue is empty */
  bool finished; /* the worker has left */
  bool joined;   /* guarded by g_life_lock */
  bool zombie;   /* released without draining: freed by whoever joins it (g_life_lock) */
  pthread_t thread;
  struct refdev_queue* next_live; /* g_queues, guarded by g_life_lock */
};

/* Lock order: a queue's lock, then g_async_lock; g_life_lock, then a queue's lock. Nothing is
 * called with g_async_lock held but the pthread functions. */
static pthread_mutex_t g_async_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_async_cv = PTHREAD_COND_INITIALIZER; /* an outstanding item ran */
static queued_op* g_outstanding_head = NULL;
static queued_op* g_outstanding_tail = NULL;
static uint64_t g_next_gseq = 1;

/* Frees held back: the memory of a value onnxruntime released while queued work may still read
 * or write it (a kernel's input freed once its Compute returned, a copy's source dropped by the
 * caller). Each waits for the items queued before the free; oldest first. */
typedef struct deferred_free {
  void* p;
  uint64_t ticket; /* every item with gseq <= ticket must have run */
  struct deferred_free* next;
} deferred_free;
static deferred_free* g_deferred_head = NULL;
static deferred_free* g_deferred_tail = NULL;

/* Every queue with a thread (streams', the stray one, and released ones still draining), so that
 * unregistering the library can stop and join them all before its code is unmapped. */
static pthread_mutex_t g_life_lock = PTHREAD_MUTEX_INITIALIZER;
static refdev_queue* g_queues = NULL;
static refdev_queue* g_stray = NULL;

/* Wakes the worker to run the first `through` items without holding them back (q->lock held). */
static void urge_locked(refdev_queue* q, uint64_t through) {
  if (q->urged < through) q->urged = through;
  pthread_cond_broadcast(&q->work_cv);
}

/* Holds the head item back (q->lock held) until something waits for it or its hold has passed. */
static void hold_head(refdev_queue* q) {
  if (q->hold_ms <= 0) return;
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_sec += q->hold_ms / 1000;
  until.tv_nsec += (q->hold_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec += 1;
    until.tv_nsec -= 1000000000L;
  }
  /* the head is item done + 1 */
  while (q->urged <= q->done) {
    if (pthread_cond_timedwait(&q->work_cv, &q->lock, &until) == ETIMEDOUT) break;
  }
}

/* An item has run: it leaves the outstanding list, and the frees that waited only for items up
 * to it are done. */
static void op_finished(queued_op* op) {
  deferred_free* ready = NULL;
  pthread_mutex_lock(&g_async_lock);
  if (op->gprev != NULL) op->gprev->gnext = op->gnext; else g_outstanding_head = op->gnext;
  if (op->gnext != NULL) op->gnext->gprev = op->gprev; else g_outstanding_tail = op->gprev;
  uint64_t oldest = g_outstanding_head != NULL ? g_outstanding_head->gseq : UINT64_MAX;
  deferred_free** tail = &ready;
  while (g_deferred_head != NULL && g_deferred_head->ticket < oldest) {
    *tail = g_deferred_head;
    tail = &g_deferred_head->next;
    g_deferred_head = g_deferred_head->next;
  }
  *tail = NULL;
  if (g_deferred_head == NULL) g_deferred_tail = NULL;
  pthread_cond_broadcast(&g_async_cv);
  pthread_mutex_unlock(&g_async_lock);
  while (ready != NULL) {
    deferred_free* next = ready->next;
    free(ready->p);
    free(ready);
    ready = next;
  }
  free(op);
}

static void* worker(void* arg) {
  refdev_queue* q = (refdev_queue*)arg;
  pthread_mutex_lock(&q->lock);
  for (;;) {
    while (q->head == NULL && !q->stopping) pthread_cond_wait(&q->work_cv, &q->lock);
    if (q->head == NULL) break; /* stopping, and nothing left to run */
    queued_op* op = q->head;
    /* held while nobody waits for it: the items behind it wait too, so a chain of queued work
     * that nobody waits for lands later the longer it is, as on a busy device */
    hold_head(q);
    /* run outside the lock: work that waits (a notification's wait) must not hold up the
     * callers queueing more */
    pthread_mutex_unlock(&q->lock);
    op->fn(op->arg, __atomic_load_n(&op->abandoned, __ATOMIC_ACQUIRE));
    pthread_mutex_lock(&q->lock);
    q->head = op->next;
    if (q->head == NULL) q->tail = NULL;
    q->done += 1;
    pthread_cond_broadcast(&q->done_cv);
    pthread_mutex_unlock(&q->lock);
    op_finished(op);
    pthread_mutex_lock(&q->lock);
  }
  q->finished = true;
  pthread_cond_broadcast(&q->done_cv);
  pthread_mutex_unlock(&q->lock);
  return NULL;
}

static void queue_free(refdev_queue* q) {
  pthread_cond_destroy(&q->work_cv);
  pthread_cond_destroy(&q->done_cv);
  pthread_mutex_destroy(&q->lock);
  free(q);
}

/* Joins the queues that were released without draining and have since emptied (g_life_lock held). */
static void reap_zombies_locked(void) {
  for (refdev_queue** pp = &g_queues; *pp != NULL;) {
    refdev_queue* q = *pp;
    bool done = false;
    if (q->zombie) {
      pthread_mutex_lock(&q->lock);
      done = q->finished;
      pthread_mutex_unlock(&q->lock);
    }
    if (!done) {
      pp = &q->next_live;
      continue;
    }
    *pp = q->next_live;
    if (!q->joined) pthread_join(q->thread, NULL);
    queue_free(q);
  }
}

refdev_queue* refdev_queue_create(long hold_ms, int device, const void* owner) {
  refdev_queue* q = (refdev_queue*)calloc(1, sizeof *q);
  if (q == NULL) return NULL;
  pthread_mutex_init(&q->lock, NULL);
  /* the hold is timed on the monotonic clock: a change of the wall clock neither ends nor
   * stretches it */
  pthread_condattr_t monotonic;
  pthread_condattr_init(&monotonic);
  pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
  pthread_cond_init(&q->work_cv, &monotonic);
  pthread_condattr_destroy(&monotonic);
  pthread_cond_init(&q->done_cv, NULL);
  q->hold_ms = hold_ms;
  q->device = device;
  q->owner = owner;
  /* The worker takes no signals: they stay with the threads of the process that expect them
   * (Python's main thread). */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&q->thread, NULL, worker, q);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    queue_free(q);
    return NULL;
  }
  pthread_mutex_lock(&g_life_lock);
  reap_zombies_locked();
  q->next_live = g_queues;
  g_queues = q;
  pthread_mutex_unlock(&g_life_lock);
  return q;
}

/* Queues fn(arg) to run once the items before it have run and it is waited for or its hold has
 * passed. False when the queue takes no more work (released, or the library is being
 * unregistered): the caller runs it itself. */
static bool queue_push(refdev_queue* q, refdev_work_fn fn, void* arg, bool abandoned) {
  queued_op* op = (queued_op*)calloc(1, sizeof *op);
  if (op == NULL) return false;
  op->fn = fn;
  op->arg = arg;
  op->abandoned = abandoned;
  op->device = q->device;
  op->owner = q->owner;
  pthread_mutex_lock(&q->lock);
  if (q->stopping) {
    pthread_mutex_unlock(&q->lock);
    free(op);
    return false;
  }
  /* outstanding before it is queued, so that a free or a drain that comes after this call
   * waits for it */
  pthread_mutex_lock(&g_async_lock);
  op->gseq = g_next_gseq++;
  op->gprev = g_outstanding_tail;
  if (g_outstanding_tail != NULL) g_outstanding_tail->gnext = op; else g_outstanding_head = op;
  g_outstanding_tail = op;
  pthread_mutex_unlock(&g_async_lock);
  if (q->tail != NULL) q->tail->next = op; else q->head = op;
  q->tail = op;
  q->queued += 1;
  pthread_cond_signal(&q->work_cv);
  pthread_mutex_unlock(&q->lock);
  return true;
}

bool refdev_queue_push(refdev_queue* q, refdev_work_fn fn, void* arg) { return queue_push(q, fn, arg, false); }

/* The items queued so far are abandoned (refdev_work_fn): a fault told the caller they had run. */
void refdev_queue_abandon(refdev_queue* q) {
  pthread_mutex_lock(&q->lock);
  for (queued_op* op = q->head; op != NULL; op = op->next) __atomic_store_n(&op->abandoned, true, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&q->lock);
}

/* Whether the queue holds work that has not run yet. */
bool refdev_queue_busy(refdev_queue* q) {
  pthread_mutex_lock(&q->lock);
  bool busy = q->head != NULL;
  pthread_mutex_unlock(&q->lock);
  return busy;
}

/* Those waiting for the queued items are waiting for this queue: they run at once. */
void refdev_queue_urge(refdev_queue* q) {
  pthread_mutex_lock(&q->lock);
  urge_locked(q, q->queued);
  pthread_mutex_unlock(&q->lock);
}

/* Returns once every item queued before the call has run. */
void refdev_queue_drain(refdev_queue* q) {
  pthread_mutex_lock(&q->lock);
  uint64_t target = q->queued;
  urge_locked(q, target);
  while (q->done < target && !q->finished) pthread_cond_wait(&q->done_cv, &q->lock);
  pthread_mutex_unlock(&q->lock);
}

/* Stops the queue. drain_first: runs what is queued, joins the thread and frees the queue
 * before returning. Otherwise returns at once; the thread runs what is queued in the background
 * and the queue is joined and freed later (another queue's creation, or unregistration). */
void refdev_queue_release(refdev_queue* q, bool drain_first) {
  if (q == NULL) return;
  pthread_mutex_lock(&q->lock);
  q->stopping = true;
  /* a release that drains waits for what is queued; one that does not leaves it held */
  if (drain_first) urge_locked(q, q->queued);
  pthread_cond_broadcast(&q->work_cv);
  pthread_mutex_unlock(&q->lock);
  pthread_mutex_lock(&g_life_lock);
  if (!drain_first) {
    q->zombie = true;
    reap_zombies_locked();
    pthread_mutex_unlock(&g_life_lock);
    return;
  }
  for (refdev_queue** pp = &g_queues; *pp != NULL; pp = &(*pp)->next_live) {
    if (*pp == q) {
      *pp = q->next_live;
      break;
    }
  }
  bool joined = q->joined;
  pthread_mutex_unlock(&g_life_lock);
  /* joined outside g_life_lock: the worker may be running a wait that another queue's work
   * ends, and that queue's release must not be held up by this one */
  if (!joined) pthread_join(q->thread, NULL);
  queue_free(q);
}

/* The private queue of the async fault modes: work the caller gave a stream (drop-stream) or no
 * stream (early-return) lands there, late and ordered with nothing else. */
bool refdev_stray_push(refdev_work_fn fn, void* arg) {
  pthread_mutex_lock(&g_life_lock);
  refdev_queue* q = g_stray;
  pthread_mutex_unlock(&g_life_lock);
  if (q == NULL) {
    refdev_queue* made = refdev_queue_create(refdev_async_hold_ms() * STRAY_HOLD_FACTOR, REFDEV_ANY_DEVICE, NULL);
    if (made == NULL) return false;
    pthread_mutex_lock(&g_life_lock);
    if (g_stray == NULL) {
      g_stray = made;
      made = NULL;
    }
    q = g_stray;
    pthread_mutex_unlock(&g_life_lock);
    if (made != NULL) refdev_queue_release(made, true); /* another thread made it first */
  }
  /* the caller was told the work had finished (early-return), or will be once it syncs the
   * stream it asked for (drop-stream): abandoned from the start */
  return queue_push(q, fn, arg, true);
}

static bool matches(int its_device, const void* its_owner, int device, const void* owner) {
  if (device != REFDEV_ANY_DEVICE && its_device != REFDEV_ANY_DEVICE && its_device != device) return false;
  return owner == NULL || its_owner == owner;
}

static bool op_matches(const queued_op* op, int device, const void* owner) { return matches(op->device, op->owner, device, owner); }

/* Returns once every item queued before the call, on any queue of `device` (REFDEV_ANY_DEVICE:
 * every device; the stray queue counts as every device's) and of `owner` (NULL: anyone's), has
 * run. */
void refdev_async_drain_where(int device, const void* owner) {
  pthread_mutex_lock(&g_async_lock);
  uint64_t ticket = g_next_gseq - 1;
  pthread_mutex_unlock(&g_async_lock);
  /* urged after the ticket is taken: an item queued before it is counted in its queue's
   * `queued` by then (queue_push does both under the queue's lock) */
  pthread_mutex_lock(&g_life_lock);
  for (refdev_queue* q = g_queues; q != NULL; q = q->next_live) {
    if (matches(q->device, q->owner, device, owner)) refdev_queue_urge(q);
  }
  pthread_mutex_unlock(&g_life_lock);
  pthread_mutex_lock(&g_async_lock);
  for (;;) {
    bool pending = false;
    for (queued_op* op = g_outstanding_head; op != NULL && op->gseq <= ticket; op = op->gnext) {
      if (op_matches(op, device, owner)) {
        pending = true;
        break;
      }
    }
    if (!pending) break;
    pthread_cond_wait(&g_async_cv, &g_async_lock);
  }
  pthread_mutex_unlock(&g_async_lock);
}

/* The items of refdev_async_drain_where(device, owner) are abandoned instead of waited for. */
void refdev_async_abandon_where(int device, const void* owner) {
  pthread_mutex_lock(&g_async_lock);
  for (queued_op* op = g_outstanding_head; op != NULL; op = op->gnext) {
    if (op_matches(op, device, owner)) __atomic_store_n(&op->abandoned, true, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&g_async_lock);
}

/* Holds back free(p) until every item queued so far has run; false when nothing is queued (the
 * caller frees at once, as the synchronous device always does). */
bool refdev_async_defer_free(void* p) {
  /* the common case, and the synchronous device's only one: nothing queued */
  pthread_mutex_lock(&g_async_lock);
  bool idle = g_outstanding_head == NULL;
  pthread_mutex_unlock(&g_async_lock);
  if (idle) return false;
  deferred_free* d = (deferred_free*)malloc(sizeof *d);
  if (d == NULL) {
    /* no room to remember it: wait for the queued work instead, and free at once */
    refdev_async_drain_where(REFDEV_ANY_DEVICE, NULL);
    return false;
  }
  pthread_mutex_lock(&g_async_lock);
  if (g_outstanding_head == NULL) {
    pthread_mutex_unlock(&g_async_lock);
    free(d);
    return false;
  }
  d->p = p;
  d->ticket = g_next_gseq - 1;
  d->next = NULL;
  if (g_deferred_tail != NULL) g_deferred_tail->next = d; else g_deferred_head = d;
  g_deferred_tail = d;
  pthread_mutex_unlock(&g_async_lock);
  return true;
}

/* Unregistration (ReleaseEpFactory): every queue stops taking work and runs what it holds, every
 * thread is joined, the held-back frees are done. Streams onnxruntime still holds keep their
 * (stopped) queue and run later work at the call. */
void refdev_async_shutdown(void) {
  pthread_mutex_lock(&g_life_lock);
  for (refdev_queue* q = g_queues; q != NULL; q = q->next_live) {
    pthread_mutex_lock(&q->lock);
    q->stopping = true;
    urge_locked(q, q->queued);
    pthread_mutex_unlock(&q->lock);
  }
  refdev_queue* stray = g_stray;
  g_stray = NULL;
  for (refdev_queue** pp = &g_queues; *pp != NULL;) {
    refdev_queue* q = *pp;
    if (!q->joined) pthread_join(q->thread, NULL);
    q->joined = true;
    if (q->zombie || q == stray) {
      *pp = q->next_live;
      queue_free(q);
    } else {
      pp = &q->next_live;
    }
  }
  pthread_mutex_unlock(&g_life_lock);
  pthread_mutex_lock(&g_async_lock);
  deferred_free* d = g_outstanding_head == NULL ? g_deferred_head : NULL;
  if (d != NULL) g_deferred_head = g_deferred_tail = NULL;
  pthread_mutex_unlock(&g_async_lock);
  while (d != NULL) {
    deferred_free* next = d->next;
    free(d->p);
    free(d);
    d = next;
  }
}
