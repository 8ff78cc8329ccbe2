#pragma once
// Host buffers of the CPU backend. Large ones are 2 MiB aligned and advised as transparent huge
// pages (MADV_HUGEPAGE), as numpy does for arrays of 4 MiB and more: a GEMM streaming rotated
// weights from DRAM otherwise pays a page walk per 4 KiB (measured 1.4x at one token,
// docs/cpu-gemm.md). Where the kernel ignores the advice nothing changes but the alignment.
#include <cstddef>

namespace fusebench::cpu {

inline constexpr std::size_t kHugePageThreshold = std::size_t{4} << 20;
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// nullptr when the allocation fails; release with std::free.
void* allocate_host(std::size_t bytes);

}  // namespace fusebench::cpu
