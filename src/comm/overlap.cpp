#include "fusebench/overlap.hpp"

#include <algorithm>
#include <stdexcept>

namespace fusebench {

CommSplit split_communication(double pipeline_s, double compute_s, double comm_s) {
  CommSplit s;
  if (!(comm_s > 0)) return s;
  s.exposed_s = std::clamp(pipeline_s - compute_s, 0.0, comm_s);
  s.hidden_s = comm_s - s.exposed_s;
  s.hidden_fraction = s.hidden_s / comm_s;
  return s;
}

PlanTimeline plan_timeline(const Plan& plan, std::span<const double> step_seconds) {
  if (step_seconds.size() != plan.steps.size()) {
    throw std::invalid_argument("plan_timeline: " + std::to_string(step_seconds.size()) +
                                " durations for " + std::to_string(plan.steps.size()) + " steps");
  }
  plan.check_order();
  PlanTimeline t;
  t.start.resize(plan.steps.size());
  t.finish.resize(plan.steps.size());
  double lane_free[kLanes] = {0, 0};
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const StepOrder& o = plan.order_of(i);
    double begin = lane_free[o.lane];
    for (int j : o.after) begin = std::max(begin, t.finish[static_cast<std::size_t>(j)]);
    t.start[i] = begin;
    t.finish[i] = begin + step_seconds[i];
    lane_free[o.lane] = t.finish[i];
    t.makespan_s = std::max(t.makespan_s, t.finish[i]);
    (is_collective(plan.steps[i]) ? t.comm_s : t.compute_s) += step_seconds[i];
  }
  t.split = split_communication(t.makespan_s, t.compute_s, t.comm_s);
  return t;
}

std::vector<double> modelled_step_seconds(const Plan& plan, double compute_s,
                                          const Ceilings& ceilings, const LinkProfile& link) {
  std::vector<double> seconds(plan.steps.size(), 0.0), weight(plan.steps.size(), 0.0);
  double total_weight = 0;
  std::size_t compute_steps = 0;
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    if (const auto call = collective_call(plan.steps[i], plan.dtype)) {
      seconds[i] = modelled_seconds(link, call->kind, call->bytes, plan.shard.tp);
      continue;
    }
    Plan one = plan;  // the step alone, priced by the roofline
    one.steps = {plan.steps[i]};
    one.order.clear();
    weight[i] = roofline_seconds(one, ceilings);
    total_weight += weight[i];
    ++compute_steps;
  }
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    if (is_collective(plan.steps[i])) continue;
    seconds[i] = total_weight > 0 ? compute_s * weight[i] / total_weight
                                  : compute_s / static_cast<double>(compute_steps);
  }
  return seconds;
}

std::map<CollectiveKind, KindTraffic> collective_traffic(const Plan& plan) {
  std::map<CollectiveKind, KindTraffic> out;
  for (const Step& step : plan.steps) {
    if (const auto call = collective_call(step, plan.dtype)) {
      KindTraffic& k = out[call->kind];
      ++k.calls;
      k.bytes += call->bytes;
      k.wire_bytes += wire_bytes(*call, plan.shard.tp);
    }
  }
  return out;
}

}  // namespace fusebench
