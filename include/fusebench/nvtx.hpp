#pragma once
// NVTX ranges in the "fusebench" domain, so an Nsight Systems timeline names every fixture and
// pass ("qkv/fused/.../timed", ".../launch-count", ".../dram"). A no-op in builds without
// CUDA's nvtx3 headers, and nearly free when no tool is attached.
#include <string>

namespace fusebench {

class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name);
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

// True when this build emits NVTX ranges.
bool nvtx_built();

}  // namespace fusebench
