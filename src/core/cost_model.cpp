#include "fusebench/cost_model.hpp"

#include <algorithm>
#include <type_traits>

namespace fusebench {
namespace {

// Costs are doubles; sizes are multiplied as doubles too, so a product of untrusted sizes (tokens
// from the command line) cannot wrap as an int64 product would.
double elements(const View& v) { return static_cast<double>(v.rows) * static_cast<double>(v.cols); }

bool same_view(const View& a, const View& b) {
  return a.buffer == b.buffer && a.row0 == b.row0 && a.col0 == b.col0 && a.rows == b.rows &&
         a.cols == b.cols;
}

struct StepCost {
  double flops = 0, bytes = 0, comm_bytes = 0;
};

// A bias epilogue reads the N bias elements once more; its adds are not matmul FLOPs.
StepCost gemm_cost(const GemmStep& g, double elem) {
  const double m = static_cast<double>(g.y.rows), n = static_cast<double>(g.y.cols),
               k = static_cast<double>(g.x.cols);
  return {2 * m * n * k, (m * k + n * k + m * n + (g.has_bias() ? n : 0)) * elem, 0};
}

// Elements of a scale grid of `kind` over a [rows, cols] matrix.
double scale_count(ScaleKind kind, std::int64_t rows, std::int64_t cols) {
  const QuantMat grid{QuantDType::fp8_e4m3fn, kind, rows, cols, {}, {}};
  return static_cast<double>(grid.scale_rows() * grid.scale_cols());
}

// Quantize: reads x, writes one byte per element and the scales (a static scale is read).
StepCost quantize_cost(const QuantizeStep& q, double elem) {
  const double mk = static_cast<double>(q.x.rows * q.x.cols);
  return {0, mk * elem + mk + 4 * scale_count(q.out.kind, q.x.rows, q.x.cols), 0};
}

// A scaled GEMM moves one byte per operand element, both scale grids and y in the plan's dtype;
// int8's dequantize pass also writes and reads its int32 accumulator.
StepCost scaled_gemm_cost(const ScaledGemmStep& g, double elem) {
  const std::int64_t m = g.y.rows, n = g.y.cols, k = g.x.codes.cols;
  const double dm = static_cast<double>(m), dn = static_cast<double>(n),
               dk = static_cast<double>(k);
  const double accumulator = scaled_gemm_launches(g.dtype) > 1 ? 8 * dm * dn : 0;
  return {2 * dm * dn * dk,
          dm * dk + dn * dk + 4 * (scale_count(g.x.kind, m, k) + scale_count(g.w.kind, n, k)) +
              dm * dn * elem + accumulator,
          0};
}

template <class F>
void for_each_step_cost(const Plan& plan, F&& f) {
  const double elem = static_cast<double>(dtype_size(plan.dtype));
  for (const Step& step : plan.steps) {
    std::visit(
        [&](const auto& s) {
          using T = std::decay_t<decltype(s)>;
          if constexpr (std::is_same_v<T, GemmStep>) {
            f(gemm_cost(s, elem), 1, 0, 0);
          } else if constexpr (std::is_same_v<T, GroupedGemmStep>) {
            StepCost total;
            for (std::size_t i = 0; i < s.gemms.size(); ++i) {
              const GemmStep& g = s.gemms[i];
              StepCost c = gemm_cost(g, elem);
              // Minimal traffic: a weight several members of one launch read (the blocks of one
              // expert in a padded MoE GEMM) is read once.
              const bool seen = std::any_of(s.gemms.begin(), s.gemms.begin() + i,
                                            [&](const auto& o) { return same_view(o.w, g.w); });
              if (seen) c.bytes -= static_cast<double>(g.w.rows * g.w.cols) * elem;
              total.flops += c.flops;
              total.bytes += c.bytes;
            }
            f(total, 1, 0, 0);
          } else if constexpr (std::is_same_v<T, ActAndMulStep>) {
            const double mn = elements(s.out);
            f(StepCost{0, 3 * mn * elem, 0}, 0, 1, 0);
          } else if constexpr (std::is_same_v<T, BiasAddStep>) {
            // Reads y and the bias, writes y: 2MN + N per member, one launch for all.
            double bytes = 0;
            for (const auto& m : s.members)
              bytes += (2 * elements(m.y) + static_cast<double>(m.bias.rows)) * elem;
            f(StepCost{0, bytes, 0}, 0, 1, 0);
          } else if constexpr (std::is_same_v<T, RmsNormStep>) {
            const double mn = elements(s.out);
            f(StepCost{0, (2 * mn + static_cast<double>(s.out.cols)) * elem, 0}, 0, 1, 0);
          } else if constexpr (std::is_same_v<T, QuantizeStep>) {
            f(quantize_cost(s, elem), 0, 1, 0);  // an elementwise launch, counted apart too
          } else if constexpr (std::is_same_v<T, ScaledGemmStep>) {
            // The GEMM, and int8's dequantize kernel as an elementwise launch.
            f(scaled_gemm_cost(s, elem), 1, scaled_gemm_launches(s.dtype) - 1, 0);
          } else if constexpr (std::is_same_v<T, GroupedScaledGemmStep>) {
            StepCost total;
            for (std::size_t i = 0; i < s.gemms.size(); ++i) {
              const ScaledGemmStep& g = s.gemms[i];
              StepCost c = scaled_gemm_cost(g, elem);
              // A weight several members read (the blocks of one expert) is read once.
              const bool seen =
                  std::any_of(s.gemms.begin(), s.gemms.begin() + i, [&](const auto& o) {
                    return o.w.scales == g.w.scales && same_view(o.w.codes, g.w.codes);
                  });
              if (seen)
                c.bytes -= static_cast<double>(g.w.codes.rows * g.w.codes.cols) +
                           4 * scale_count(g.w.kind, g.w.codes.rows, g.w.codes.cols);
              total.flops += c.flops;
              total.bytes += c.bytes;
            }
            // One grouped launch, and for int8 one dequantize over every member's accumulator.
            const QuantDType dt = s.gemms.empty() ? QuantDType::fp8_e4m3fn : s.gemms.front().dtype;
            f(total, 1, scaled_gemm_launches(dt) - 1, 0);
          } else if constexpr (std::is_same_v<T, GatherRowsStep>) {
            // Reads each gathered row, writes every dst row (padding rows: written only); a
            // scaled gather (Llama-4's weight on the input) reads its weights from the host
            // arrays the combine also has, not counted, and its multiplies are no matmul FLOPs.
            const auto real =
                std::count_if(s.rows.begin(), s.rows.end(), [](std::int64_t r) { return r >= 0; });
            const double cols = static_cast<double>(s.dst.cols);
            f(StepCost{0,
                       (static_cast<double>(real) + static_cast<double>(s.dst.rows)) * cols * elem,
                       0},
              0, 1, 0);
          } else if constexpr (std::is_same_v<T, ScatterAddStep>) {
            // Per routed row: reads it and the dst row, writes the dst row (3 rows); zero_dst
            // writes dst once more. The weights' multiplies are not matmul FLOPs.
            const auto real =
                std::count_if(s.rows.begin(), s.rows.end(), [](std::int64_t r) { return r >= 0; });
            const double cols = static_cast<double>(s.src.cols);
            double rows = 3 * static_cast<double>(real);
            if (s.zero_dst) rows += static_cast<double>(s.dst.rows);
            f(StepCost{0, rows * cols * elem, 0}, 0, 1, 0);
          } else if constexpr (std::is_same_v<T, SigmoidGateRowsStep>) {
            // Reads x and its gate column, writes x: 2MN + M.
            f(StepCost{0, (2 * elements(s.x) + elements(s.gate)) * elem, 0}, 0, 1, 0);
          } else {
            f(StepCost{0, 0, collective_call(step, plan.dtype)->bytes}, 0, 0, 1);
          }
        },
        step);
  }
}

}  // namespace

std::vector<StepCostEntry> step_costs(const Plan& plan) {
  std::vector<StepCostEntry> out;
  for_each_step_cost(plan, [&](const StepCost& c, int, int, int) {
    out.push_back({{}, c.flops, c.bytes, c.comm_bytes});
  });
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i].kind = std::visit(
        [](const auto& s) -> std::string_view {
          using T = std::decay_t<decltype(s)>;
          if constexpr (std::is_same_v<T, GemmStep> || std::is_same_v<T, GroupedGemmStep>)
            return "gemm";
          if constexpr (std::is_same_v<T, ScaledGemmStep> ||
                        std::is_same_v<T, GroupedScaledGemmStep>)
            return "scaled_gemm";
          if constexpr (std::is_same_v<T, ActAndMulStep>) return "activation";
          if constexpr (std::is_same_v<T, BiasAddStep>) return "bias";
          if constexpr (std::is_same_v<T, RmsNormStep>) return "norm";
          if constexpr (std::is_same_v<T, QuantizeStep>) return "quantize";
          if constexpr (std::is_same_v<T, GatherRowsStep>) return "gather";
          if constexpr (std::is_same_v<T, ScatterAddStep>) return "combine";
          if constexpr (std::is_same_v<T, SigmoidGateRowsStep>) return "gate";
          return "collective";
        },
        plan.steps[i]);
  return out;
}

