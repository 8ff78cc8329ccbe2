// The cost model's prediction for tp_moe (tp_moe_model.hpp).
#include "tp_moe_model.hpp"

#include <algorithm>
#include <string>

namespace fusebench::ops {

Ceilings tp_moe_nominal_ceilings() {
  return {989e12, 4.8e12, "nominal:h200 (989 TFLOP/s dense bf16, 4.8 TB/s; NVIDIA's data sheet)"};
}

LinkProfile tp_moe_nominal_link() { return find_link_profile("nvlink-h200"); }

nlohmann::json predict_across_ranks(const std::vector<Plan>& rank_plans, const Ceilings& ceilings,
                                    const LinkProfile& link) {
  std::vector<double> compute;
  for (const Plan& p : rank_plans) compute.push_back(roofline_seconds(p, ceilings));
  const auto ranks = static_cast<int>(rank_plans.size());
  // Each rank's collectives, call by call (the all-to-alls move different rows on each rank):
  // the pipeline waits for the slowest rank's share, so the largest counts.
  double comm = 0;
  nlohmann::json calls = nlohmann::json::array();
  for (std::size_t r = 0; r < rank_plans.size(); ++r) {
    double mine = 0;
    nlohmann::json rank_calls = nlohmann::json::array();
    for (const Step& step : rank_plans[r].steps) {
      const auto call = collective_call(step, rank_plans[r].dtype);
      if (!call) continue;
      const double s = modelled_seconds(link, call->kind, call->bytes, ranks);
      mine += s;
      rank_calls.push_back({{"kind", std::string(to_string(call->kind))},
                            {"bytes", call->bytes},
                            {"wire_bytes", wire_bytes(*call, ranks)},
                            {"seconds", s}});
    }
    comm = std::max(comm, mine);
    calls.push_back(std::move(rank_calls));
  }
  const auto slowest = std::max_element(compute.begin(), compute.end());
  double sum = 0, wait = 0;
  for (const double c : compute) {
    sum += c;
    wait += *slowest - c;
  }
  const double mean = sum / static_cast<double>(ranks);
  return {{"source",
           "modelled: each rank's plan priced by the roofline (max of FLOPs / peak and bytes / "
           "bandwidth per step, launch overhead left out) on the ceilings below; collectives by "
           "the link model; pipeline = slowest rank's compute + the largest rank's collectives"},
          {"ceilings",
           {{"peak_flops", ceilings.peak_flops},
            {"bandwidth", ceilings.bandwidth},
            {"source", ceilings.source}}},
          {"link", {{"name", link.name}, {"latency_s", link.latency_s}, {"busbw", link.busbw}}},
          {"compute_seconds_per_rank", compute},
          {"slowest_rank", slowest - compute.begin()},
          {"imbalance", mean > 0 ? *slowest / mean : 1.0},
          {"wait_fraction", *slowest > 0 ? wait / (static_cast<double>(ranks) * *slowest) : 0.0},
          {"comm_seconds", comm},
          {"pipeline_seconds", *slowest + comm},
          {"collectives_per_rank", calls}};
}

}  // namespace fusebench::ops
