/* mpir_coop.c — the cooperative channel of libmpir_waits.so (protocol: mpir-waits/COOP.md,
 * layout: mpir_coop.h).
 *
 * Started by the MPI_Init wrappers once they record (mpir_coop_start), never at load time.
 * One detached thread, with every signal blocked, waits in accept() on
 * `<dir>/<pid>.sock`; it serves one client at a time and does all the work itself. The MPI
 * threads never wait for it and it takes no lock they take (no stdio; its buffers are its own
 * mmap'd memory; the only shared state is atomics).
 *
 * THREADS is the one request that touches other threads: each is sent a real-time signal
 * (tgkill) whose handler — async-signal-safe: atomics, gettid, arch_prctl, process_vm_readv,
 * pread — copies the thread's registers from its ucontext and its live stack into a slot the
 * channel's thread prepared, then marks the slot done. The channel's thread waits a bounded
 * time; a slot whose thread never answered is given up, and the memory holding the slots is
 * unmapped only once no handler can still be inside it (else it is left mapped: a leak
 * bounded by one capture per request that met a late thread).
 */
#define _GNU_SOURCE
#include "mpir_coop.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <asm/prctl.h>
#endif

#define API __attribute__((visibility("default")))

_Static_assert(sizeof(struct mpir_coop_request) == 32, "request layout");
_Static_assert(sizeof(struct mpir_coop_answer) == 24, "answer layout");
_Static_assert(sizeof(struct mpir_coop_hello) == 48, "hello layout");
_Static_assert(sizeof(struct mpir_coop_threads) == 16, "threads layout");
_Static_assert(sizeof(struct mpir_coop_thread) == 176, "thread layout");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the protocol is little-endian");

API struct mpir_coop_status mpir_coop = {
    .magic = {'M', 'P', 'I', 'R', 'C', 'O', 'S', 'T'},
    .state = MPIR_COOP_OFF,
};

#define IDLE_MS 2000          /* a connection with no request for this long is closed */
#define IDLE_GRANTED_MS 30000 /* ... while a PTRACER grant it made is in force */
#define IO_TIMEOUT_S 2        /* SO_RCVTIMEO / SO_SNDTIMEO within a request or answer */
#define CAPTURE_WAIT_NS 300000000ll
#define LATE_WAIT_NS 100000000ll
#define MAX_RANGES 65536
#define RED_ZONE 128

static int listen_fd = -1;
static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static pid_t owner_pid;
static int32_t my_rank = -1, my_size = -1;
static int capture_signal;
static char env_lines[MPIR_COOP_HELLO_MAX / 2]; /* snapshot at start: "K=V\n" lines */
static uint32_t env_len;

static const char *const env_names[] = {
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",    "PMI_RANK",     "PMI_SIZE",
    "PMIX_RANK",            "PMIX_NAMESPACE",          "OMPI_MCA_ess_base_jobid",
    "PMI_KVSNAME",          "SLURM_JOB_ID",            "SLURM_STEP_ID", "SLURM_PROCID",
};

static void set_state(uint32_t state, uint32_t reason, int err) {
    mpir_coop.reason = reason;
    mpir_coop.error = err;
    __atomic_store_n(&mpir_coop.state, state, __ATOMIC_RELEASE);
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000ll + t.tv_nsec;
}

static void nap_ns(long ns) {
    struct timespec t = {0, ns};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

static void *map_anon(size_t len) {
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* ---- the directory and the socket ----------------------------------------------------- */

/* 0 when `dir` is usable: created 0700 here, or a real directory owned by us with mode 0700. */
static int dir_usable(const char *dir, uint32_t *reason) {
    if (mkdir(dir, 0700) == 0) chmod(dir, 0700); /* the umask may have taken bits */
    else if (errno != EEXIST) {
        *reason = MPIR_COOP_REASON_DIR;
        return errno;
    }
    struct stat st;
    if (lstat(dir, &st) != 0) {
        *reason = MPIR_COOP_REASON_DIR;
        return errno;
    }
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 07777) != 0700) {
        *reason = MPIR_COOP_REASON_DIR_NOT_OURS;
        return EPERM;
    }
    return 0;
}

