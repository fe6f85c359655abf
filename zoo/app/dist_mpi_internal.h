/* zoo/app/dist_mpi_internal.h -- Open MPI as the transport of zoo_dist (dist.h), for the zoo's
 * programs. Built into the programs only (not into the installed libraries, which hold no MPI):
 * with MPI when CMake found it (-DTG_MPI), else as a stub without a single MPI symbol. */
#ifndef TG_ZOO_DIST_MPI_INTERNAL_H
#define TG_ZOO_DIST_MPI_INTERNAL_H

#include "dist.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The transport (a static table; never NULL). Its init joins MPI_COMM_WORLD (MPI_Init_thread,
 * MPI_THREAD_FUNNELED: only the main thread communicates) when the process was started by an
 * MPI launcher (mpirun, or srun with PMI/PMIx: OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_RANK is
 * set), and leaves a process started on its own alone, without initialising MPI. The stub (a
 * build without MPI) refuses a launch of several processes with a message saying so, so that N
 * copies never train N separate models over one checkpoint.
 *
 * With MPI the transport has start and test (dist.h: every collective is waited for with the
 * deadline, without burning a core): each collective is an MPI_Ibarrier (every rank has arrived)
 * followed by the non-blocking collective itself (MPI_Iallreduce in place, MPI_Ibcast,
 * MPI_Iallgather), polled with MPI_Test. Open MPI's in-place MPI_Iallreduce reduces to rank 0 on
 * a binomial tree and sends the result back: every rank has the same bits, and with 2 ranks
 * those of MPI_Allreduce (a + b). note and heard are 8-byte messages on a duplicate of
 * MPI_COMM_WORLD, sent by a rank that has waited a while, received when a deadline passes. */
const zoo_dist_transport *zoo_dist_mpi(void);

#ifdef __cplusplus
}
#endif

#endif
