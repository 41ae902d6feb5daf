/* mpir-demo-rank: one rank of the mpir-rs demo job (no MPI library involved).
 *
 * Started by mpir-demo-starter with PMI_RANK, PMI_SIZE (as hydra passes them),
 * MPIR_DEMO_LIFETIME (seconds; the rank exits on its own after that), MPIR_DEMO_STARTER (the
 * starter's pid) and, when a debugger launched the job, MPIEXEC_DEBUG=1 (as MPICH does).
 *
 * What it does, as an MPICH 4.1 (ch3) rank would:
 *  1. "MPI_Init": builds MPI_COMM_WORLD, MPI_COMM_SELF and the internal MPI_ICOMM_WORLD in
 *     MPIR_Comm_builtin and records them on MPIR_All_communicators (newest first, the sequence
 *     number counting every change);
 *  2. "MPII_Wait_for_debugger": MPIR_debug_state = MPIR_DEBUG_SPAWNED, then, with
 *     MPIEXEC_DEBUG set, waits until a debugger sets MPIR_debug_gate;
 *  3. the application: MPI_Comm_dup(MPI_COMM_WORLD) named "demo-ring" (context id 48), then
 *     leaves pending operations on the debug queues (MPIR_Recvq_head, MPIR_Sendq_head,
 *     MPIR_Unexpq_head: MPIR_Debugq entries, doubly linked as MPICH's DL_PREPEND links them:
 *     newest first, next ends in NULL, the head's prev points to the tail):
 *       ranks 0, 1, 2 (n >= 3): a blocking MPI_Recv from the next rank of the three, tag 7, on
 *         demo-ring: a ring of receives nobody sends to, a deadlock;
 *       rank 0 when n == 2: a blocking MPI_Recv from rank 1 (which does nothing): no cycle;
 *       rank 3 (n >= 4): an MPI_Irecv from MPI_ANY_SOURCE tag 42 on demo-ring, an MPI_Isend
 *         of 262144 doubles to rank 0 tag 99 on demo-ring (rendezvous: unmatched, rank 0 is
 *         receiving from rank 1 only), and an unexpected message from rank 1, tag 5, on
 *         MPI_COMM_WORLD;
 *       every other rank: nothing pending;
 *  4. prints "rank R pid P ready" (unless MPIR_DEMO_QUIET is set), then blocks until killed
 *     where such a rank would: ranks 0-2 (and rank 0 when n == 2) inside MPI_Recv, rank 3
 *     inside MPI_Waitall, every other rank outside MPI (in pause, from main). These two
 *     "MPI calls" are the demo's own functions named as the standard names the entry points,
 *     so stack tools (`mpir stacks`, the stack-aware `mpir deadlock`) see what they would see
 *     in a real job: the blocked call, and `main` as the user's call site.
 *
 * The local group of MPI_COMM_SELF is left NULL, as MPICH leaves a communicator's group until
 * someone asks for it; the others have theirs (lpid = MPI_COMM_WORLD rank, as in ch3). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "mpich41.h"

/* dbginit.c: what a debugger reads or writes in every rank. */
volatile int MPIR_debug_state = 0;
volatile int MPIR_debug_gate = 0;
volatile int MPIR_being_debugged = 0;
MPIR_Comm_list MPIR_All_communicators = {0, 0};
MPIR_Debugq *MPIR_Sendq_head = 0;
MPIR_Debugq *MPIR_Recvq_head = 0;
MPIR_Debugq *MPIR_Unexpq_head = 0;

/* mpir_process.h: the process-wide state (its leading members, in MPICH 4.1's order). */
typedef struct MPIR_Process_t {
    int mpich_state; /* MPL_atomic_int_t in MPICH: one int */
    int do_error_checks;
    MPIR_Comm *comm_world;
    MPIR_Comm *comm_self;
    MPIR_Comm *comm_parent;
    MPIR_Comm *icomm_world; /* the library's internal copy of the world */
} MPIR_Process_t;
MPIR_Process_t MPIR_Process;

/* commutil.c and the handle allocator's preallocated ("direct") objects. */
MPIR_Comm MPIR_Comm_builtin[MPIR_COMM_N_BUILTIN];
MPIR_Comm MPIR_Comm_direct[MPIR_COMM_PREALLOC];
MPIR_Group MPIR_Group_direct[MPIR_GROUP_PREALLOC];
MPIR_Request MPIR_Request_direct[MPIR_REQUEST_PREALLOC];

static int n_groups, n_requests;

/* Application buffers. */
static int ring_buf[16];
static double any_buf[8];
static double big_send[262144];

