/*
 * job.c: launch an MPI job under control with libmpir, print its rank table, wait for its
 * deadlock to be confirmed, print the verdict, and let the job go.
 *
 *   job                      launches the bundled demo job (4 ranks; no MPI needed)
 *   job STARTER [ARGS...]    launches STARTER ARGS... instead, e.g. mpiexec -n 4 ./app
 *
 * Build: cc -o job job.c $(pkg-config --cflags --libs mpir)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpir.h"

static int fail(const char *what, mpir_status status) {
    fprintf(stderr, "job: %s: %s: %s\n", what, mpir_status_name(status), mpir_last_error());
    return 1;
}

int main(int argc, char **argv) {
    /* Whole lines, at once: the job's ranks write to the same output. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("libmpir %s\n", mpir_version());

    char *demo = NULL;
    const char *demo_argv[3];
    const char *const *command;
    size_t count;
    mpir_status st;
    if (argc > 1) {
        command = (const char *const *)(argv + 1);
        count = (size_t)(argc - 1);
    } else {
        st = mpir_demo_starter(&demo);
        if (st != MPIR_STATUS_OK) return fail("the demo job", st);
        demo_argv[0] = demo;
        demo_argv[1] = "-n";
        demo_argv[2] = "4";
        command = demo_argv;
        count = 3;
    }

    mpir_options *opts = NULL;
    st = mpir_options_new(&opts);
    if (st != MPIR_STATUS_OK) return fail("options", st);
    mpir_options_set_timeout_ms(opts, 30000);
    mpir_session *session = NULL;
    st = mpir_session_launch(command, count, opts, &session);
    mpir_options_free(opts); /* the session copied them */
    mpir_string_free(demo);
    if (st != MPIR_STATUS_OK) return fail("launch", st);

    size_t ranks = 0;
    st = mpir_session_rank_count(session, &ranks);
    if (st != MPIR_STATUS_OK) {
        mpir_session_free(session);
        return fail("rank count", st);
    }
    printf("%zu ranks\n", ranks);
    for (size_t i = 0; i < ranks; i++) {
        mpir_rank r;
        if (mpir_session_rank(session, i, &r) != MPIR_STATUS_OK) continue;
        printf("rank %llu pid %u host %s local %s executable %s control %s\n",
               (unsigned long long)r.rank, r.pid, r.host ? r.host : "?",
               r.local == 1 ? "yes" : r.local == 0 ? "no" : "unknown",
               r.executable ? r.executable : "?", r.control);
    }

    /* The ranks reach their deadlock soon after the launch: sample the queues (3 snapshots,
       100 ms apart) until a deadlock is confirmed, for 20 s at most. */
    char *verdict = NULL;
    for (int attempt = 0; attempt < 20; attempt++) {
        st = mpir_session_deadlock_json(session, 3, 100, &verdict);
        if (st != MPIR_STATUS_OK) {
            mpir_session_free(session);
            return fail("deadlock", st);
        }
        if (strstr(verdict, "\"verdict\":\"deadlock\"")) break;
        mpir_string_free(verdict);
        verdict = NULL;
        sleep(1);
    }
    printf("deadlock %s\n", verdict ? verdict : "not confirmed");
    mpir_string_free(verdict);

    /* Release: every rank let go, the job ended (the starter stopped and reaped). */
    st = mpir_session_release(session);
    if (st != MPIR_STATUS_OK) {
        mpir_session_free(session);
        return fail("release", st);
    }
    printf("released\n");
    mpir_session_free(session);
    return verdict ? 0 : 2;
}