std::optional<CollectiveCall> collective_call(const Step& step, DType dtype) {
  const double elem = static_cast<double>(dtype_size(dtype));
  const auto size = [&](const View& v) { return elements(v) * elem; };
  if (const auto* a = std::get_if<AllReduceStep>(&step))
    return CollectiveCall{CollectiveKind::all_reduce, size(a->data)};
  if (const auto* g = std::get_if<AllGatherStep>(&step))
    return CollectiveCall{CollectiveKind::all_gather, size(g->dst)};
  if (const auto* g = std::get_if<AllGatherRowsStep>(&step))
    return CollectiveCall{CollectiveKind::all_gather, size(g->dst)};
  if (const auto* r = std::get_if<ReduceScatterStep>(&step))
    return CollectiveCall{CollectiveKind::reduce_scatter, size(r->src)};
  if (const auto* a = std::get_if<AllToAllRowsStep>(&step)) {
    std::int64_t rows = 0;  // the rows this rank sends (to itself included, as nccl-tests)
    for (const auto n : a->send_rows) rows += n;
    return CollectiveCall{CollectiveKind::all_to_all,
                          static_cast<double>(rows * a->src.cols) * elem};
  }
  return std::nullopt;
}

double wire_bytes(const CollectiveCall& call, int ranks) {
  return call.bytes * bus_factor(call.kind, ranks);
}

