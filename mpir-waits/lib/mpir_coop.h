/* mpir_coop.h — the cooperative channel of libmpir_waits.so (mpir-waits/COOP.md is the one
 * description of the protocol; these structs are its layout, little-endian on every platform
 * this library builds for).
 *
 * When the kernel forbids ptrace and cross-process memory reads (Yama scope 3, seccomp), a rank
 * that has this library loaded answers for itself over a private per-user Unix socket,
 * `$MPIR_COOP_DIR/<pid>.sock` (else `/tmp/mpir-coop-<uid>/<pid>.sock`), started by the
 * MPI_Init wrapper once it records. One thread blocked in accept(); nothing runs unless asked.
 */
#ifndef MPIR_COOP_H
#define MPIR_COOP_H

#include <stdint.h>

#define MPIR_COOP_MAGIC "MPIRCOOP" /* 8 bytes, no NUL, in requests and answers */
#define MPIR_COOP_VERSION 1u

/* Request: 32 bytes. */
struct mpir_coop_request {
    char magic[8];
    uint32_t version;
    uint32_t opcode; /* enum mpir_coop_opcode */
    uint64_t arg0;
    uint64_t arg1;
};

/* Answer: 24 bytes, then `length` bytes of payload. */
struct mpir_coop_answer {
    char magic[8];
    uint32_t version;
    uint32_t status;  /* 0 ok, else an errno value (the payload then says more, or is empty) */
    uint64_t length;  /* payload bytes that follow */
};

enum mpir_coop_opcode {
    MPIR_COOP_HELLO = 1,
    MPIR_COOP_READ = 2,        /* arg0 address, arg1 length (<= MPIR_COOP_READ_MAX) */
    MPIR_COOP_MAPS = 3,
    MPIR_COOP_THREADS = 4,
    MPIR_COOP_PTRACER = 5,     /* the connected peer's own pid; the argument is ignored */
    MPIR_COOP_PTRACER_END = 6,
};

/* Limits: the server never sends more, the client never accepts more. */
#define MPIR_COOP_READ_MAX (1u << 20)
#define MPIR_COOP_MAPS_MAX (8u << 20)
#define MPIR_COOP_HELLO_MAX (32u << 10)
#define MPIR_COOP_EXE_MAX 4096u
#define MPIR_COOP_ENV_VALUE_MAX 1024u
#define MPIR_COOP_THREADS_MAX 1024u
#define MPIR_COOP_STACK_MAX (512u << 10)
#define MPIR_COOP_STACKS_TOTAL (64u << 20)
#define MPIR_COOP_ERROR_MAX 64u /* payload of an answer whose status is not 0 */

/* HELLO payload: this, then `exe_len` bytes of the executable's path (no NUL), then `env_len`
 * bytes of "KEY=VALUE\n" lines. */
struct mpir_coop_hello {
    uint32_t pid;
    uint32_t ppid;
    uint32_t uid;      /* effective uid */
    uint32_t reserved;
    int64_t rank;      /* MPI_COMM_WORLD rank as the library knows it after MPI_Init; -1 unknown */
    int64_t size;      /* -1 unknown */
    uint64_t start_time; /* field 22 of /proc/self/stat: clock ticks after boot */
    uint32_t exe_len;
    uint32_t env_len;
};

/* THREADS payload: this, then `count` records, each a struct mpir_coop_thread followed by its
 * `stack_len` bytes. */
struct mpir_coop_threads {
    uint32_t count;
    uint32_t signal;  /* the signal used */
    uint64_t wait_ns; /* from the first signal sent to the last answer (or the deadline) */
};

enum mpir_coop_thread_status {
    MPIR_COOP_CAPTURED = 0,     /* registers and stack copied by the thread itself */
    MPIR_COOP_NO_ANSWER = 1,    /* signalled, did not answer in time (blocked the signal?) */
    MPIR_COOP_COOP_THREAD = 2,  /* the channel's own thread: nothing captured */
    MPIR_COOP_GONE = 3,         /* exited before it could be signalled */
    MPIR_COOP_NOT_SIGNALLED = 4, /* tgkill failed (e.g. too many signals queued) */
    MPIR_COOP_BLOCKED = 5,      /* the thread blocks the capture signal: not sent */
};

#define MPIR_COOP_REGS 18 /* x86_64 DWARF 0..16 (rax rdx rcx rbx rsi rdi rbp rsp r8-r15 rip),
                             then fs_base */
struct mpir_coop_thread {
    uint32_t tid;
    uint32_t status;     /* enum mpir_coop_thread_status */
    uint64_t regs[MPIR_COOP_REGS];
    uint32_t regs_valid; /* bit i: regs[i] holds a value */
    uint32_t reserved;
    uint64_t stack_start; /* address of the first stack byte that follows */
    uint64_t stack_len;
};

/* The state of the channel, exported at the data symbol `mpir_coop` for a debugger (a channel
 * that was refused says why here; nothing is printed). */
enum mpir_coop_state {
    MPIR_COOP_OFF = 0,       /* not started (MPI_Init not recorded yet) */
    MPIR_COOP_LISTENING = 1,
    MPIR_COOP_REFUSED = 2,   /* no channel: `reason` says why, `error` the errno */
    MPIR_COOP_DISABLED = 3,  /* MPIR_COOP=0 */
    MPIR_COOP_CLOSED = 4,    /* after MPI_Finalize or exit */
};
enum mpir_coop_reason {
    MPIR_COOP_REASON_NONE = 0,
    MPIR_COOP_REASON_DIR = 1,        /* the directory cannot be created or read */
    MPIR_COOP_REASON_DIR_NOT_OURS = 2, /* not a real directory owned by us with mode 0700 */
    MPIR_COOP_REASON_PATH = 3,       /* the socket path does not fit sun_path */
    MPIR_COOP_REASON_SOCKET = 4,     /* socket/bind/listen failed */
    MPIR_COOP_REASON_THREAD = 5,     /* the thread could not be started */
};
struct mpir_coop_status {
    char magic[8]; /* "MPIRCOST" */
    uint32_t state;
    uint32_t reason;
    int32_t error;
    uint32_t signal; /* the capture signal chosen */
};

/* Called by the MPI_Init wrappers (mpir_waits.c) once recording, and by MPI_Finalize. */
void mpir_coop_start(int32_t rank, int32_t size);
void mpir_coop_stop(void);

#endif
