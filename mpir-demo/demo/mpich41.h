/* The MPICH 4.1 structures a debugger reads for message queues, declared as MPICH 4.1 declares
 * them (ch3 device, default build: 16-bit context ids, "global" thread granularity, debugger
 * support enabled), so that the DWARF of a program built with -g describes them as it does for
 * MPICH's libmpi. Sources: src/include/mpir_comm.h, mpir_group.h, mpir_request.h,
 * mpir_objects.h, mpir_contextid.h, mpir_debugger.h, mpi.h.in, src/mpi/debugger/dbginit.c
 * (MPIR_Comm_list), src/mpid/common/thread/mpidu_thread_fallback.h.
 *
 * Every member declared here has MPICH's name and type, in MPICH's order. Members nobody reads
 * for queue display are left out at the end of a struct (MPIR_Comm after `hints`, MPIR_Request
 * after `prev`, the device-specific parts) and in MPIR_Request's union (some alternatives);
 * types MPICH only points to are left incomplete. Written for this project from the published
 * declarations; no MPICH code. */
#ifndef MPIR_DEMO_MPICH41_H
#define MPIR_DEMO_MPICH41_H

#include <pthread.h>
#include <stdint.h>

/* ---- mpi.h (x86_64 Linux) ---- */
typedef int MPI_Comm;
typedef int MPI_Request;
typedef long MPI_Aint;
typedef struct MPI_Status {
    int count_lo;
    int count_hi_and_cancelled;
    int MPI_SOURCE;
    int MPI_TAG;
    int MPI_ERROR;
} MPI_Status;
#define MPI_COMM_WORLD ((MPI_Comm)0x44000000)
#define MPI_COMM_SELF ((MPI_Comm)0x44000001)
#define MPI_PROC_NULL (-1)
#define MPI_ANY_SOURCE (-2)
#define MPI_ANY_TAG (-1)
#define MPI_MAX_OBJECT_NAME 128

/* ---- mpir_objects.h, mpir_refcount_global.h ---- */
typedef int Handle_ref_count;
#define MPIR_OBJECT_HEADER \
    int handle;            \
    Handle_ref_count ref_count
typedef int MPIR_cc_t;
#define MPIR_COMM_N_BUILTIN 3
#define MPIR_COMM_PREALLOC 8
#define MPIR_GROUP_PREALLOC 8
#define MPIR_REQUEST_PREALLOC 8
/* Handles: kind in bits 30-31 (1 builtin, 2 direct), object type in bits 26-29. */
#define MPIR_ICOMM_WORLD ((MPI_Comm)0x44000002)
#define DEMO_DIRECT_COMM(i) ((int)(0x84000000u | (unsigned)(i)))
#define DEMO_DIRECT_GROUP(i) ((int)(0x88000000u | (unsigned)(i)))
#define DEMO_DIRECT_REQUEST(i) ((int)(0xac000000u | (unsigned)(i)))

/* ---- mpidu_thread_fallback.h (POSIX threads) ---- */
typedef pthread_mutex_t MPL_thread_mutex_t;
typedef pthread_t MPL_thread_id_t;
typedef struct {
    MPL_thread_mutex_t mutex;
    MPL_thread_id_t owner;
    int count;
} MPIDU_Thread_mutex_t;
typedef MPIDU_Thread_mutex_t MPID_Thread_mutex_t;

/* ---- mpir_contextid.h ---- */
typedef uint16_t MPIR_Context_id_t;
#define MPIR_CONTEXT_PREFIX_SHIFT 4
#define MPIR_CONTEXT_INTRA_COLL 1

/* ---- mpir_group.h ---- */
typedef struct MPII_Group_pmap_t {
    uint64_t lpid;
    int next_lpid;
} MPII_Group_pmap_t;

typedef struct MPIR_Group {
    MPIR_OBJECT_HEADER;
    int size;
    int rank;
    int idx_of_first_lpid;
    MPII_Group_pmap_t *lrank_to_lpid;
    int is_local_dense_monotonic;
} MPIR_Group;

/* ---- mpir_comm.h ---- */
typedef enum MPIR_Comm_kind_t {
    MPIR_COMM_KIND__INTRACOMM = 0,
    MPIR_COMM_KIND__INTERCOMM = 1
} MPIR_Comm_kind_t;

