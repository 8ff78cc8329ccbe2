// The collective sweep, like nccl-tests' all_reduce_perf / all_gather_perf, over the message
// sizes the TP pipelines send: all-reduce of [M, hidden] (in place; values grow from iteration
// to iteration, which does not change the time), and all-gather of [M, hidden/tp] per rank into
// [M, hidden] (so the total gathered size is M*hidden*dtype, the nccl-tests "size").
// Collectives need tp >= 2.
#include "tp_common.hpp"

namespace fusebench::ops {
namespace {

void require_tp(const ShardShape& s, const char* op) {
  if (s.tp < 2)
    throw std::invalid_argument(std::string(op) +
                                " needs tp >= 2 (one rank has nothing to exchange)");
}

Plan build_allreduce(const ShardShape& s, std::int64_t m, const PlanRequest& request,
                     const std::string& variant) {
  if (variant != "sum") unknown_variant(allreduce_op(), variant);
  require_tp(s, "allreduce");
  Plan p = start_plan("allreduce", s, m, request.dtype, variant);
  const int x = add_input(p, "x", m, s.hidden);
  p.steps.push_back(AllReduceStep{"all_reduce", whole(p, x)});
  p.outputs["x"] = whole(p, x);
  return p;
}

// Every rank holds the same x, so one run of the all-reduce gives tp * x.
ReferenceOutputs reference_allreduce(const Plan& p, const LogicalTensors& in) {
  const auto& x = in.at("x");
  std::vector<double> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = static_cast<double>(x[i]) * p.shard.tp;
  return {{"x", std::move(out)}};
}

Plan build_allgather(const ShardShape& s, std::int64_t m, const PlanRequest& request,
                     const std::string& variant) {
  if (variant != "cols") unknown_variant(allgather_op(), variant);
  require_tp(s, "allgather");
  if (s.hidden % s.tp != 0) {
    throw std::invalid_argument("allgather: hidden=" + std::to_string(s.hidden) +
                                " is not divisible by tp=" + std::to_string(s.tp));
  }
  Plan p = start_plan("allgather", s, m, request.dtype, variant);
  const std::int64_t c = s.hidden / s.tp;
  const int x = tp::add_windowed(p, "x_shard", BufferRole::input,
                                 {{"x", m, {m, s.hidden, 0, s.rank * c}}}, c);
  const int g = add_output(p, "gathered", m, s.hidden);
  p.steps.push_back(AllGatherStep{"all_gather", whole(p, x), whole(p, g)});
  p.outputs["gathered"] = whole(p, g);
  return p;
}

// Gathering every rank's column slice of x gives x back.
ReferenceOutputs reference_allgather(const Plan&, const LogicalTensors& in) {
  const auto& x = in.at("x");
  return {{"gathered", std::vector<double>(x.begin(), x.end())}};
}

}  // namespace

OpInfo allreduce_op() {
  OpInfo op{"allreduce",
            "collective sweep: all-reduce (sum, in place) of [M, hidden]",
            {"sum"},
            build_allreduce,
            reference_allreduce};
  op.in_default_sweep = false;  // the collective sweep runs on request
  op.across_ranks = true;
  return op;
}

OpInfo allgather_op() {
  OpInfo op{"allgather",
            "collective sweep: all-gather of [M, hidden/tp] per rank into [M, hidden]",
            {"cols"},
            build_allgather,
            reference_allgather};
  op.in_default_sweep = false;
  op.across_ranks = true;
  return op;
}

}  // namespace fusebench::ops
