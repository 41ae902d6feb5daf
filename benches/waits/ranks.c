/* The ranks of the wait-state read benchmark (BENCHMARKS.md, issue 29): each rank posts one
 * receive no one sends to (MPI_Irecv from its right neighbour, tag 29), so that its queues
 * and its wait-state export both have something to say; prints "rank R pid P"; then sleeps
 * for argv[1] seconds outside MPI (64 ranks spinning in MPI would starve a 2-core machine). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int rank, size, buf = 0;
    MPI_Request req;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Irecv(&buf, 1, MPI_INT, (rank + 1) % size, 29, MPI_COMM_WORLD, &req);
    printf("rank %d pid %d\n", rank, (int)getpid());
    fflush(stdout);
    sleep(argc > 1 ? atoi(argv[1]) : 3);
    /* Killed by then in the benchmark; cancel so that a normal end is clean too. */
    MPI_Cancel(&req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