static int open_socket(uint32_t *reason) {
    char dir[sizeof sock_path];
    const char *d = getenv("MPIR_COOP_DIR");
    int n = d && *d ? snprintf(dir, sizeof dir, "%s", d)
                    : snprintf(dir, sizeof dir, "/tmp/mpir-coop-%u", (unsigned)geteuid());
    if (n <= 0 || (size_t)n >= sizeof dir) {
        *reason = MPIR_COOP_REASON_PATH;
        return ENAMETOOLONG;
    }
    int err = dir_usable(dir, reason);
    if (err) return err;
    n = snprintf(sock_path, sizeof sock_path, "%s/%d.sock", dir, (int)owner_pid);
    if (n <= 0 || (size_t)n >= sizeof sock_path) {
        sock_path[0] = 0;
        *reason = MPIR_COOP_REASON_PATH;
        return ENAMETOOLONG;
    }
    *reason = MPIR_COOP_REASON_SOCKET;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return errno;
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, sock_path, (size_t)n + 1);
    unlink(sock_path); /* a stale socket of an earlier process with this pid */
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0) {
        err = errno;
        close(fd);
        unlink(sock_path);
        sock_path[0] = 0;
        return err;
    }
    listen_fd = fd;
    *reason = MPIR_COOP_REASON_NONE;
    return 0;
}

static void remove_socket(void) {
    /* Only the process that bound it: a forked child runs the same atexit handlers. */
    if (getpid() != owner_pid || sock_path[0] == 0) return;
    unlink(sock_path);
    sock_path[0] = 0;
}

static void at_exit(void) {
    if (getpid() != owner_pid) return;
    if (__atomic_load_n(&mpir_coop.state, __ATOMIC_ACQUIRE) == MPIR_COOP_LISTENING)
        set_state(MPIR_COOP_CLOSED, MPIR_COOP_REASON_NONE, 0);
    remove_socket();
}

/* ---- I/O with the client --------------------------------------------------------------- */

