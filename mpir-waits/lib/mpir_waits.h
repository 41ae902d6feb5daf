/* mpir_waits.h — the wait-state export of mpir-rs's preload library (docs/wait-states.md).
 *
 * A process that has libmpir_waits.so preloaded records, per thread, the MPI call it is in
 * and what that call waits for, through the MPI profiling interface (PMPI_*), and exports it
 * at the data symbol `mpir_waits` (a struct mpir_waits_header) for a debugger to read from
 * its memory — live (stopped or not) or from a core — exactly like MPIR_proctable.
 *
 * Every field has a fixed width, whatever the pointer size; the byte order is the process's.
 * All addresses are uint64_t. A reader must check magic, version and the three entry sizes,
 * and bound every count by its capacity; entries it cannot use are reported, not guessed.
 *
 * Consistency without stopping the process: each slot, communicator and request entry has a
 * `generation` that its single writer makes odd before changing the entry and even after
 * (release order); a reader copies the entry, then re-reads the generation: the copy is good
 * when both reads are the same even value. A stopped process can still be caught mid-write:
 * an odd generation says so (the reader reports the entry as torn).
 */
#ifndef MPIR_WAITS_H
#define MPIR_WAITS_H

#include <stdint.h>

#define MPIR_WAITS_MAGIC "MPIRWAIT" /* 8 bytes, no terminating NUL */
#define MPIR_WAITS_VERSION 1u

#define MPIR_WAITS_SLOTS 256      /* threads that can be recorded */
#define MPIR_WAITS_COMMS 1024     /* communicators */
#define MPIR_WAITS_REQUESTS 4096  /* active nonblocking or persistent requests */
#define MPIR_WAITS_WAIT_REQS 16   /* requests listed per wait (the rest are counted) */
#define MPIR_WAITS_LIBRARY 128    /* bytes of MPI_Get_library_version kept */

/* header.abi: how the MPI library passes handles (decided from facts at MPI_Init). */
enum mpir_waits_abi {
    MPIR_WAITS_ABI_NONE = 0,    /* not known (yet): nothing is recorded */
    MPIR_WAITS_ABI_MPICH = 1,   /* int handles: MPICH, Intel MPI, MVAPICH, Cray MPICH */
    MPIR_WAITS_ABI_OPENMPI = 2, /* pointer handles: Open MPI */
};

/* header.state */
enum mpir_waits_state {
    MPIR_WAITS_LOADED = 0,    /* preloaded; MPI not initialized through it */
    MPIR_WAITS_RECORDING = 1, /* MPI initialized: calls are recorded */
    MPIR_WAITS_FINALIZED = 2, /* MPI_Finalize returned */
    MPIR_WAITS_DISABLED = 3,  /* nothing is recorded: header.disabled says why */
};

/* header.disabled */
enum mpir_waits_disabled {
    MPIR_WAITS_OK = 0,
    MPIR_WAITS_NO_MPI = 1,          /* no PMPI_* function found */
    MPIR_WAITS_UNKNOWN_MPI = 2,     /* an MPI whose handle ABI is not known (library[] names it) */
    MPIR_WAITS_STANDARD_ABI = 3,    /* the MPI-5 standard ABI (libmpi_abi): not supported yet */
    MPIR_WAITS_MISSING_PMPI = 4,    /* a PMPI_* function a wrapper needs is missing */
};

