/*
 * mpi2dd_provider.c - reference provider of the MPI-2 debugger interface (see mpi2dd.h).
 *
 * Publication order (a debugger may read while we run): entries are written before the size
 * that covers them; a table that must grow is copied into a new array that is filled before
 * its pointer is stored, and the size is stored after the pointer; old arrays, spawn
 * descriptors and strings are never freed (they stay valid for a reader holding an old
 * pointer; the memory kept is at most twice the final tables plus the strings).
 */
#include "mpi2dd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct MPI2DD_INFO MPI2DD_info = {
    .magic = {'M', 'P', 'I', '2', 0x7f},
    .version = 1,
    .variant = 1,
};

/* noinline + an empty asm: the call and the function's address survive any optimisation. */
__attribute__((noinline, used)) void MPI2DD_breakpoint(void)
{
    __asm__ volatile("" ::: "memory");
}

/* A grow-only table. */
struct table {
    void *data;
    int32_t capacity;
};

static struct table proctable, directories, metadirectories;

/* Interned strings: equal strings share one copy (as the draft suggests for tables). */
struct interned {
    struct interned *next;
    char text[];
};
static struct interned *strings;

static const char *intern(const char *s)
{
    if (s == NULL)
        return NULL;
    for (struct interned *i = strings; i != NULL; i = i->next)
        if (strcmp(i->text, s) == 0)
            return i->text;
    size_t n = strlen(s) + 1;
    struct interned *i = malloc(sizeof *i + n);
    if (i == NULL)
        return NULL;
    memcpy(i->text, s, n);
    i->next = strings;
    strings = i;
    return i->text;
}

static void store_release_i32(int32_t *slot, int32_t v)
{
    __atomic_store_n(slot, v, __ATOMIC_RELEASE);
}

/* Returns the slot for entry `size` of `t` (published at *published), growing first. */
static void *slot_for(struct table *t, void **published, int32_t size, size_t entry)
{
    if (size == INT32_MAX) {
        errno = EOVERFLOW;
        return NULL;
    }
    if (size >= t->capacity) {
        int32_t cap = t->capacity ? (t->capacity > INT32_MAX / 2 ? INT32_MAX : t->capacity * 2)
                                  : 8;
        void *grown = calloc((size_t)cap, entry);
        if (grown == NULL)
            return NULL;
        if (size > 0)
            memcpy(grown, t->data, (size_t)size * entry);
        /* The old array is left allocated: a reader may still hold its address. */
        t->data = grown;
        t->capacity = cap;
        __atomic_store_n(published, grown, __ATOMIC_RELEASE);
    }
    return (char *)t->data + (size_t)size * entry;
}

int mpi2dd_init(MPI2DD_UINT32_T mpi_flags, const char *meta_host, const char *meta_executable,
                MPI2DD_INT32_T meta_pid)
{
    const char *h = intern(meta_host), *e = intern(meta_executable);
    if ((meta_host != NULL && h == NULL) || (meta_executable != NULL && e == NULL))
        return -1;
    MPI2DD_info.mpi_flags = mpi_flags;
    MPI2DD_info.meta_host_name = h;
    MPI2DD_info.meta_executable_name = e;
    MPI2DD_info.meta_pid = meta_pid;
    return 0;
}

struct spawn_node {
    struct spawn_node *next;
    struct MPI2DD_SPAWNDESC desc;
};
static struct spawn_node *spawns;

static const struct MPI2DD_SPAWNDESC *spawn_desc(const char *parent_world, int32_t parent_rank,
                                                 int32_t sequence)
{
    const char *w = intern(parent_world);
    if (w == NULL)
        return NULL;
    for (struct spawn_node *s = spawns; s != NULL; s = s->next)
        if (s->desc.parent_comm_world_id == w && s->desc.parent_rank == parent_rank &&
            s->desc.sequence == sequence)
            return &s->desc;
    struct spawn_node *s = malloc(sizeof *s);
    if (s == NULL)
        return NULL;
    s->desc.parent_comm_world_id = w;
    s->desc.parent_rank = parent_rank;
    s->desc.sequence = sequence;
    s->next = spawns;
    spawns = s;
    return &s->desc;
}

