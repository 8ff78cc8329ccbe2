#pragma once
// Which GPU a process of a multi-process run (mpirun, srun) uses.
namespace fusebench {

// Under mpirun/srun with CUDA_VISIBLE_DEVICES unset: shows each process only the GPU of its
// local rank (call before any CUDA call).
void pin_local_gpu();

}  // namespace fusebench
