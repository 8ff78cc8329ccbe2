#pragma once
// Stand-in for a modelled collective on the GPU: one kernel that spins on the global timer for
// the modelled time (one launch, like the NCCL kernel it replaces).
namespace fusebench::comm {
void enqueue_gpu_delay(void* stream, double seconds);
}  // namespace fusebench::comm
