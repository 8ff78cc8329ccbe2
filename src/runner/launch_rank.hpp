#pragma once
// Which process of a multi-process launch (mpirun, srun) this is, known from the launcher's
// environment before MPI starts: only rank 0 speaks for the job (--help, --list, bad input), so a
// message shows once, not once per rank.
namespace fusebench::bench {

// The launcher's rank of this process; -1 when no launcher set one.
int launcher_rank();
// True unless this is a rank > 0 of a multi-process launch.
bool speaks_for_the_job();

}  // namespace fusebench::bench
