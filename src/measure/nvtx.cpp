#include "fusebench/nvtx.hpp"

#if defined(FUSEBENCH_HAVE_CUDA) && __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>
#define FUSEBENCH_NVTX 1
#endif

namespace fusebench {

#ifdef FUSEBENCH_NVTX
namespace {
nvtxDomainHandle_t domain() {
  static const nvtxDomainHandle_t handle = nvtxDomainCreateA("fusebench");
  return handle;
}
}  // namespace

NvtxRange::NvtxRange(const std::string& name) {
  nvtxEventAttributes_t attr{};
  attr.version = NVTX_VERSION;
  attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attr.message.ascii = name.c_str();  // NVTX copies the string
  nvtxDomainRangePushEx(domain(), &attr);
}
NvtxRange::~NvtxRange() { nvtxDomainRangePop(domain()); }
bool nvtx_built() { return true; }
#else
NvtxRange::NvtxRange(const std::string&) {}
NvtxRange::~NvtxRange() = default;
bool nvtx_built() { return false; }
#endif

}  // namespace fusebench
