/*
 * bad_input.c: every kind of bad input the C API promises to survive (issue 22, "Bad input"):
 * NULL and dangling handles, use after free, double free, the wrong thread, invalid UTF-8 paths,
 * strings freed twice. Each call must return its error code and say why (mpir_last_error); no
 * call may crash, and under ASan or valgrind none may touch memory it must not.
 *
 * Prints "ok <what>" per check, "FAIL <what>: ..." for a failed one, and at the end
 * "<n> passed, <m> failed"; exits 0 only when every check passed.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mpir.h"

static int passed, failed;

/* Checks that `got` is `want` and the thread's message contains `text`. */
static void check(const char *what, mpir_status got, mpir_status want, const char *text) {
    const char *msg = mpir_last_error();
    if (got == want && msg && strstr(msg, text)) {
        printf("ok %s\n", what);
        passed++;
    } else {
        printf("FAIL %s: got %s (%s), wanted %s with \"%s\"\n", what, mpir_status_name(got),
               msg ? msg : "(null)", mpir_status_name(want), text);
        failed++;
    }
}

/* A process for pids sessions to name: never read, only named. */
static pid_t child;

static mpir_session *pids_session(void) {
    mpir_session *s = NULL;
    uint32_t pid = (uint32_t)child;
    mpir_status st = mpir_session_pids(&pid, 1, NULL, &s);
    check("a pids session is made", st, MPIR_STATUS_OK, "");
    return s;
}

struct on_thread {
    mpir_session *s;
    mpir_status count, release, freed, made;
    char message[512];
};

static void *use_from_other_thread(void *arg) {
    struct on_thread *t = arg;
    size_t n = 0;
    t->count = mpir_session_rank_count(t->s, &n);
    snprintf(t->message, sizeof t->message, "%s", mpir_last_error());
    t->release = mpir_session_release(t->s);
    t->freed = mpir_session_free(t->s);
    return NULL;
}

