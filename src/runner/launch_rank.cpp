#include "launch_rank.hpp"

#include <cstdlib>
#include <string>

namespace fusebench::bench {

int launcher_rank() {
  // Open MPI, PMIx (Open MPI 5, Slurm with PMIx), MPICH/Hydra (PMI), Slurm's srun.
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') {
      try {
        return std::stoi(v);
      } catch (const std::exception&) {
        return -1;
      }
    }
  }
  return -1;
}

bool speaks_for_the_job() { return launcher_rank() <= 0; }

}  // namespace fusebench::bench