static int send_all(int fd, const void *p, size_t n) {
    const char *b = p;
    while (n > 0) {
        ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

static int recv_all(int fd, void *p, size_t n) {
    char *b = p;
    while (n > 0) {
        ssize_t k = recv(fd, b, n, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

static int answer(int fd, uint32_t status, const void *payload, uint64_t len) {
    struct mpir_coop_answer a;
    memcpy(a.magic, MPIR_COOP_MAGIC, 8);
    a.version = MPIR_COOP_VERSION;
    a.status = status;
    a.length = len;
    if (send_all(fd, &a, sizeof a) != 0) return -1;
    return len ? send_all(fd, payload, (size_t)len) : 0;
}

/* Reads a whole file of at most `cap` bytes into `buf`; -1 on error, -2 when it is larger. */
static ssize_t read_file(const char *path, char *buf, size_t cap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t got = 0;
    for (;;) {
        if (got == cap) {
            char probe;
            ssize_t k = read(fd, &probe, 1);
            close(fd);
            return k == 0 ? (ssize_t)got : -2;
        }
        ssize_t k = read(fd, buf + got, cap - got);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        if (k == 0) break;
        got += (size_t)k;
    }
    close(fd);
    return (ssize_t)got;
}

/* ---- HELLO ----------------------------------------------------------------------------- */

static uint64_t start_time(void) {
    char s[4096];
    ssize_t n = read_file("/proc/self/stat", s, sizeof s - 1);
    if (n <= 0) return 0;
    s[n] = 0;
    char *p = strrchr(s, ')');
    if (!p) return 0;
    /* Field 3 follows ") "; field 22 is 19 fields further. */
    p += 2;
    for (int f = 3; f < 22 && p; f++) {
        p = strchr(p, ' ');
        if (p) p++;
    }
    return p ? strtoull(p, NULL, 10) : 0;
}

static void snapshot_env(void) {
    env_len = 0;
    for (size_t i = 0; i < sizeof env_names / sizeof env_names[0]; i++) {
        const char *v = getenv(env_names[i]);
        if (!v) continue;
        size_t vl = strnlen(v, MPIR_COOP_ENV_VALUE_MAX);
        size_t need = strlen(env_names[i]) + 1 + vl + 1;
        if (env_len + need > sizeof env_lines) break;
        char *o = env_lines + env_len;
        size_t kl = strlen(env_names[i]);
        memcpy(o, env_names[i], kl);
        o[kl] = '=';
        memcpy(o + kl + 1, v, vl);
        /* A value holding a newline would split its line: cut it there. */
        for (size_t j = 0; j < vl; j++)
            if (o[kl + 1 + j] == '\n') o[kl + 1 + j] = ' ';
        o[kl + 1 + vl] = '\n';
        env_len += (uint32_t)need;
    }
}

static int do_hello(int fd) {
    static char buf[MPIR_COOP_HELLO_MAX];
    struct mpir_coop_hello h;
    memset(&h, 0, sizeof h);
    h.pid = (uint32_t)owner_pid;
    h.ppid = (uint32_t)getppid();
    h.uid = (uint32_t)geteuid();
    h.rank = my_rank;
    h.size = my_size;
    h.start_time = start_time();
    char *exe = buf + sizeof h;
    ssize_t n = readlink("/proc/self/exe", exe, MPIR_COOP_EXE_MAX);
    h.exe_len = n > 0 ? (uint32_t)n : 0;
    h.env_len = env_len;
    memcpy(exe + h.exe_len, env_lines, env_len);
    memcpy(buf, &h, sizeof h);
    return answer(fd, 0, buf, sizeof h + h.exe_len + h.env_len);
}

/* ---- READ, MAPS ------------------------------------------------------------------------ */

static char *read_buf;            /* MPIR_COOP_READ_MAX */
static char *maps_buf;            /* MPIR_COOP_MAPS_MAX */
static int mem_fd = -1;           /* /proc/self/mem: the fallback of process_vm_readv */

/* Copies [addr, addr+len) of this process into `to` without ever faulting: bytes read. */
static ssize_t read_self(void *to, uint64_t addr, size_t len) {
    struct iovec l = {to, len}, r = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_readv(owner_pid, &l, 1, &r, 1, 0);
    if (n < 0 && (errno == EPERM || errno == ENOSYS) && mem_fd >= 0)
        n = pread(mem_fd, to, len, (off_t)addr);
    return n;
}

static int do_read(int fd, uint64_t addr, uint64_t len) {
    if (len > MPIR_COOP_READ_MAX) return answer(fd, E2BIG, NULL, 0);
    if (len == 0) return answer(fd, 0, NULL, 0);
    if (!read_buf && !(read_buf = map_anon(MPIR_COOP_READ_MAX))) return answer(fd, ENOMEM, NULL, 0);
    ssize_t n = read_self(read_buf, addr, (size_t)len);
    if (n <= 0) return answer(fd, n < 0 ? (uint32_t)errno : EFAULT, NULL, 0);
    return answer(fd, 0, read_buf, (uint64_t)n);
}

/* /proc/self/maps into maps_buf: its length, or -errno. */
static ssize_t read_maps(void) {
    if (!maps_buf && !(maps_buf = map_anon(MPIR_COOP_MAPS_MAX + 1))) return -ENOMEM;
    ssize_t n = read_file("/proc/self/maps", maps_buf, MPIR_COOP_MAPS_MAX);
    if (n == -2) return -E2BIG;
    if (n < 0) return -errno;
    maps_buf[n] = 0; /* strtoull in writable_ranges() stops there at the latest */
    return n;
}

static int do_maps(int fd) {
    ssize_t n = read_maps();
    if (n < 0) return answer(fd, (uint32_t)-n, NULL, 0);
    return answer(fd, 0, maps_buf, (uint64_t)n);
}

/* ---- THREADS --------------------------------------------------------------------------- */

enum { S_IDLE, S_ARMED, S_BUSY, S_DONE, S_GIVEN_UP };

struct range {
    uint64_t start, end;
};

struct slot {
    int32_t tid;
    uint32_t state; /* S_*, atomically */
    struct mpir_coop_thread rec;
    uint8_t *buf;
};

struct capture {
    uint32_t n, nranges;
    uint64_t cap; /* stack bytes per slot */
    int mem_fd;
    struct range *ranges;
    struct slot *slots;
};

static struct capture *current; /* what a handler fills (atomically; NULL: none) */
static uint32_t inflight;       /* handlers between reading `current` and leaving */

#if defined(__x86_64__)
static void fill(struct capture *c, struct slot *s, const ucontext_t *uc) {
    const greg_t *g = uc->uc_mcontext.gregs;
    static const int order[17] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI,
                                  REG_RBP, REG_RSP, REG_R8,  REG_R9,  REG_R10, REG_R11,
                                  REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
    for (int i = 0; i < 17; i++) s->rec.regs[i] = (uint64_t)g[order[i]];
    s->rec.regs_valid = (1u << 17) - 1;
    unsigned long fs = 0;
    if (syscall(SYS_arch_prctl, ARCH_GET_FS, &fs) == 0) {
        s->rec.regs[17] = fs;
        s->rec.regs_valid |= 1u << 17;
    }
    uint64_t sp = (uint64_t)g[REG_RSP], from = sp >= RED_ZONE ? sp - RED_ZONE : 0, end = 0;
    for (uint32_t i = 0; i < c->nranges; i++) {
        if (c->ranges[i].start <= sp && sp < c->ranges[i].end) {
            end = c->ranges[i].end;
            if (from < c->ranges[i].start) from = c->ranges[i].start;
            break;
        }
    }
    if (end == 0) end = sp + c->cap; /* a stack the map did not show: read what is there */
    uint64_t len = end - from < c->cap ? end - from : c->cap;
    struct iovec l = {s->buf, (size_t)len}, r = {(void *)(uintptr_t)from, (size_t)len};
    ssize_t n = len ? process_vm_readv(owner_pid, &l, 1, &r, 1, 0) : 0;
    if (n < 0 && c->mem_fd >= 0) n = pread(c->mem_fd, s->buf, (size_t)len, (off_t)from);
    s->rec.stack_start = from;
    s->rec.stack_len = n > 0 ? (uint64_t)n : 0;
    s->rec.status = MPIR_COOP_CAPTURED;
}
#endif

static void on_signal(int sig, siginfo_t *si, void *uc) {
    (void)sig;
    /* Only the channel's own tgkill: not a signal someone else sent with this number. */
    if (si->si_code != SI_TKILL || si->si_pid != owner_pid) return;
    int saved = errno;
    __atomic_add_fetch(&inflight, 1u, __ATOMIC_SEQ_CST);
    struct capture *c = __atomic_load_n(&current, __ATOMIC_SEQ_CST);
    if (c) {
        int32_t me = (int32_t)syscall(SYS_gettid);
        for (uint32_t i = 0; i < c->n; i++) {
            struct slot *s = &c->slots[i];
            if (s->tid != me) continue;
            uint32_t armed = S_ARMED;
            if (__atomic_compare_exchange_n(&s->state, &armed, S_BUSY, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_RELAXED)) {
#if defined(__x86_64__)
                fill(c, s, uc);
#else
                (void)uc;
#endif
                __atomic_store_n(&s->state, S_DONE, __ATOMIC_RELEASE);
            }
            break;
        }
    }
    __atomic_sub_fetch(&inflight, 1u, __ATOMIC_SEQ_CST);
    errno = saved;
}

/* 0 when our handler is (now) installed; EBUSY when the signal belongs to someone else. */
static int handler_ready(void) {
    struct sigaction old;
    if (sigaction(capture_signal, NULL, &old) != 0) return errno;
    if ((old.sa_flags & SA_SIGINFO) && old.sa_sigaction == on_signal) return 0;
    if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) return EBUSY;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);
    return sigaction(capture_signal, &sa, NULL) != 0 ? errno : 0;
}

/* The threads of this process, at most `cap`: their count. */
static uint32_t list_tasks(int32_t *tids, uint32_t cap) {
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return 0;
    uint32_t n = 0;
    char buf[4096] __attribute__((aligned(8)));
    for (;;) {
        long k = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (k <= 0) break;
        for (long off = 0; off < k;) {
            /* struct linux_dirent64: ino 8, off 8, reclen 2, type 1, name */
            unsigned short reclen;
            memcpy(&reclen, buf + off + 16, 2);
            const char *name = buf + off + 19;
            if (reclen == 0) break;
            off += reclen;
            if (name[0] < '1' || name[0] > '9') continue;
            long t = strtol(name, NULL, 10);
            if (n < cap && t > 0) tids[n++] = (int32_t)t;
        }
    }
    close(fd);
    return n;
}

/* Whether thread `tid` blocks the capture signal, and whether one is already pending for it
 * (an earlier request it never answered: RT signals queue, so another is not sent). */
static void signal_state(int32_t tid, int *blocked, int *pending) {
    char path[64], text[4096];
    *blocked = *pending = 0;
    snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
    ssize_t n = read_file(path, text, sizeof text - 1);
    if (n <= 0) return;
    text[n] = 0;
    unsigned long long bit = 1ull << (capture_signal - 1);
    const char *p = strstr(text, "\nSigPnd:");
    if (p) *pending = (strtoull(p + 8, NULL, 16) & bit) != 0;
    p = strstr(text, "\nSigBlk:");
    if (p) *blocked = (strtoull(p + 8, NULL, 16) & bit) != 0;
}

/* Readable and writable ranges of /proc/self/maps (in maps_buf, `len` bytes). */
static uint32_t writable_ranges(const char *m, size_t len, struct range *out, uint32_t cap) {
    uint32_t n = 0;
    const char *end = m + len;
    while (m < end && n < cap) {
        const char *nl = memchr(m, '\n', (size_t)(end - m));
        const char *line_end = nl ? nl : end;
        char *p;
        unsigned long long a = strtoull(m, &p, 16), b = 0;
        if (p < line_end && *p == '-') b = strtoull(p + 1, &p, 16);
        if (p + 3 < line_end && p[0] == ' ' && p[1] == 'r' && p[2] == 'w' && b > a)
            out[n++] = (struct range){a, b};
        m = line_end + 1;
    }
    return n;
}

static int do_threads(int fd) {
#if !defined(__x86_64__)
    return answer(fd, ENOSYS, NULL, 0);
#else
    int err = handler_ready();
    if (err == EBUSY) {
        uint32_t sig = (uint32_t)capture_signal;
        return answer(fd, EBUSY, &sig, sizeof sig);
    }
    if (err) return answer(fd, (uint32_t)err, NULL, 0);
    static int32_t tids[MPIR_COOP_THREADS_MAX];
    uint32_t n = list_tasks(tids, MPIR_COOP_THREADS_MAX);
    ssize_t mlen = read_maps();
    if (n == 0 || mlen < 0) return answer(fd, n == 0 ? EIO : (uint32_t)-mlen, NULL, 0);
    uint64_t cap = MPIR_COOP_STACKS_TOTAL / n;
    if (cap > MPIR_COOP_STACK_MAX) cap = MPIR_COOP_STACK_MAX;
    cap &= ~(uint64_t)15;
    size_t head = (sizeof(struct capture) + 63) & ~(size_t)63;
    size_t ranges_at = head, slots_at = ranges_at + MAX_RANGES * sizeof(struct range);
    size_t bufs_at = (slots_at + n * sizeof(struct slot) + 4095) & ~(size_t)4095;
    size_t total = bufs_at + n * cap;
    char *area = map_anon(total);
    if (!area) return answer(fd, ENOMEM, NULL, 0);
    struct capture *c = (struct capture *)area;
    c->n = n;
    c->cap = cap;
    c->mem_fd = mem_fd;
    c->ranges = (struct range *)(area + ranges_at);
    c->slots = (struct slot *)(area + slots_at);
    c->nranges = writable_ranges(maps_buf, (size_t)mlen, c->ranges, MAX_RANGES);
    int32_t me = (int32_t)syscall(SYS_gettid);
    for (uint32_t i = 0; i < n; i++) {
        struct slot *s = &c->slots[i];
        s->tid = tids[i];
        s->rec.tid = (uint32_t)tids[i];
        s->rec.status = tids[i] == me ? MPIR_COOP_COOP_THREAD : MPIR_COOP_NO_ANSWER;
        s->buf = (uint8_t *)area + bufs_at + i * cap;
        s->state = tids[i] == me ? S_IDLE : S_ARMED;
    }
    __atomic_store_n(&current, c, __ATOMIC_SEQ_CST);
    int64_t t0 = now_ns();
    for (uint32_t i = 0; i < n; i++) {
        struct slot *s = &c->slots[i];
        if (s->state != S_ARMED) continue;
        int blocked, pending;
        signal_state(s->tid, &blocked, &pending);
        if (blocked) {
            uint32_t armed = S_ARMED; /* a signal queued earlier may still be delivered */
            if (__atomic_compare_exchange_n(&s->state, &armed, S_GIVEN_UP, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_RELAXED))
                s->rec.status = MPIR_COOP_BLOCKED;
            continue;
        }
        if (pending) continue; /* its queued signal will answer this request */
        if (syscall(SYS_tgkill, owner_pid, s->tid, capture_signal) != 0) {
            uint32_t armed = S_ARMED;
            if (__atomic_compare_exchange_n(&s->state, &armed, S_GIVEN_UP, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_RELAXED))
                s->rec.status = errno == ESRCH ? MPIR_COOP_GONE : MPIR_COOP_NOT_SIGNALLED;
        }
    }
    /* Wait for every signalled thread, at most CAPTURE_WAIT_NS. */
    int64_t t1 = t0;
    for (;;) {
        uint32_t waiting = 0;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t st = __atomic_load_n(&c->slots[i].state, __ATOMIC_ACQUIRE);
            waiting += st == S_ARMED || st == S_BUSY;
        }
        t1 = now_ns();
        if (waiting == 0 || t1 - t0 >= CAPTURE_WAIT_NS) break;
        nap_ns(1000000);
    }
    /* Give up the threads that did not answer; one being copied right now gets a little more. */
    int leak = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct slot *s = &c->slots[i];
        uint32_t armed = S_ARMED;
        __atomic_compare_exchange_n(&s->state, &armed, S_GIVEN_UP, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE);
        for (int64_t t = now_ns(); __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == S_BUSY;) {
            if (now_ns() - t > LATE_WAIT_NS) {
                leak = 1;
                break;
            }
            nap_ns(1000000);
        }
    }
    __atomic_store_n(&current, (struct capture *)NULL, __ATOMIC_SEQ_CST);
    for (int64_t t = now_ns(); __atomic_load_n(&inflight, __ATOMIC_SEQ_CST) != 0;) {
        if (now_ns() - t > LATE_WAIT_NS) {
            leak = 1;
            break;
        }
        nap_ns(1000000);
    }
    struct mpir_coop_threads th = {n, (uint32_t)capture_signal, (uint64_t)(t1 - t0)};
    uint64_t len = sizeof th;
    for (uint32_t i = 0; i < n; i++) {
        struct slot *s = &c->slots[i];
        if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != S_DONE) {
            s->rec.regs_valid = 0;
            s->rec.stack_len = 0;
            s->rec.stack_start = 0;
        }
        len += sizeof s->rec + s->rec.stack_len;
    }
    struct mpir_coop_answer a;
    memcpy(a.magic, MPIR_COOP_MAGIC, 8);
    a.version = MPIR_COOP_VERSION;
    a.status = 0;
    a.length = len;
    int rc = send_all(fd, &a, sizeof a) == 0 && send_all(fd, &th, sizeof th) == 0 ? 0 : -1;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        struct slot *s = &c->slots[i];
        if (send_all(fd, &s->rec, sizeof s->rec) != 0 ||
            (s->rec.stack_len && send_all(fd, s->buf, (size_t)s->rec.stack_len) != 0))
            rc = -1;
    }
    if (!leak) munmap(area, total);
    return rc;