int mpi2dd_proctable_add(const char *host, const char *executable, const char *comm_world_id,
                         MPI2DD_INT32_T pid, MPI2DD_INT32_T rank,
                         const char *parent_comm_world_id, MPI2DD_INT32_T parent_rank,
                         MPI2DD_INT32_T sequence)
{
    if (host == NULL || comm_world_id == NULL || pid <= 0 || rank < 0) {
        errno = EINVAL;
        return -1;
    }
    const struct MPI2DD_SPAWNDESC *sd = NULL;
    if (parent_comm_world_id != NULL && (sd = spawn_desc(parent_comm_world_id, parent_rank,
                                                         sequence)) == NULL)
        return -1;
    struct MPI2DD_PROCDESC e = {
        .host_name = intern(host),
        .executable_name = intern(executable),
        .spawn_desc = sd,
        .comm_world_id = intern(comm_world_id),
        .pid = pid,
        .rank = rank,
    };
    if (e.host_name == NULL || e.comm_world_id == NULL ||
        (executable != NULL && e.executable_name == NULL))
        return -1;
    int32_t size = MPI2DD_info.proctable_size;
    void *slot = slot_for(&proctable, (void **)&MPI2DD_info.proctable, size, sizeof e);
    if (slot == NULL)
        return -1;
    memcpy(slot, &e, sizeof e);
    store_release_i32(&MPI2DD_info.proctable_size, size + 1);
    return 0;
}

static int dir_add(struct table *t, struct MPI2DD_DIRECTORYENTRY **published, int32_t *size_field,
                   const char *host, const char *executable, int32_t pid)
{
    if (host == NULL || pid <= 0) {
        errno = EINVAL;
        return -1;
    }
    /* The draft: a process is not in its own tables. */
    if (pid == getpid() && MPI2DD_info.meta_host_name != NULL &&
        strcmp(host, MPI2DD_info.meta_host_name) == 0) {
        errno = EINVAL;
        return -1;
    }
    struct MPI2DD_DIRECTORYENTRY e = {
        .host_name = intern(host),
        .executable_name = intern(executable),
        .pid = pid,
    };
    if (e.host_name == NULL || (executable != NULL && e.executable_name == NULL))
        return -1;
    int32_t size = *size_field;
    void *slot = slot_for(t, (void **)published, size, sizeof e);
    if (slot == NULL)
        return -1;
    memcpy(slot, &e, sizeof e);
    store_release_i32(size_field, size + 1);
    return 0;
}

int mpi2dd_directory_add(const char *host, const char *executable, MPI2DD_INT32_T pid)
{
    return dir_add(&directories, &MPI2DD_info.directory_table, &MPI2DD_info.directory_size,
                   host, executable, pid);
}

int mpi2dd_metadirectory_add(const char *host, const char *executable, MPI2DD_INT32_T pid)
{
    return dir_add(&metadirectories, &MPI2DD_info.metadirectory_table,
                   &MPI2DD_info.metadirectory_size, host, executable, pid);
}

MPI2DD_UINT32_T mpi2dd_debugger_flags(void)
{
    return __atomic_load_n(&MPI2DD_info.debugger_flags, __ATOMIC_ACQUIRE);
}

int mpi2dd_event(int debug_state)
{
    if ((debug_state == MPI2DD_DEBUG_DIRECTORY_CHANGED ||
         debug_state == MPI2DD_DEBUG_METADIRECTORY_CHANGED) &&
        !(mpi2dd_debugger_flags() & MPI2DD_FLAG_REQUEST_DIRECTORY_EVENTS))
        return 0;
    __atomic_store_n(&MPI2DD_info.debug_state, (MPI2DD_BYTE_T)debug_state, __ATOMIC_RELEASE);
    MPI2DD_breakpoint();
    return 1;
}

void mpi2dd_abort(const char *message)
{
    MPI2DD_info.abort_string = intern(message);
    mpi2dd_event(MPI2DD_DEBUG_ABORT);
}
