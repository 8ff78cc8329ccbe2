#pragma once
// The link model that prices collectives when there are fewer GPUs than ranks: time = latency +
// bytes * factor / busbw, with the nccl-tests bus-bandwidth conventions (all-reduce factor
// 2(n-1)/n; all-gather (n-1)/n with bytes = the total gathered size; reduce-scatter (n-1)/n with
// bytes = the total input, n times what each rank keeps).
#include <string>
#include <string_view>
#include <vector>

namespace fusebench {

// all_to_all: expert parallelism's dispatch and combine (nccl-tests' alltoall: the size is the
// rows a rank sends, bus factor (n-1)/n).
enum class CollectiveKind { all_reduce, all_gather, reduce_scatter, all_to_all };
std::string_view to_string(CollectiveKind kind);

struct LinkProfile {
  std::string name;      // "nvlink-h100", "pcie-gen5", "custom", "measured", ...
  double latency_s = 0;  // per collective, small-message time
  double busbw = 0;      // bus bandwidth in bytes/s (nccl-tests definition)
  std::string source;    // where the figures come from
};

const std::vector<LinkProfile>& link_profiles();
// Accepts a preset name or "custom:<latency_us>:<busbw_GBps>"; throws std::invalid_argument
// naming the value and the presets.
LinkProfile find_link_profile(std::string_view name);

// nccl-tests bus factor: busbw = algbw * factor.
double bus_factor(CollectiveKind kind, int ranks);
// Modelled seconds for one collective of `bytes` (all-reduce: the buffer; all-gather: the total
// gathered size; reduce-scatter: the total input) over `ranks`. Zero for one rank.
double modelled_seconds(const LinkProfile& link, CollectiveKind kind, double bytes, int ranks);
// algbw = bytes / seconds; busbw = algbw * bus_factor. Zero when seconds <= 0.
double algbw(double bytes, double seconds);
double busbw(CollectiveKind kind, double bytes, double seconds, int ranks);

}  // namespace fusebench