int scaled_gemm_launches(QuantDType dtype) { return dtype == QuantDType::int8 ? 2 : 1; }

Cost cost_of(const Plan& plan) {
  Cost cost;
  for_each_step_cost(plan, [&](const StepCost& c, int gemm, int elementwise, int collective) {
    cost.flops += c.flops;
    cost.bytes += c.bytes;
    cost.comm_bytes += c.comm_bytes;
    cost.gemm_launches += gemm;
    cost.elementwise_launches += elementwise;
    cost.collective_launches += collective;
  });
  cost.launches = cost.gemm_launches + cost.elementwise_launches + cost.collective_launches;
  for (const Step& step : plan.steps)
    cost.quantize_launches += std::holds_alternative<QuantizeStep>(step);
  for (const Step& step : plan.steps) {
    if (const auto call = collective_call(step, plan.dtype))
      cost.comm_wire_bytes += wire_bytes(*call, plan.shard.tp);
  }
  return cost;
}

double roofline_seconds(const Plan& plan, const Ceilings& ceilings, double per_launch_s) {
  double seconds = 0;
  for_each_step_cost(plan, [&](const StepCost& c, int gemm, int elementwise, int collective) {
    const double compute = ceilings.peak_flops > 0 ? c.flops / ceilings.peak_flops : 0;
    const double memory = ceilings.bandwidth > 0 ? c.bytes / ceilings.bandwidth : 0;
    seconds += std::max(compute, memory) + per_launch_s * (gemm + elementwise + collective);
  });
  return seconds;
}

std::int64_t predicted_compute_bound_tokens(const std::function<Plan(std::int64_t)>& plan_at,
                                            const Ceilings& ceilings, std::int64_t max_tokens) {
  const double ridge = ceilings.ridge();
  const auto intensity = [&](std::int64_t tokens) {
    return cost_of(plan_at(tokens)).arithmetic_intensity();
  };
  if (ridge <= 0 || intensity(max_tokens) < ridge) return -1;
  std::int64_t lo = 1, hi = max_tokens;  // intensity grows with tokens
  if (intensity(lo) >= ridge) return lo;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (intensity(mid) >= ridge ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace fusebench
