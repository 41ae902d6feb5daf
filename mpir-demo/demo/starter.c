/* mpir-demo-starter: the starter of the mpir-rs demo job (no MPI library involved).
 *
 *   mpir-demo-starter [-n N] [--lifetime SECS] [--rank PATH] [-q]
 *
 * Implements the starter's side of MPIR process acquisition (MPIR 1.1): it fork+execs N ranks
 * of mpir-demo-rank (default: next to this program), fills MPIR_proctable, sets
 * MPIR_debug_state to MPIR_DEBUG_SPAWNED and calls MPIR_Breakpoint. MPIR_i_am_starter is
 * defined (the starter is no rank); MPIR_partial_attach_ok is not: when MPIR_being_debugged is
 * set at spawn time, the ranks wait at MPIR_debug_gate (they get MPIEXEC_DEBUG=1, as MPICH's
 * do), so the debugger must attach every rank and open the gate (MPIR 1.1 section 8 step 18).
 *
 * Then it waits for its ranks and ends the job as a launcher does: a rank that fails makes it
 * stop the others and exit with that rank's status (exit code, or 128 + signal); SIGTERM,
 * SIGINT or SIGHUP make it stop every rank (SIGTERM, SIGKILL 2 s later) and die of the same
 * signal; after --lifetime seconds (default 300) it stops the ranks and exits 0. Ranks die with
 * it even if it is killed outright (PR_SET_PDEATHSIG in the rank). With -q nothing is printed
 * but errors. Exit 2 for a bad command line. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    char *host_name;
    char *executable_name;
    int pid;
} MPIR_PROCDESC;

#define MPIR_DEBUG_SPAWNED 1

MPIR_PROCDESC *MPIR_proctable = 0;
int MPIR_proctable_size = 0;
volatile int MPIR_debug_state = 0;
volatile int MPIR_being_debugged = 0;
int MPIR_i_am_starter = 1;
char *MPIR_debug_abort_string = 0;

__attribute__((noinline)) void MPIR_Breakpoint(void) { __asm__ volatile("" ::: "memory"); }

static volatile sig_atomic_t got_signal;
static void on_signal(int s) { got_signal = s; }
static void on_child(int s) { (void)s; }

static pid_t *pids;
static int n_ranks;

static void signal_ranks(int sig) {
    for (int i = 0; i < n_ranks; i++)
        if (pids[i] > 0) kill(pids[i], sig);
}

static int usage(const char *why) {
    fprintf(stderr,
            "mpir-demo-starter: %s\n"
            "usage: mpir-demo-starter [-n N] [--lifetime SECS] [--rank PATH] [-q]\n",
            why);
    return 2;
}

static int parse_int(const char *s, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || *end || v < lo || v > hi) return 0;
    *out = (int)v;
    return 1;
}

int main(int argc, char **argv) {
    int n = 4, lifetime = 300, quiet = 0;
    const char *rank_path = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : 0;
        if (!strcmp(a, "-n") || !strcmp(a, "-np")) {
            if (!parse_int(v, 1, 1024, &n)) return usage("-n takes 1 to 1024 ranks");
            i++;
        } else if (!strcmp(a, "--lifetime")) {
            if (!parse_int(v, 1, 86400, &lifetime)) return usage("--lifetime takes 1 to 86400 s");
            i++;
        } else if (!strcmp(a, "--rank")) {
            if (!v) return usage("--rank takes a path");
            rank_path = v;
            i++;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = 1;
        } else {
            return usage("unknown argument");
        }
    }

    char self[PATH_MAX], sibling[PATH_MAX + 32];
    if (!rank_path) {
        ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
        if (len <= 0) return usage("cannot find my own path; give --rank");
        self[len] = 0;
        char *slash = strrchr(self, '/');
        if (slash) *slash = 0;
        snprintf(sibling, sizeof sibling, "%s/mpir-demo-rank", self);
        rank_path = sibling;
    }
    char *exe = realpath(rank_path, 0);
    if (!exe || access(exe, X_OK)) {
        fprintf(stderr, "mpir-demo-starter: no rank program at %s\n", rank_path);
        return 1;
    }
    static char host[256];
    if (gethostname(host, sizeof host - 1)) strcpy(host, "localhost");

    /* Signals are blocked but while waiting in sigsuspend: none is lost between a check and
     * the wait. Children get the mask we were started with back before exec. */
    sigset_t block, orig;
    sigemptyset(&block);
    int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGALRM};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_signal;
    for (unsigned i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        sigaction(sigs[i], &sa, 0);
        sigaddset(&block, sigs[i]);
    }
    sa.sa_handler = on_child;
    sigaction(SIGCHLD, &sa, 0);
    sigaddset(&block, SIGCHLD);
    sigprocmask(SIG_BLOCK, &block, &orig);
    sigset_t none;
    sigemptyset(&none);

    if (!quiet) {
        printf("mpir-demo-starter pid %d: the mpir-rs demo job, no MPI library involved: %d ranks "
               "of %s; ranks 0-2 deadlock in a ring of receives; it ends after %d s\n",
               (int)getpid(), n, exe, lifetime);
        fflush(stdout);
    }

    int debugged = MPIR_being_debugged;
    n_ranks = n;
    pids = calloc((size_t)n, sizeof *pids);
    MPIR_PROCDESC *table = calloc((size_t)n, sizeof *table);
    if (!pids || !table) return 1;
    pid_t me = getpid();
    for (int i = 0; i < n; i++) {
        pid_t p = fork();
        if (p < 0) {
            perror("mpir-demo-starter: fork");
            signal_ranks(SIGKILL);
            return 1;
        }
        if (p == 0) {
            char buf[32];
            snprintf(buf, sizeof buf, "%d", i);
            setenv("PMI_RANK", buf, 1);
            snprintf(buf, sizeof buf, "%d", n);
            setenv("PMI_SIZE", buf, 1);
            snprintf(buf, sizeof buf, "%d", lifetime);
            setenv("MPIR_DEMO_LIFETIME", buf, 1);
            snprintf(buf, sizeof buf, "%d", (int)me);
            setenv("MPIR_DEMO_STARTER", buf, 1);
            if (debugged) setenv("MPIEXEC_DEBUG", "1", 1);
            else unsetenv("MPIEXEC_DEBUG");
            if (quiet) setenv("MPIR_DEMO_QUIET", "1", 1);
            sigprocmask(SIG_SETMASK, &orig, 0);
            execl(exe, exe, (char *)0);
            _exit(127);
        }
        pids[i] = p;
        table[i].host_name = host; /* shared strings, as MPIR 1.1 section 9.2 advises */
        table[i].executable_name = exe;
        table[i].pid = (int)p;
    }
    MPIR_proctable = table;
    MPIR_proctable_size = n;
    MPIR_debug_state = MPIR_DEBUG_SPAWNED;
    MPIR_Breakpoint();

    alarm((unsigned)lifetime);
    int alive = n, stopping = 0, reason = 0, result = 0;
    while (alive > 0) {
        int st;
        pid_t p;
        while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
            for (int i = 0; i < n; i++) {
                if (pids[i] != p) continue;
                pids[i] = 0;
                alive--;
                int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
                if (!ok && !stopping) {
                    result = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                    fprintf(stderr, "mpir-demo-starter: rank %d (pid %d) %s %d; stopping the job\n",
                            i, (int)p, WIFEXITED(st) ? "exited with" : "was killed by signal",
                            WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
                    stopping = 1;
                    signal_ranks(SIGTERM);
                    alarm(2);
                }
            }
        }
        if (p < 0 && errno == ECHILD) break;
        if (alive == 0) break;
        int s = got_signal;
        got_signal = 0;
        if (s && !stopping) {
            reason = s;
            stopping = 1;
            signal_ranks(SIGTERM);
            alarm(2);
        } else if (s) {
            signal_ranks(SIGKILL); /* grace over, or asked twice */
        }
        if (!got_signal) sigsuspend(&none);
    }
    if (reason == SIGALRM) {
        if (!quiet) printf("mpir-demo-starter: lifetime of %d s over; ranks stopped\n", lifetime);
        return 0;
    }
    if (reason) {
        fflush(stdout);
        signal(reason, SIG_DFL);
        sigprocmask(SIG_SETMASK, &orig, 0);
        raise(reason);
        return 128 + reason;
    }
    return result;
}