static MPIR_Group *group_of(const int *world_ranks, int size, int my_rank) {
    if (n_groups >= MPIR_GROUP_PREALLOC) abort();
    MPIR_Group *g = &MPIR_Group_direct[n_groups];
    g->handle = DEMO_DIRECT_GROUP(n_groups++);
    g->ref_count = 1;
    g->size = size;
    g->rank = my_rank;
    g->lrank_to_lpid = calloc((size_t)size, sizeof *g->lrank_to_lpid);
    if (!g->lrank_to_lpid) abort();
    for (int i = 0; i < size; i++) {
        g->lrank_to_lpid[i].lpid = (uint64_t)world_ranks[i];
        g->lrank_to_lpid[i].next_lpid = i + 1 < size ? i + 1 : -1;
    }
    g->idx_of_first_lpid = 0;
    g->is_local_dense_monotonic = 1;
    return g;
}

/* MPII_CommL_remember */
static void comm_remember(MPIR_Comm *c) {
    c->comm_next = MPIR_All_communicators.head;
    MPIR_All_communicators.head = c;
    MPIR_All_communicators.sequence_number++;
}

static void comm_init(MPIR_Comm *c, int handle, int context_id, int size, int rank,
                      MPIR_Group *group, const char *name) {
    memset(c, 0, sizeof *c);
    c->handle = handle;
    c->ref_count = 1;
    pthread_mutex_init(&c->mutex.mutex, 0);
    c->context_id = (MPIR_Context_id_t)context_id;
    c->recvcontext_id = (MPIR_Context_id_t)context_id;
    c->remote_size = size;
    c->local_size = size;
    c->rank = rank;
    c->local_group = group;
    c->remote_group = group;
    c->comm_kind = MPIR_COMM_KIND__INTRACOMM;
    c->hierarchy_kind = MPIR_COMM_HIERARCHY_KIND__FLAT;
    snprintf(c->name, sizeof c->name, "%s", name);
    comm_remember(c);
}

static MPIR_Request *request(MPIR_Request_kind_t kind, MPIR_Comm *comm) {
    if (n_requests >= MPIR_REQUEST_PREALLOC) abort();
    MPIR_Request *r = &MPIR_Request_direct[n_requests];
    memset(r, 0, sizeof *r);
    r->handle = DEMO_DIRECT_REQUEST(n_requests++);
    r->ref_count = 2; /* the user's handle and the device's */
    r->kind = kind;
    r->cc = 1; /* not complete */
    r->cc_ptr = &r->cc;
    r->comm = comm;
    return r;
}

/* MPII_Debugq_remember: DL_PREPEND of a new entry (the head's prev is the tail). */
static MPIR_Debugq *debugq_remember(MPIR_Request *req, int rank, int tag, int context_id,
                                    const void *buf, MPI_Aint count, MPIR_Debugq **queue) {
    MPIR_Debugq *p = malloc(sizeof *p);
    if (!p) abort();
    p->req = req;
    p->tag = tag;
    p->rank = rank;
    p->context_id = context_id;
    p->buf = buf;
    p->count = count;
    p->next = *queue;
    if (*queue) {
        p->prev = (*queue)->prev;
        (*queue)->prev = p;
    } else {
        p->prev = p;
    }
    *queue = p;
    return p;
}

static void post_recv(MPIR_Comm *comm, int source, int tag, void *buf, MPI_Aint count) {
    MPIR_Request *r = request(MPIR_REQUEST_KIND__RECV, comm);
    r->status.MPI_SOURCE = MPI_PROC_NULL;
    r->status.MPI_TAG = MPI_ANY_TAG;
    r->recv = debugq_remember(r, source, tag, comm->recvcontext_id, buf, count, &MPIR_Recvq_head);
}

static void post_send(MPIR_Comm *comm, int dest, int tag, const void *buf, MPI_Aint count) {
    MPIR_Request *r = request(MPIR_REQUEST_KIND__SEND, comm);
    /* ch3 records sends under the communicator's recvcontext_id (mpid_isend.c). */
    r->send = debugq_remember(r, dest, tag, comm->recvcontext_id, buf, count, &MPIR_Sendq_head);
}

static void arrive_unexpected(MPIR_Comm *comm, int source, int tag, int bytes) {
    MPIR_Request *r = request(MPIR_REQUEST_KIND__RECV, comm);
    r->status.MPI_SOURCE = source;
    r->status.MPI_TAG = tag;
    r->status.count_lo = bytes;
    r->unexp = debugq_remember(r, source, tag, comm->context_id, 0, 0, &MPIR_Unexpq_head);
}

