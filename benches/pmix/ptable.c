/* ptable.c — the comparison peer of `compare --only pmix`: what a C tool written against the
 * PMIx tool API does to read an Open MPI 5 job's process table. It connects to the launcher by
 * pid (PMIX_SERVER_PIDINFO: libpmix finds the rendezvous file itself) or, given a path, through
 * that rendezvous file (PMIX_TOOL_ATTACHMENT_FILE), asks for the proc table of the job's namespace (or, without one,
 * of every namespace the server lists: its tools' own too), counts the entries that carry a
 * pid, prints "c-pmix entries=N" and finalizes.
 *
 * Build (Debian libpmix-dev headers; any compatible libpmix.so.2 at run time):
 *   cc -O2 -o ptable ptable.c -I/usr/lib/x86_64-linux-gnu/pmix2/include \
 *      -L<dir of libpmix.so.2> -l:libpmix.so.2 -Wl,-rpath,<that dir>
 * Usage: ptable LAUNCHER_PID|RENDEZVOUS_FILE [NAMESPACE]
 */
#include <pmix_tool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Asks one key, with an optional namespace qualifier; returns the results (caller frees). */
static pmix_status_t ask(const char *key, const char *nspace, pmix_info_t **res, size_t *nres) {
    pmix_query_t q;
    PMIX_QUERY_CONSTRUCT(&q);
    pmix_status_t rc;
    PMIX_ARGV_APPEND(rc, q.keys, key);
    if (rc != PMIX_SUCCESS) return rc;
    if (nspace) {
        PMIX_INFO_CREATE(q.qualifiers, 1);
        q.nqual = 1;
        PMIX_INFO_LOAD(&q.qualifiers[0], PMIX_NSPACE, nspace, PMIX_STRING);
    }
    rc = PMIx_Query_info(&q, 1, res, nres);
    PMIX_QUERY_DESTRUCT(&q);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: ptable LAUNCHER_PID|RENDEZVOUS_FILE [NAMESPACE]\n");
        return 2;
    }
    pmix_proc_t me;
    pmix_info_t attach;
    if (argv[1][0] == '/') {
        PMIX_INFO_LOAD(&attach, PMIX_TOOL_ATTACHMENT_FILE, argv[1], PMIX_STRING);
    } else {
        pid_t pid = (pid_t)atoi(argv[1]);
        PMIX_INFO_LOAD(&attach, PMIX_SERVER_PIDINFO, &pid, PMIX_PID);
    }
    if (PMIx_tool_init(&me, &attach, 1) != PMIX_SUCCESS) {
        fprintf(stderr, "ptable: cannot connect to %s\n", argv[1]);
        return 1;
    }
    pmix_info_t *res = NULL;
    size_t nres = 0, entries = 0;
    char *list, *save = NULL;
    if (argc == 3) {
        list = strdup(argv[2]);
    } else {
        if (ask(PMIX_QUERY_NAMESPACES, NULL, &res, &nres) != PMIX_SUCCESS || nres == 0 ||
            res[0].value.type != PMIX_STRING) {
            fprintf(stderr, "ptable: no namespaces\n");
            PMIx_tool_finalize();
            return 1;
        }
        list = strdup(res[0].value.data.string);
        PMIX_INFO_FREE(res, nres);
    }
    for (char *ns = strtok_r(list, ",", &save); ns; ns = strtok_r(NULL, ",", &save)) {
        res = NULL;
        nres = 0;
        if (ask(PMIX_QUERY_PROC_TABLE, ns, &res, &nres) != PMIX_SUCCESS) continue;
        for (size_t i = 0; i < nres; i++) {
            if (res[i].value.type != PMIX_DATA_ARRAY) continue;
            pmix_data_array_t *da = res[i].value.data.darray;
            if (!da || da->type != PMIX_PROC_INFO) continue;
            pmix_proc_info_t *p = (pmix_proc_info_t *)da->array;
            for (size_t k = 0; k < da->size; k++)
                if (p[k].pid > 0) entries++;
        }
        PMIX_INFO_FREE(res, nres);
    }
    free(list);
    printf("c-pmix entries=%zu\n", entries);
    PMIx_tool_finalize();
    return 0;
}
