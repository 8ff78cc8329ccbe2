#include "backends/cpu_memory.hpp"

#include <sys/mman.h>

#include <cstdlib>

namespace fusebench::cpu {

void* allocate_host(std::size_t bytes) {
  const std::size_t align = bytes >= kHugePageThreshold ? kHugePageBytes : 64;
  const std::size_t rounded = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded == 0 ? align : rounded);
#ifdef MADV_HUGEPAGE
  if (p != nullptr && align == kHugePageBytes) madvise(p, rounded, MADV_HUGEPAGE);  // advice only
#endif
  return p;
}

}  // namespace fusebench::cpu