/* The blocking MPI calls of step 4. noinline: each keeps a frame of its own under main. */
__attribute__((noinline)) int MPI_Recv(void *buf, int count, int datatype, int source, int tag,
                                       int comm, void *status) {
    (void)buf, (void)count, (void)datatype, (void)source, (void)tag, (void)comm, (void)status;
    for (;;) pause(); /* nobody ever sends */
}

__attribute__((noinline)) int MPI_Waitall(int count, MPI_Request *requests, void *statuses) {
    (void)count, (void)requests, (void)statuses;
    for (;;) pause(); /* the wildcard receive and the rendezvous send never complete */
}

static int env_int(const char *name, int fallback) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(void) {
    int rank = env_int("PMI_RANK", -1), size = env_int("PMI_SIZE", -1);
    int lifetime = env_int("MPIR_DEMO_LIFETIME", 300);
    int starter = env_int("MPIR_DEMO_STARTER", 0);
    if (rank < 0 || size < 1 || rank >= size || size > 4096 || lifetime < 1) {
        fprintf(stderr, "mpir-demo-rank: start me through mpir-demo-starter\n");
        return 2;
    }
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* the starter gone, the rank goes too */
#endif
    if (starter && getppid() != starter) return 1; /* it was gone before prctl */
    alarm((unsigned)lifetime + 5);      /* never outlive a forgotten demo by much */
    double deadline = now() + lifetime;

    /* MPI_Init: builtin communicators. */
    int *everyone = malloc((size_t)size * sizeof *everyone);
    if (!everyone) abort();
    for (int i = 0; i < size; i++) everyone[i] = i;
    MPIR_Comm *world = &MPIR_Comm_builtin[0], *self = &MPIR_Comm_builtin[1],
              *icomm = &MPIR_Comm_builtin[2];
    comm_init(world, MPI_COMM_WORLD, 0 << MPIR_CONTEXT_PREFIX_SHIFT, size, rank,
              group_of(everyone, size, rank), "MPI_COMM_WORLD");
    comm_init(self, MPI_COMM_SELF, 1 << MPIR_CONTEXT_PREFIX_SHIFT, 1, 0, 0, "MPI_COMM_SELF");
    comm_init(icomm, MPIR_ICOMM_WORLD, 2 << MPIR_CONTEXT_PREFIX_SHIFT, size, rank,
              group_of(everyone, size, rank), "MPI_ICOMM_WORLD");
    MPIR_Process.comm_world = world;
    MPIR_Process.comm_self = self;
    MPIR_Process.icomm_world = icomm;

    /* MPII_Wait_for_debugger */
    MPIR_debug_state = MPIR_DEBUG_SPAWNED;
    if (getenv("MPIEXEC_DEBUG")) {
        while (!MPIR_debug_gate) {
            if (now() > deadline) return 3;
            usleep(1000);
        }
    }

    /* The application. */
    MPIR_Comm *ring = &MPIR_Comm_direct[0];
    comm_init(ring, DEMO_DIRECT_COMM(0), 3 << MPIR_CONTEXT_PREFIX_SHIFT, size, rank,
              group_of(everyone, size, rank), "demo-ring");
    int ring_source = -1;
    if (size >= 3 && rank < 3) {
        ring_source = (rank + 1) % 3;
        post_recv(ring, ring_source, 7, ring_buf, 16);
    } else if (size == 2 && rank == 0) {
        ring_source = 1;
        post_recv(ring, ring_source, 7, ring_buf, 16);
    } else if (rank == 3) {
        post_recv(ring, MPI_ANY_SOURCE, 42, any_buf, 8);
        post_send(ring, 0, 99, big_send, 262144);
        arrive_unexpected(world, 1, 5, 4 * (int)sizeof(int));
    }

    if (!getenv("MPIR_DEMO_QUIET")) {
        printf("rank %d pid %d ready\n", rank, (int)getpid());
        fflush(stdout);
    }
    /* Until killed; SIGALRM at the latest. */
    if (ring_source >= 0) {
        MPI_Recv(ring_buf, 16, 0, ring_source, 7, DEMO_DIRECT_COMM(0), NULL);
    } else if (rank == 3) {
        MPI_Request requests[2] = {0, 1};
        MPI_Waitall(2, requests, NULL);
    }
    for (;;) pause();
}

/* initinfo.c: the device the library was built for. The demo imitates an MPICH 4.1 ch3 rank,
 * so it says ch3, as such a rank would: queue readers check this before trusting the debug
 * queues (ch3 records every unexpected message there; ch4's netmods keep theirs). Defined at
 * the end of the file so that the line numbers stacks show (tests/golden) stay put. */
const char MPII_Version_device[] = "ch3:nemesis";