/* slot.call and request.kind: the MPI call, by its C name. */
enum mpir_waits_call {
    MPIR_WAITS_CALL_NONE = 0, /* not inside a recorded call */
    /* blocking point-to-point (peer, tag, comm) */
    MPIR_WAITS_CALL_SEND = 1,
    MPIR_WAITS_CALL_SSEND = 2,
    MPIR_WAITS_CALL_BSEND = 3,
    MPIR_WAITS_CALL_RSEND = 4,
    MPIR_WAITS_CALL_RECV = 5,
    MPIR_WAITS_CALL_SENDRECV = 6, /* peer/tag: the receive's source and tag; send_peer/send_tag */
    MPIR_WAITS_CALL_PROBE = 7,
    MPIR_WAITS_CALL_MPROBE = 8,
    MPIR_WAITS_CALL_SENDRECV_REPLACE = 9,
    /* nonblocking and persistent starts (request.kind) */
    MPIR_WAITS_CALL_ISEND = 20,
    MPIR_WAITS_CALL_ISSEND = 21,
    MPIR_WAITS_CALL_IBSEND = 22,
    MPIR_WAITS_CALL_IRSEND = 23,
    MPIR_WAITS_CALL_IRECV = 24,
    MPIR_WAITS_CALL_SEND_INIT = 25,
    MPIR_WAITS_CALL_SSEND_INIT = 26,
    MPIR_WAITS_CALL_BSEND_INIT = 27,
    MPIR_WAITS_CALL_RSEND_INIT = 28,
    MPIR_WAITS_CALL_RECV_INIT = 29,
    MPIR_WAITS_CALL_IPROBE = 30,
    MPIR_WAITS_CALL_IMPROBE = 31,
    MPIR_WAITS_CALL_MRECV = 32,
    MPIR_WAITS_CALL_IMRECV = 33,
    MPIR_WAITS_CALL_ICOLLECTIVE = 34, /* not written: a nonblocking collective's request.kind is
                                         its own call (IBARRIER ... IALLTOALL) */
    /* completion (nreqs, reqs[]) */
    MPIR_WAITS_CALL_WAIT = 40,
    MPIR_WAITS_CALL_WAITALL = 41,
    MPIR_WAITS_CALL_WAITANY = 42,
    MPIR_WAITS_CALL_WAITSOME = 43,
    MPIR_WAITS_CALL_TEST = 44, /* Test*: progress, not a wait */
    MPIR_WAITS_CALL_TESTALL = 45,
    MPIR_WAITS_CALL_TESTANY = 46,
    MPIR_WAITS_CALL_TESTSOME = 47,
    MPIR_WAITS_CALL_START = 48,
    MPIR_WAITS_CALL_STARTALL = 49,
    /* blocking collectives (comm, coll_seq, root where the call has one) */
    MPIR_WAITS_CALL_BARRIER = 60,
    MPIR_WAITS_CALL_BCAST = 61,
    MPIR_WAITS_CALL_REDUCE = 62,
    MPIR_WAITS_CALL_ALLREDUCE = 63,
    MPIR_WAITS_CALL_GATHER = 64,
    MPIR_WAITS_CALL_GATHERV = 65,
    MPIR_WAITS_CALL_SCATTER = 66,
    MPIR_WAITS_CALL_SCATTERV = 67,
    MPIR_WAITS_CALL_ALLGATHER = 68,
    MPIR_WAITS_CALL_ALLGATHERV = 69,
    MPIR_WAITS_CALL_ALLTOALL = 70,
    MPIR_WAITS_CALL_ALLTOALLV = 71,
    MPIR_WAITS_CALL_ALLTOALLW = 72,
    MPIR_WAITS_CALL_REDUCE_SCATTER = 73,
    MPIR_WAITS_CALL_REDUCE_SCATTER_BLOCK = 74,
    MPIR_WAITS_CALL_SCAN = 75,
    MPIR_WAITS_CALL_EXSCAN = 76,
    /* nonblocking collectives (request.coll) */
    MPIR_WAITS_CALL_IBARRIER = 80,
    MPIR_WAITS_CALL_IBCAST = 81,
    MPIR_WAITS_CALL_IREDUCE = 82,
    MPIR_WAITS_CALL_IALLREDUCE = 83,
    MPIR_WAITS_CALL_IGATHER = 84,
    MPIR_WAITS_CALL_ISCATTER = 86,
    MPIR_WAITS_CALL_IALLGATHER = 88,
    MPIR_WAITS_CALL_IALLTOALL = 90,
    /* communicator management (collective over the parent: comm, coll_seq) */
    MPIR_WAITS_CALL_COMM_DUP = 100,
    MPIR_WAITS_CALL_COMM_SPLIT = 101,
    MPIR_WAITS_CALL_COMM_CREATE = 102,
    MPIR_WAITS_CALL_COMM_FREE = 103,
    MPIR_WAITS_CALL_COMM_SPLIT_TYPE = 104,
    MPIR_WAITS_CALL_COMM_CREATE_GROUP = 105, /* collective over the group only: no coll_seq;
                                                slot.tag is its tag */
    MPIR_WAITS_CALL_INIT = 110,
    MPIR_WAITS_CALL_FINALIZE = 111, /* collective over the job */
};

/* Peer and tag values with a meaning of their own (normalised from the MPI's constants). */
#define MPIR_WAITS_ANY_SOURCE (-1)
#define MPIR_WAITS_NONE (-2) /* the call has no such argument */
#define MPIR_WAITS_PROC_NULL (-3)
#define MPIR_WAITS_ANY_TAG (-1)
#define MPIR_WAITS_ROOT (-4) /* intercommunicator MPI_ROOT */

/* slot.flags */
#define MPIR_WAITS_FLAG_OR 1u /* Waitany/Waitsome: one request completing ends the wait */

