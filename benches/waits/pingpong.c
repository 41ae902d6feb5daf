/* The wait-state library's overhead per MPI call (BENCHMARKS.md, issue 29): an 8-byte
 * MPI_Send/MPI_Recv ping-pong between ranks 0 and 1, N round trips (argv[1]) timed with
 * MPI_Wtime after a warm-up and an MPI_Barrier. Rank 0 prints
 *
 *     ns_per_round_trip=T waits=absent
 *     ns_per_round_trip=T waits=recording calls=C
 *
 * waits= says whether libmpir_waits.so is in the process (its `mpir_waits` symbol) and, when
 * it is, its state and the calls its slots counted (at least 2 N when it recorded the loop):
 * the run "with" is checked to have recorded, untimed, after the loop. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpir_waits.h"

static const char *state_name(uint32_t s) {
    switch (s) {
    case MPIR_WAITS_LOADED: return "loaded";
    case MPIR_WAITS_RECORDING: return "recording";
    case MPIR_WAITS_FINALIZED: return "finalized";
    case MPIR_WAITS_DISABLED: return "disabled";
    default: return "unknown";
    }
}

static void round_trips(int rank, long n, char *buf) {
    for (long i = 0; i < n; i++) {
        if (rank == 0) {
            MPI_Send(buf, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
    }
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    char buf[8] = {0};
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    round_trips(rank, n / 10 + 1000, buf); /* warm-up */
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    round_trips(rank, n, buf);
    double took = MPI_Wtime() - start;
    if (rank == 0) {
        const struct mpir_waits_header *h = dlsym(RTLD_DEFAULT, "mpir_waits");
        printf("ns_per_round_trip=%.2f", took * 1e9 / (double)n);
        if (h == NULL) {
            printf(" waits=absent\n");
        } else {
            const struct mpir_waits_slot *slots =
                (const struct mpir_waits_slot *)(uintptr_t)h->slots;
            uint64_t calls = 0;
            for (uint32_t i = 0; slots != NULL && i < h->slots_used && i < h->slot_capacity; i++)
                calls += slots[i].calls;
            printf(" waits=%s calls=%llu\n", state_name(h->state), (unsigned long long)calls);
        }
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