static void *make_and_leave(void *arg) {
    struct on_thread *t = arg;
    uint32_t pid = (uint32_t)child;
    t->made = mpir_session_pids(&pid, 1, NULL, &t->s);
    return NULL; /* the thread ends: its session is released */
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    child = fork();
    if (child == 0) {
        pause();
        _exit(0);
    }
    size_t n = 0;
    mpir_rank rank;
    char *json = NULL;
    mpir_session *none = NULL;

    /* NULL handles and NULL out-parameters. */
    check("NULL session", mpir_session_rank_count(NULL, &n), MPIR_STATUS_NULL_ARGUMENT,
          "mpir_session_rank_count: session is NULL");
    check("NULL options", mpir_options_set_hold(NULL, 1), MPIR_STATUS_NULL_ARGUMENT,
          "mpir_options_set_hold: opts is NULL");
    check("NULL out", mpir_options_new(NULL), MPIR_STATUS_NULL_ARGUMENT, "out is NULL");
    check("NULL argv", mpir_session_launch(NULL, 1, NULL, &none),
          MPIR_STATUS_NULL_ARGUMENT, "argv is NULL");
    check("freeing NULL does nothing", mpir_session_free(NULL), MPIR_STATUS_OK, "");
    check("freeing a NULL string does nothing", mpir_string_free(NULL), MPIR_STATUS_OK, "");
    check("freeing NULL options does nothing", mpir_options_free(NULL), MPIR_STATUS_OK, "");

    /* Handles the library never returned: made-up numbers, a real pointer. */
    check("made-up session handle", mpir_session_rank_count((mpir_session *)0x1234, &n),
          MPIR_STATUS_INVALID_HANDLE, "is not a mpir_session handle returned by this library");
    char *mine = malloc(64);
    check("a pointer of the caller's as a session", mpir_session_release((mpir_session *)mine),
          MPIR_STATUS_INVALID_HANDLE, "not a mpir_session handle");
    check("a pointer of the caller's as options", mpir_options_free((mpir_options *)mine),
          MPIR_STATUS_INVALID_HANDLE, "not a mpir_options handle");

    /* Options: the other kind, use after free, double free, UTF-8 where needed only. */
    mpir_options *opts = NULL;
    check("options are made", mpir_options_new(&opts), MPIR_STATUS_OK, "");
    check("options as a session", mpir_session_rank_count((mpir_session *)opts, &n),
          MPIR_STATUS_INVALID_HANDLE, "is an mpir_options handle, not an mpir_session one");
    check("ranks not UTF-8", mpir_options_set_ranks(opts, "0-\xff"), MPIR_STATUS_INVALID_UTF8,
          "is not UTF-8");
    check("ranks not understood", mpir_options_set_ranks(opts, "3-1"),
          MPIR_STATUS_INVALID_ARGUMENT, "ranks \"3-1\"");
    check("a debug dir that is not UTF-8 is a path", mpir_options_add_debug_dir(opts, "/tmp/\xfe\xff"),
          MPIR_STATUS_OK, "");
    check("a sidecar that is not UTF-8 is a path",
          mpir_options_set_types_sidecar(opts, "/nonexistent/\xff.o"), MPIR_STATUS_OK, "");
    check("a core path that is not UTF-8 and does not exist",
          mpir_session_cores((const char *const[]){"/nonexistent/core.\xff"}, 1, opts,
                             &none),
          MPIR_STATUS_READ, "/nonexistent/");
    check("options freed", mpir_options_free(opts), MPIR_STATUS_OK, "");
    check("options used after free", mpir_options_set_timeout_ms(opts, 5),
          MPIR_STATUS_INVALID_HANDLE, "was already freed");
    check("options freed twice", mpir_options_free(opts), MPIR_STATUS_INVALID_HANDLE,
          "mpir_options_free: mpir_options");
    check("freed options given to a session", mpir_session_attach(1, opts, &none),
          MPIR_STATUS_INVALID_HANDLE, "was already freed");

    /* Launch: argv is bytes; a NULL entry and argc 0 are refused. */
    check("argv with a NULL entry",
          mpir_session_launch((const char *const[]){"/bin/true", NULL}, 2, NULL,
                              &none),
          MPIR_STATUS_NULL_ARGUMENT, "argv[1] is NULL");
    check("argc 0", mpir_session_launch((const char *const[]){"x"}, 0, NULL, &none),
          MPIR_STATUS_INVALID_ARGUMENT, "argc is 0");
    check("a starter path that is not UTF-8 is tried as a path",
          mpir_session_launch((const char *const[]){"/nonexistent/\xff-starter"}, 1, NULL,
                              &none),
          MPIR_STATUS_ACQUIRE, "mpir_session_launch: launch: acquiring the job");

    /* A session: what it has not, wrong arguments, use after release. */
    mpir_session *s = pids_session();
    check("no rank table for pids", mpir_session_rank_count(s, &n), MPIR_STATUS_UNSUPPORTED,
          "only for a session from a starter");
    check("no job for pids", mpir_session_job_json(s, &json), MPIR_STATUS_UNSUPPORTED,
          "the session has no job");
    check("zero samples", mpir_session_deadlock_json(s, 0, 10, &json),
          MPIR_STATUS_INVALID_ARGUMENT, "samples is 0");
    check("NULL out for a document", mpir_session_queues_json(s, NULL), MPIR_STATUS_NULL_ARGUMENT,
          "out is NULL");
    check("released", mpir_session_release(s), MPIR_STATUS_OK, "");
    check("released twice", mpir_session_release(s), MPIR_STATUS_OK, "");
    check("read after release", mpir_session_queues_json(s, &json), MPIR_STATUS_RELEASED,
          "the session was released");

    /* Wrong thread: refused, nothing changed, the session still usable on its own. */
    struct on_thread t = {.s = s};
    pthread_t th;
    pthread_create(&th, NULL, use_from_other_thread, &t);
    pthread_join(th, NULL);
    if (t.count == MPIR_STATUS_WRONG_THREAD && strstr(t.message, "not to this thread") &&
        t.release == MPIR_STATUS_WRONG_THREAD && t.freed == MPIR_STATUS_WRONG_THREAD) {
        printf("ok wrong thread\n");
        passed++;
    } else {
        printf("FAIL wrong thread: %s %s %s: %s\n", mpir_status_name(t.count),
               mpir_status_name(t.release), mpir_status_name(t.freed), t.message);
        failed++;
    }
    check("still the owner's after the other thread", mpir_session_queues_json(s, &json),
          MPIR_STATUS_RELEASED, "released");

    /* Use after free, double free. */
    check("session freed", mpir_session_free(s), MPIR_STATUS_OK, "");
    check("session used after free", mpir_session_rank(s, 0, &rank), MPIR_STATUS_INVALID_HANDLE,
          "was already freed");
    check("session freed twice", mpir_session_free(s), MPIR_STATUS_INVALID_HANDLE,
          "was already freed");

    /* A session whose thread ended: released with it, its handle dead. */
    struct on_thread gone = {0};
    pthread_create(&th, NULL, make_and_leave, &gone);
    pthread_join(th, NULL);
    check("a session made on a thread that ended", gone.made, MPIR_STATUS_OK, "");
    check("its handle after the thread ended", mpir_session_release(gone.s),
          MPIR_STATUS_INVALID_HANDLE, "was already freed");

    /* Strings: freed once; twice, or one the library never returned, is refused. */
    char *path = NULL;
    check("a string is returned", mpir_demo_starter(&path), MPIR_STATUS_OK, "");
    check("it names the starter", path && strstr(path, "mpir-demo-starter") ? MPIR_STATUS_OK
                                                                             : MPIR_STATUS_PANIC,
          MPIR_STATUS_OK, "");
    check("string freed", mpir_string_free(path), MPIR_STATUS_OK, "");
    check("string freed twice", mpir_string_free(path), MPIR_STATUS_INVALID_HANDLE,
          "already freed (double free)");
    check("a string of the caller's", mpir_string_free(mine), MPIR_STATUS_INVALID_HANDLE,
          "not a string returned by this library");
    char on_stack[8] = "x";
    check("a string on the stack", mpir_string_free(on_stack), MPIR_STATUS_INVALID_HANDLE,
          "not a string returned by this library");
    free(mine);

    /* Codes and messages. */
    check("a success clears the message", mpir_options_free(NULL), MPIR_STATUS_OK, "");
    if (strcmp(mpir_last_error(), "") == 0 && strcmp(mpir_status_name(999), "MPIR_STATUS_UNKNOWN") == 0 &&
        strcmp(mpir_status_name(MPIR_STATUS_WRONG_THREAD), "MPIR_STATUS_WRONG_THREAD") == 0) {
        printf("ok names and an empty message\n");
        passed++;
    } else {
        printf("FAIL names and an empty message: \"%s\"\n", mpir_last_error());
        failed++;
    }

    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