/* A thread's call in progress. Only its own thread writes it. */
struct mpir_waits_slot {
    uint64_t generation; /* odd while its thread writes it */
    uint64_t calls;      /* recorded calls the thread has entered (moves while it runs) */
    uint64_t comm;       /* the call's communicator id (0: none) */
    uint32_t tid;        /* the thread's kernel tid (0: slot free) */
    uint32_t call;       /* enum mpir_waits_call; NONE: not inside a recorded call */
    int32_t peer;        /* source of a receive/probe, destination of a send: rank in comm */
    int32_t tag;
    int32_t send_peer;   /* Sendrecv: its destination; else MPIR_WAITS_NONE */
    int32_t send_tag;
    int32_t root;        /* rooted collectives; else MPIR_WAITS_NONE */
    uint32_t coll_seq;   /* collectives and communicator management: this call's number on comm */
    uint32_t nreqs;      /* completion calls: requests given (MPI_REQUEST_NULL ones included) */
    uint32_t flags;
    uint32_t reqs[MPIR_WAITS_WAIT_REQS]; /* their entries in the request table, index + 1; 0: a
                                             null or unrecorded request */
    uint64_t count;      /* elements of the buffer (point-to-point) */
};

/* A communicator this process belongs to. Its id is the same on every member and different
 * for different communicators, derived without communication (docs/wait-states.md):
 *   MPI_COMM_WORLD is 1; MPI_COMM_SELF is 2 (its only member is the process itself);
 *   a communicator made by the n-th communicator-creating call on parent P (dup, split,
 *   split_type, create, create_group: collective over P, so n is the same on every member of
 *   P) whose local rank 0 is world rank w has id mix(P, n, w) — splitmix64 of the three, never
 *   0, 1 or 2 — so the disjoint communicators one split makes differ by w. */
struct mpir_waits_comm {
    uint64_t generation; /* odd while being written */
    uint64_t id;         /* 0: free entry */
    uint64_t parent;     /* the parent's id (0 for the predefined ones) */
    uint64_t handle;     /* the MPI handle in this process (int or pointer, zero-extended) */
    int32_t size;        /* members */
    int32_t rank;        /* this process's rank in it */
    uint32_t coll_seq;   /* collectives (and communicator calls) entered on it so far */
    uint32_t kind;       /* enum mpir_waits_call of the call that made it; 0 predefined */
    uint32_t creations;  /* communicator-creating calls made on it so far (n above) */
    int32_t rank0_world; /* world rank of its local rank 0 (w above) */
};

/* A nonblocking or persistent request of this process. */
struct mpir_waits_request {
    uint64_t generation; /* odd while being written */
    uint64_t handle;     /* the MPI request handle (zero-extended); 0: free entry */
    uint64_t comm;       /* communicator id */
    uint32_t kind;       /* enum mpir_waits_call that made it (ISEND, IRECV, RECV_INIT, ...) */
    uint32_t active;     /* 1: started and not completed; 0: persistent and inactive */
    int32_t peer;
    int32_t tag;
    uint32_t coll_seq;   /* nonblocking collectives */
    uint32_t reserved;
    uint64_t count;
};

/* The exported symbol `mpir_waits`. */
struct mpir_waits_header {
    char magic[8];          /* MPIR_WAITS_MAGIC */
    uint32_t version;       /* MPIR_WAITS_VERSION */
    uint32_t header_size;   /* sizeof(struct mpir_waits_header) */
    uint32_t slot_size;     /* sizeof(struct mpir_waits_slot) */
    uint32_t comm_size;     /* sizeof(struct mpir_waits_comm) */
    uint32_t request_size;  /* sizeof(struct mpir_waits_request) */
    uint32_t slot_capacity; /* MPIR_WAITS_SLOTS */
    uint32_t comm_capacity;
    uint32_t request_capacity;
    uint32_t abi;           /* enum mpir_waits_abi */
    uint32_t state;         /* enum mpir_waits_state */
    uint32_t disabled;      /* enum mpir_waits_disabled */
    int32_t world_rank;     /* -1 until MPI_Init returned */
    int32_t world_size;
    uint32_t slots_used;    /* slots handed out so far (<= slot_capacity) */
    uint32_t slots_overflow;    /* threads that found no free slot (not recorded) */
    uint32_t comms_overflow;    /* communicators that found no free entry */
    uint32_t requests_overflow; /* requests that found no free entry */
    uint32_t comms_unknown;     /* calls naming a communicator not in the table (slot.comm 0) */
    uint64_t slots;         /* address of struct mpir_waits_slot[slot_capacity] */
    uint64_t comms;         /* address of struct mpir_waits_comm[comm_capacity] */
    uint64_t requests;      /* address of struct mpir_waits_request[request_capacity] */
    char library[MPIR_WAITS_LIBRARY]; /* MPI_Get_library_version, NUL-terminated, cut */
};

#endif
