/* A C tool reading a job whose ranks all run on other nodes: mpir_session_attach with the
   agents' settings, then the queues and stacks documents, each on one line.
   Usage: other_nodes STARTER_PID MPIR_PROGRAM LAUNCH_TEMPLATE; MPIR_PROGRAM "-" reads this
   node only (mpir_options_set_other_nodes(opts, 0)). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpir.h>

static int fail(const char *what, mpir_status s) {
    fprintf(stderr, "%s: %s: %s\n", what, mpir_status_name(s), mpir_last_error());
    return 1;
}

int main(int argc, char **argv) {
    mpir_options *opts = NULL;
    mpir_session *session = NULL;
    char *doc = NULL;
    mpir_status s;
    if (argc != 4) {
        fprintf(stderr, "usage: %s STARTER_PID MPIR_PROGRAM LAUNCH_TEMPLATE\n", argv[0]);
        return 2;
    }
    if ((s = mpir_options_new(&opts)) != MPIR_STATUS_OK) return fail("options", s);
    if (strcmp(argv[2], "-") == 0) {
        if ((s = mpir_options_set_other_nodes(opts, 0)) != MPIR_STATUS_OK)
            return fail("other nodes", s);
    } else {
        if ((s = mpir_options_set_agent_program(opts, argv[2])) != MPIR_STATUS_OK)
            return fail("agent program", s);
        if ((s = mpir_options_set_agent_launch(opts, argv[3])) != MPIR_STATUS_OK)
            return fail("agent launch", s);
        if ((s = mpir_options_set_agent_timeout_ms(opts, 60000)) != MPIR_STATUS_OK)
            return fail("agent timeout", s);
    }
    if ((s = mpir_session_attach((uint32_t)atol(argv[1]), opts, &session)) != MPIR_STATUS_OK)
        return fail("attach", s);
    mpir_options_free(opts);
    if ((s = mpir_session_queues_json(session, &doc)) != MPIR_STATUS_OK) return fail("queues", s);
    printf("%s\n", doc);
    mpir_string_free(doc);
    if ((s = mpir_session_stacks_json(session, 1, 150, &doc)) != MPIR_STATUS_OK)
        return fail("stacks", s);
    printf("%s\n", doc);
    mpir_string_free(doc);
    if ((s = mpir_session_free(session)) != MPIR_STATUS_OK) return fail("free", s);
    return 0;
}
