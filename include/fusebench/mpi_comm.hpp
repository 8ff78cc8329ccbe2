#pragma once
// MPI: the CPU communicator for multi-process runs, and the bootstrap (rank, size, broadcast of
// the NCCL id, gathering results) for NCCL across processes and nodes. Every function throws a
// clear std::runtime_error when the build has no MPI.
#include <memory>
#include <string>
#include <vector>

#include "fusebench/communicator.hpp"

namespace fusebench {

bool mpi_built();
// True when this process was started by mpirun/mpiexec/srun (their environment variables).
bool launched_by_mpi();

// MPI_Init_thread / MPI_Finalize around a scope. Rank and size of MPI_COMM_WORLD; local rank is
// the rank among the processes of this node (it picks the GPU).
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0;
};

// CPU collectives over MPI_COMM_WORLD (needs a live MpiSession). A collective that has not
// completed after `timeout_s` prints which one and aborts the whole job (never a hang).
std::unique_ptr<Communicator> make_mpi_communicator(double timeout_s);

// Rank and size in MPI_COMM_WORLD (needs a live MpiSession).
int mpi_world_rank();
int mpi_world_size();
// Rank 0 broadcasts `bytes` to every rank (the NCCL unique id).
void mpi_broadcast(std::vector<char>& bytes);
// Every rank's string, in rank order, on every rank.
std::vector<std::string> mpi_allgather_strings(const std::string& text);
// Every rank's value, in rank order, on every rank (per-rank timings).
std::vector<double> mpi_allgather_doubles(double value);
// Returns once every rank has called it (the start line of a pass timed on every rank).
void mpi_barrier();

}  // namespace fusebench
