#include "comm/local_gpu.hpp"

#include <cstdlib>

#include "fusebench/mpi_comm.hpp"

namespace fusebench {

void pin_local_gpu() {
  if (!launched_by_mpi() || std::getenv("CUDA_VISIBLE_DEVICES") != nullptr) return;
  for (const char* var :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "PMI_LOCAL_RANK"}) {
    if (const char* v = std::getenv(var)) {
      setenv("CUDA_VISIBLE_DEVICES", v, 1);
      return;
    }
  }
}

}  // namespace fusebench
