#pragma once
// Which GPU a process of a multi-process run (mpirun, srun) opens: its local rank (the rank
// among the processes of its node) modulo the devices it sees. That holds whether the launcher
// left CUDA_VISIBLE_DEVICES unset (every process sees every GPU), set it per task (srun
// --gpus-per-task=1: one GPU each) or set it to the whole allocation on every task (Slurm's
// --gres=gpu:N), where opening device 0 everywhere made NCCL fail with "Duplicate GPU detected".
#include <functional>
#include <optional>
#include <string>

namespace fusebench {

// Reads one environment variable (std::getenv in production, a fake in tests).
using EnvLookup = std::function<const char*(const char*)>;

// The launcher's local rank of this process, from the first variable set of
// OMPI_COMM_WORLD_LOCAL_RANK (Open MPI), MPI_LOCALRANKID (MPICH, Intel MPI),
// MV2_COMM_WORLD_LOCAL_RANK (MVAPICH2), PALS_LOCAL_RANKID (Cray PALS), PMI_LOCAL_RANK,
// SLURM_LOCALID (srun; last, because an mpirun inside an sbatch script inherits the batch
// step's SLURM_LOCALID=0 in every process). nullopt when none is set; throws
// std::invalid_argument naming the variable when its value is not a non-negative integer.
std::optional<int> launcher_local_rank(const EnvLookup& lookup);
// How many processes of the run share this node, from the same launchers' variables
// (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS, MV2_COMM_WORLD_LOCAL_SIZE, PALS_LOCAL_SIZE,
// PMI_LOCAL_SIZE, SLURM_NTASKS_PER_NODE); nullopt when none is set; throws
// std::invalid_argument naming the variable when its value is not a positive integer.
std::optional<int> launcher_local_size(const EnvLookup& lookup);
// local_rank modulo visible_devices; throws std::invalid_argument when visible_devices < 1 or
// local_rank < 0.
int local_device_for(int local_rank, int visible_devices);

// Under mpirun/srun: local_device_for(launcher_local_rank(getenv), CUDA devices visible) becomes
// the device make_cuda_backend opens (call before creating the backend). Returns it; 0 (and
// nothing pinned) outside a launcher, without a local rank, or without a visible device.
int pin_local_cuda_device();
// The device make_cuda_backend opens: the pinned one, else 0.
int pinned_cuda_device();

}  // namespace fusebench
