/*
 * mpi2dd.h - the MPI-2 debugger interface (MPI2DD draft, version 1, variant 1) as a C
 * header, and the API of the reference provider (mpi2dd_provider.c).
 *
 * An MPI runtime provides the interface by linking mpi2dd_provider.c into every process a
 * debugger may meet (starter, metadirectory, directories, ranks) and calling:
 *
 *   mpi2dd_init(role flags, metadirectory host/executable/pid)   once, early;
 *   mpi2dd_proctable_add(...)                                    in directories, per rank;
 *   mpi2dd_directory_add / mpi2dd_metadirectory_add              in metadirectories;
 *   mpi2dd_event(MPI2DD_DEBUG_...)                               at points of interest.
 *
 * The provider owns MPI2DD_info and its tables. Tables are published so that a debugger may
 * read them while the process runs: an entry is written before the size that covers it, a
 * grown table is filled before its pointer is stored, and no published table or string is
 * ever freed or changed (a debugger that reads MPI2DD_info again after the tables and sees
 * the same pointers and sizes has read a consistent state). Not thread-safe: call it from one
 * thread, as an MPI progress engine would.
 */
#ifndef MPI2DD_H
#define MPI2DD_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint8_t MPI2DD_BYTE_T;
typedef int32_t MPI2DD_INT32_T;
typedef uint32_t MPI2DD_UINT32_T;

#define MPI2DD_DEBUG_START 1
#define MPI2DD_DEBUG_SPAWN 2
#define MPI2DD_DEBUG_CONNECT 3
#define MPI2DD_DEBUG_ACCEPT 4
#define MPI2DD_DEBUG_JOIN 5
#define MPI2DD_DEBUG_DIRECTORY_CHANGED 6
#define MPI2DD_DEBUG_METADIRECTORY_CHANGED 7
#define MPI2DD_DEBUG_ABORT 8

#define MPI2DD_FLAG_GATE 0x01
#define MPI2DD_FLAG_BEING_DEBUGGED 0x02
#define MPI2DD_FLAG_REQUEST_DIRECTORY_EVENTS 0x04

#define MPI2DD_MPIFLAG_I_AM_METADIR 0x01
#define MPI2DD_MPIFLAG_I_AM_DIR 0x02
#define MPI2DD_MPIFLAG_I_AM_STARTER 0x04
#define MPI2DD_MPIFLAG_FORCE_TO_MAIN 0x08
#define MPI2DD_MPIFLAG_IGNORE_QUEUE 0x10
#define MPI2DD_MPIFLAG_ACQUIRED_PRE_MAIN 0x20
#define MPI2DD_MPIFLAG_PARTIAL_ATTACH_OK 0x40

/* The table entries are packed (variant 1): a debugger reads them without DWARF. */
struct __attribute__((packed)) MPI2DD_SPAWNDESC {
    const char *parent_comm_world_id;
    MPI2DD_INT32_T parent_rank;
    MPI2DD_INT32_T sequence;
};

struct __attribute__((packed)) MPI2DD_PROCDESC {
    const char *host_name;
    const char *executable_name;
    const struct MPI2DD_SPAWNDESC *spawn_desc; /* NULL: a world created by a starter */
    const char *comm_world_id;
    MPI2DD_INT32_T pid;
    MPI2DD_INT32_T rank;
};

struct __attribute__((packed)) MPI2DD_DIRECTORYENTRY {
    const char *host_name;
    const char *executable_name;
    MPI2DD_INT32_T pid;
};

/* An ordinary struct: its members leave no padding in any data model. */
struct MPI2DD_INFO {
    MPI2DD_BYTE_T magic[5]; /* 'M' 'P' 'I' '2' 0x7f */
    MPI2DD_BYTE_T version;  /* 1 */
    MPI2DD_BYTE_T variant;  /* 1 */
    MPI2DD_BYTE_T debug_state;
    MPI2DD_UINT32_T debugger_flags; /* written by the debugger */
    MPI2DD_UINT32_T mpi_flags;
    const char *dll_name_32;
    const char *dll_name_64;
    const char *meta_host_name;
    const char *meta_executable_name;
    const char *abort_string;
    struct MPI2DD_PROCDESC *proctable;
    struct MPI2DD_DIRECTORYENTRY *directory_table;
    struct MPI2DD_DIRECTORYENTRY *metadirectory_table;
    MPI2DD_INT32_T proctable_size;
    MPI2DD_INT32_T directory_size;
    MPI2DD_INT32_T metadirectory_size;
    MPI2DD_INT32_T meta_pid;
    MPI2DD_INT32_T padding[8];
};

extern struct MPI2DD_INFO MPI2DD_info;
void MPI2DD_breakpoint(void);

/* --- The reference provider's API. Functions returning int return 0, or -1 with errno set
 * (ENOMEM, EINVAL, EOVERFLOW). Strings are copied. --- */

/* Sets mpi_flags and the metadirectory this process belongs to (for a metadirectory: itself). */
int mpi2dd_init(MPI2DD_UINT32_T mpi_flags, const char *meta_host, const char *meta_executable,
                MPI2DD_INT32_T meta_pid);

/* Directories: appends one rank. parent_comm_world_id NULL for a world a starter created;
 * otherwise the rank was spawned by parent_rank of that world as its sequence-th spawn (ranks
 * of one spawn share one descriptor). */
int mpi2dd_proctable_add(const char *host, const char *executable, const char *comm_world_id,
                         MPI2DD_INT32_T pid, MPI2DD_INT32_T rank,
                         const char *parent_comm_world_id, MPI2DD_INT32_T parent_rank,
                         MPI2DD_INT32_T sequence);

/* Metadirectories: appends a directory / another metadirectory (never this process: EINVAL). */
int mpi2dd_directory_add(const char *host, const char *executable, MPI2DD_INT32_T pid);
int mpi2dd_metadirectory_add(const char *host, const char *executable, MPI2DD_INT32_T pid);

/* Sets debug_state and calls MPI2DD_breakpoint. DIRECTORY_CHANGED and METADIRECTORY_CHANGED
 * are raised only when the debugger set MPI2DD_FLAG_REQUEST_DIRECTORY_EVENTS. Returns 1 when
 * the breakpoint function was called, 0 when not. */
int mpi2dd_event(int debug_state);

/* Sets abort_string and raises MPI2DD_DEBUG_ABORT. */
void mpi2dd_abort(const char *message);

/* The debugger's flags, read with acquire ordering (the debugger writes them at any time). */
MPI2DD_UINT32_T mpi2dd_debugger_flags(void);

#ifdef __cplusplus
}
#endif

#endif
