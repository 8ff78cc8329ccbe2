#pragma once
// Which GPU a process of a multi-process run (mpirun, srun) uses.
namespace fusebench {

// Under mpirun/srun: this process opens the GPU of its local rank modulo the GPUs it sees
// (fusebench/local_device.hpp; call before creating the backend).
void pin_local_gpu();

}  // namespace fusebench