#endif
}

/* ---- the channel's thread -------------------------------------------------------------- */

static void serve(int fd) {
    struct ucred cr;
    socklen_t cl = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 ||
        (cr.uid != geteuid() && cr.uid != 0))
        return;
    struct timeval tv = {IO_TIMEOUT_S, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int granted = 0;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        int k = poll(&p, 1, granted ? IDLE_GRANTED_MS : IDLE_MS);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        struct mpir_coop_request q;
        if (recv_all(fd, &q, sizeof q) != 0) break;
        if (memcmp(q.magic, MPIR_COOP_MAGIC, 8) != 0 || q.version != MPIR_COOP_VERSION) {
            answer(fd, EPROTO, NULL, 0);
            break;
        }
        int rc;
        switch (q.opcode) {
        case MPIR_COOP_HELLO: rc = do_hello(fd); break;
        case MPIR_COOP_READ: rc = do_read(fd, q.arg0, q.arg1); break;
        case MPIR_COOP_MAPS: rc = do_maps(fd); break;
        case MPIR_COOP_THREADS: rc = do_threads(fd); break;
        case MPIR_COOP_PTRACER:
        case MPIR_COOP_PTRACER_END: {
            /* Only the connected peer itself, never PR_SET_PTRACER_ANY; arg0 is ignored. */
            unsigned long who = q.opcode == MPIR_COOP_PTRACER ? (unsigned long)cr.pid : 0;
            int e = prctl(PR_SET_PTRACER, who, 0, 0, 0) == 0 ? 0 : errno;
            if (e == 0) granted = q.opcode == MPIR_COOP_PTRACER;
            rc = answer(fd, (uint32_t)e, NULL, 0);
            break;
        }
        default: rc = answer(fd, ENOSYS, NULL, 0); break;
        }
        if (rc != 0) break;
    }
    if (granted) prctl(PR_SET_PTRACER, 0UL, 0, 0, 0);
}

