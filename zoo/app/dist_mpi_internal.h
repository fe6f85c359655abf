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
 * copies never train N separate models over one checkpoint. */
const zoo_dist_transport *zoo_dist_mpi(void);

#ifdef __cplusplus
}
#endif

#endif