typedef enum MPIR_Comm_hierarchy_kind_t {
    MPIR_COMM_HIERARCHY_KIND__FLAT = 0,
    MPIR_COMM_HIERARCHY_KIND__PARENT = 1,
    MPIR_COMM_HIERARCHY_KIND__NODE_ROOTS = 2,
    MPIR_COMM_HIERARCHY_KIND__NODE = 3,
    MPIR_COMM_HIERARCHY_KIND__MULTI_LEADS = 4,
    MPIR_COMM_HIERARCHY_KIND__SIZE
} MPIR_Comm_hierarchy_kind_t;

#define MPIR_COMM_HINT_MAX 100

typedef struct MPIR_Attribute MPIR_Attribute;
typedef struct MPIR_Errhandler MPIR_Errhandler;

typedef struct MPIR_Comm {
    MPIR_OBJECT_HEADER;
    MPID_Thread_mutex_t mutex;
    MPIR_Context_id_t context_id;
    MPIR_Context_id_t recvcontext_id;
    int remote_size;
    int rank;
    MPIR_Attribute *attributes;
    int local_size;
    MPIR_Group *local_group, *remote_group;
    MPIR_Comm_kind_t comm_kind;
    char name[MPI_MAX_OBJECT_NAME];
    MPIR_Errhandler *errhandler;
    struct MPIR_Comm *local_comm;
    MPIR_Comm_hierarchy_kind_t hierarchy_kind;
    struct MPIR_Comm *node_comm;
    struct MPIR_Comm *node_roots_comm;
    int *intranode_table;
    int *internode_table;
    int node_count;
    int is_low_group;
    struct MPIR_Comm *comm_next;
    struct MPII_Topo_ops *topo_fns;
    int next_sched_tag;
    int revoked;
    int seq;
    int tainted;
    int hints[MPIR_COMM_HINT_MAX];
    /* coll, csel_comm, mapper_head/tail, stream_comm, dev: not declared */
} MPIR_Comm;

/* ---- mpir_request.h ---- */
typedef enum MPIR_Request_kind_t {
    MPIR_REQUEST_KIND__UNDEFINED,
    MPIR_REQUEST_KIND__SEND,
    MPIR_REQUEST_KIND__RECV,
    MPIR_REQUEST_KIND__PREQUEST_SEND,
    MPIR_REQUEST_KIND__PREQUEST_RECV,
    MPIR_REQUEST_KIND__PREQUEST_COLL,
    MPIR_REQUEST_KIND__PART_SEND,
    MPIR_REQUEST_KIND__PART_RECV,
    MPIR_REQUEST_KIND__PART,
    MPIR_REQUEST_KIND__ENQUEUE,
    MPIR_REQUEST_KIND__GREQUEST,
    MPIR_REQUEST_KIND__COLL,
    MPIR_REQUEST_KIND__MPROBE,
    MPIR_REQUEST_KIND__RMA,
    MPIR_REQUEST_KIND__LAST
} MPIR_Request_kind_t;

typedef void *MPIR_TSP_sched_t;
typedef struct MPIR_Win MPIR_Win;

typedef struct MPIR_Request {
    MPIR_OBJECT_HEADER;
    MPIR_Request_kind_t kind;
    MPIR_cc_t *cc_ptr;
    MPIR_cc_t cc;
    MPIR_Comm *comm;
    MPI_Status status;
    union {
        struct {
            struct MPIR_Grequest_fns *greq_fns;
        } ureq;
        struct {
            struct MPIR_Request *real_request;
            MPIR_TSP_sched_t sched;
        } persist;
        struct {
            MPIR_Win *win;
        } rma;
        /* nbc, persist_coll, part, enqueue: not declared */
    } u;
    struct MPIR_Debugq *send;
    struct MPIR_Debugq *recv;
    struct MPIR_Debugq *unexp;
    struct MPIR_Request *next, *prev;
    /* device part: not declared */
} MPIR_Request;

/* ---- mpir_debugger.h ---- */
typedef struct MPIR_Debugq {
    MPIR_Request *req;
    int tag, rank, context_id;
    const void *buf;
    MPI_Aint count;
    struct MPIR_Debugq *next;
    struct MPIR_Debugq *prev;
} MPIR_Debugq;

/* ---- dbginit.c ---- */
typedef struct MPIR_Comm_list {
    int sequence_number;
    MPIR_Comm *head;
} MPIR_Comm_list;

#define MPIR_DEBUG_SPAWNED 1

#endif
