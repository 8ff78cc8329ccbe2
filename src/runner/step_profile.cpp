#include "runner/step_profile.hpp"

#include <algorithm>
#include <string>

#include "fusebench/cost_model.hpp"

namespace fusebench::bench {
namespace {

struct KindTotal {
  std::string kind;
  int steps = 0;
  double seconds = 0, bytes = 0, flops = 0;
};

bool is_gemm(const std::string& kind) { return kind == "gemm" || kind == "scaled_gemm"; }

}  // namespace

void add_step_profile(const Plan& plan, const std::vector<double>& seconds, double copy_bandwidth,
                      double entry_seconds, EntryResult& r) {
  const std::vector<StepCostEntry> costs = step_costs(plan);
  std::vector<KindTotal> kinds;  // in order of first appearance
  double sum = 0;
  for (std::size_t i = 0; i < costs.size() && i < seconds.size(); ++i) {
    const std::string kind(costs[i].kind);
    auto it =
        std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.kind == kind; });
    if (it == kinds.end()) it = kinds.insert(kinds.end(), KindTotal{kind});
    ++it->steps;
    it->seconds += seconds[i];
    it->bytes += costs[i].bytes;
    it->flops += costs[i].flops;
    sum += seconds[i];
  }
  if (!(sum > 0)) return;
  nlohmann::json list = nlohmann::json::array();
  double gemm = 0;
  const KindTotal* dominant = nullptr;
  for (const KindTotal& k : kinds) {
    nlohmann::json j = {{"kind", k.kind},
                        {"steps", k.steps},
                        {"seconds", k.seconds},
                        {"share", k.seconds / sum},
                        {"model_bytes", k.bytes}};
    if (k.seconds > 0) {
      j["bytes_per_second"] = k.bytes / k.seconds;
      if (k.flops > 0) j["flops_per_second"] = k.flops / k.seconds;
      if (copy_bandwidth > 0 && !is_gemm(k.kind))
        j["of_copy_bandwidth"] = k.bytes / k.seconds / copy_bandwidth;
    }
    if (is_gemm(k.kind)) gemm += k.seconds;
    if (dominant == nullptr || k.seconds > dominant->seconds) dominant = &k;
    list.push_back(std::move(j));
  }
  nlohmann::json p = {
      {"method",
       "each step timed alone with the backend's timer (a GPU waits after each), the "
       "median of " +
           std::to_string(kStepProfileRuns) +
           " runs on the workspace's own (warm) buffers; scaled_gemm includes its "
           "scale epilogue"},
      {"kinds", list},
      {"sum_seconds", sum},
      {"dominant", dominant->kind},
      {"non_gemm_share", 1 - gemm / sum}};
  if (entry_seconds > 0) p["sum_of_entry_time"] = sum / entry_seconds;
  if (copy_bandwidth > 0) p["copy_bandwidth"] = copy_bandwidth;
  r.fields["step_profile"] = std::move(p);
  r.counters["non_gemm_share"] = 1 - gemm / sum;
}

}  // namespace fusebench::bench