static void *mpir_coop_channel_thread(void *arg) {
    (void)arg;
    prctl(PR_SET_NAME, (unsigned long)"mpir-coop", 0, 0, 0);
    for (;;) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                nap_ns(100000000);
                continue;
            }
            break; /* shut down by mpir_coop_stop */
        }
        serve(fd);
        close(fd);
    }
    return NULL;
}

void mpir_coop_start(int32_t rank, int32_t size) {
    static int once;
    if (__atomic_exchange_n(&once, 1, __ATOMIC_ACQ_REL)) return;
    int saved = errno;
    const char *off = getenv("MPIR_COOP");
    if (off && strcmp(off, "0") == 0) {
        set_state(MPIR_COOP_DISABLED, MPIR_COOP_REASON_NONE, 0);
        errno = saved;
        return;
    }
    owner_pid = getpid();
    my_rank = rank;
    my_size = size;
    capture_signal = SIGRTMAX - 2;
    const char *sig = getenv("MPIR_COOP_SIGNAL");
    if (sig && *sig) {
        char *end;
        long v = strtol(sig, &end, 10);
        if (*end == 0 && v >= SIGRTMIN && v <= SIGRTMAX) capture_signal = (int)v;
    }
    mpir_coop.signal = (uint32_t)capture_signal;
    snapshot_env();
    uint32_t reason = MPIR_COOP_REASON_NONE;
    int err = open_socket(&reason);
    if (err) {
        set_state(MPIR_COOP_REFUSED, reason, err);
        errno = saved;
        return;
    }
    mem_fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    atexit(at_exit);
    /* The thread starts with every signal blocked: no signal meant for the program lands there. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 << 10);
    pthread_t t;
    err = pthread_create(&t, &attr, mpir_coop_channel_thread, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err) {
        remove_socket();
        close(listen_fd);
        listen_fd = -1;
        set_state(MPIR_COOP_REFUSED, MPIR_COOP_REASON_THREAD, err);
    } else {
        set_state(MPIR_COOP_LISTENING, MPIR_COOP_REASON_NONE, 0);
    }
    errno = saved;
}

void mpir_coop_stop(void) {
    if (__atomic_load_n(&mpir_coop.state, __ATOMIC_ACQUIRE) != MPIR_COOP_LISTENING) return;
    int saved = errno;
    set_state(MPIR_COOP_CLOSED, MPIR_COOP_REASON_NONE, 0);
    remove_socket();
    /* Wakes the thread's accept() (EINVAL): it leaves; the descriptor stays for it to see. */
    shutdown(listen_fd, SHUT_RDWR);
    errno = saved;
}
