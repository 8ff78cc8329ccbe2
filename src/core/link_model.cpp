#include "fusebench/link_model.hpp"

#include <stdexcept>
#include <string>

namespace fusebench {

std::string_view to_string(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::all_reduce:
      return "all_reduce";
    case CollectiveKind::all_gather:
      return "all_gather";
    case CollectiveKind::reduce_scatter:
      return "reduce_scatter";
    case CollectiveKind::all_to_all:
      return "all_to_all";
  }
  return "unknown";
}

const std::vector<LinkProfile>& link_profiles() {
  // Typical nccl-tests figures for 8 GPUs at large messages, and small-message latency of the
  // LL protocol. Assumptions, not measurements of this machine: the report says so.
  static const std::vector<LinkProfile> profiles = {
      {"nvlink-h100", 10e-6, 360e9,
       "assumed: H100 SXM NVLink4 (450 GB/s per direction), nccl-tests all_reduce busbw ~360 GB/s"},
      {"nvlink-h200", 10e-6, 370e9,
       "assumed: H200 SXM NVLink4 (450 GB/s per direction), nccl-tests all_reduce busbw ~370 GB/s"},
      {"nvlink-b200", 8e-6, 700e9,
       "assumed: B200 NVLink5 (900 GB/s per direction), nccl-tests all_reduce busbw ~700 GB/s"},
      {"pcie-gen5", 20e-6, 45e9, "assumed: PCIe Gen5 x16 (64 GB/s per direction), busbw ~45 GB/s"},
      {"pcie-gen4", 25e-6, 22e9, "assumed: PCIe Gen4 x16 (32 GB/s per direction), busbw ~22 GB/s"},
      {"ib-ndr400", 25e-6, 45e9,
       "assumed: one 400 Gb/s InfiniBand NDR NIC per GPU across nodes, busbw ~45 GB/s"},
  };
  return profiles;
}

LinkProfile find_link_profile(std::string_view name) {
  std::string valid;
  for (const auto& p : link_profiles()) {
    if (p.name == name) return p;
    valid += (valid.empty() ? "" : ", ") + p.name;
  }
  const std::string text(name);
  if (text.rfind("custom:", 0) == 0) {
    const auto colon = text.find(':', 7);
    try {
      if (colon == std::string::npos) throw std::invalid_argument("missing ':'");
      std::size_t used = 0;
      const double lat_us = std::stod(text.substr(7, colon - 7), &used);
      const double gbps = std::stod(text.substr(colon + 1));
      if (lat_us < 0 || gbps <= 0) throw std::invalid_argument("out of range");
      return {"custom", lat_us * 1e-6, gbps * 1e9,
              "given: latency " + std::to_string(lat_us) + " us, busbw " + std::to_string(gbps) +
                  " GB/s"};
    } catch (const std::exception&) {
      throw std::invalid_argument("--link-profile=" + text +
                                  " is invalid: use custom:<latency_us>:<busbw_GBps> with "
                                  "latency >= 0 and busbw > 0, e.g. custom:10:360");
    }
  }
  throw std::invalid_argument("unknown link profile '" + text + "' (presets: " + valid +
                              "; custom:<latency_us>:<busbw_GBps>; or measured, fitted to "
                              "all-reduces timed at startup)");
}

double bus_factor(CollectiveKind kind, int ranks) {
  if (ranks <= 1) return 0;
  const double n = ranks;
  return kind == CollectiveKind::all_reduce ? 2 * (n - 1) / n : (n - 1) / n;
}

double modelled_seconds(const LinkProfile& link, CollectiveKind kind, double bytes, int ranks) {
  if (ranks <= 1) return 0;
  return link.latency_s + bytes * bus_factor(kind, ranks) / link.busbw;
}

double algbw(double bytes, double seconds) { return seconds > 0 ? bytes / seconds : 0; }

double busbw(CollectiveKind kind, double bytes, double seconds, int ranks) {
  return algbw(bytes, seconds) * bus_factor(kind, ranks);
}

}  // namespace fusebench
