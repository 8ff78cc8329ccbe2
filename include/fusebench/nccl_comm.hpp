#pragma once
// NCCL communicators (GPU). Blocking communicators: a call returns once its kernel is enqueued,
// with no host wait in the timed path; a monitor thread aborts the communicator (ncclCommAbort)
// when a call or a collective has not completed within the timeout or NCCL reports an error, so
// a lost peer or a broken link ends the fixture with a message instead of hanging it (an init
// that never completes ends the process with a message). Collectives issue on the backend's
// current lane (a plan's communication lane, docs/tp.md). All functions throw a clear
// std::runtime_error when the build has no NCCL.
#include <memory>
#include <vector>

#include "fusebench/communicator.hpp"

namespace fusebench {

bool nccl_built();

// One process driving several GPUs: rank i runs on devices[i] with backends[i]'s stream
// (ncclCommInitRankConfig for every rank inside one ncclGroupStart/End).
std::vector<std::unique_ptr<Communicator>> make_nccl_local_group(
    const std::vector<Backend*>& backends, const std::vector<int>& devices, double timeout_s);

// One process per GPU (mpirun, srun; one or several nodes): MPI gives rank and size, rank 0's
// ncclGetUniqueId is broadcast with MPI_Bcast; the communicator runs on `backend`'s device and
// streams (local_device.hpp chose the device). Needs a live MpiSession.
std::unique_ptr<Communicator> make_nccl_mpi_communicator(Backend& backend, double timeout_s);

}  // namespace fusebench
