// Correctness of the TP pipelines: each rank's output against the unsharded pair (float64) and
// against the unsharded pipeline run on the same backend.
#include <algorithm>
#include <cmath>
#include <exception>
#include <mutex>
#include <thread>

#include "fusebench/ops.hpp"
#include "fusebench/tp.hpp"
#include "fusebench/workspace.hpp"

namespace fusebench {
bool is_tp_op(std::string_view op) {
  const auto& ops = op_registry();
  return std::any_of(ops.begin(), ops.end(),
                     [&](const OpInfo& o) { return o.name == op && o.across_ranks; });
}
bool is_collective_op(std::string_view op) { return op == "allreduce" || op == "allgather"; }

ShardShape unsharded(const ShardShape& s) {
  ShardShape u = s;
  u.tp = 1;
  u.rank = 0;
  u.q_heads = s.q_heads * s.tp;
  u.kv_heads = s.kv_heads * s.tp / s.kv_replicas;
  u.kv_replicas = 1;
  u.intermediate = s.intermediate * s.tp;
  return u;
}

std::string tp_config_string(const std::string& op, const std::string& variant, const ShardShape& s,
                             std::int64_t tokens, DType dtype, std::uint64_t seed) {
  return op + "/" + variant + " tokens=" + std::to_string(tokens) + " tp=" + std::to_string(s.tp) +
         " hidden=" + std::to_string(s.hidden) + " heads=" + std::to_string(s.q_heads) + "/" +
         std::to_string(s.kv_heads) + "x" + std::to_string(s.kv_replicas) +
         " head_dim=" + std::to_string(s.head_dim) + " layer=" + std::string(to_string(s.mlp)) +
         " inter=" + std::to_string(s.intermediate) + " bias=" + std::to_string(s.qkv_bias) +
         std::to_string(s.o_bias) + std::to_string(s.mlp_bias) +
         " act=" + std::string(to_string(s.activation)) +
         " dtype=" + std::string(to_string(dtype)) + " seed=" + std::to_string(seed);
}

VerifyResult verify_tp_rank(Backend& backend, Communicator& comm, const std::string& op,
                            const std::string& variant, ShardShape shard, std::int64_t tokens,
                            DType dtype, std::uint64_t seed, bool with_reference,
                            const TensorSource* weights, std::int64_t reference_rows) {
  if (comm.size() != shard.tp) {
    throw std::invalid_argument("verify " + op + ": communicator has " +
                                std::to_string(comm.size()) +
                                " ranks but tp=" + std::to_string(shard.tp));
  }
  shard.rank = comm.rank();
  comm.check_same_config(tp_config_string(op, variant, shard, tokens, dtype, seed));
  return verify_tp_plan(backend, comm, build_plan(op, variant, shard, tokens, dtype), seed,
                        with_reference, weights, reference_rows);
}

VerifyResult verify_tp_plan(Backend& backend, Communicator& comm, const Plan& plan,
                            std::uint64_t seed, bool with_reference, const TensorSource* weights,
                            std::int64_t reference_rows) {
  const std::string& op = plan.op;
  const ShardShape& shard = plan.shard;
  const std::int64_t tokens = plan.tokens;
  const DType dtype = plan.dtype;
  const Tolerance tol = tolerance_for(dtype);
  const OpInfo& info = find_op(op);
  const bool head = with_reference && reference_rows > 0 && reference_rows < tokens;
  if (head && !info.reference_head)
    throw std::invalid_argument("verify " + op + ": no float64 reference of a rank's first rows");
  Workspace ws(backend, plan, seed, weights);
  ws.run(&comm);
  VerifyResult result{op,
                      plan.variant + "/rank:" + std::to_string(shard.rank),
                      {},
                      !with_reference ? 0
                      : head          ? reference_rows
                                      : tokens};
  ReferenceOutputs reference;
  if (with_reference) {
    LogicalTensors inputs =
        logical_inputs(info.reference_plan ? info.reference_plan(plan) : plan, seed, weights);
    reference = head ? info.reference_head(plan, std::move(inputs), reference_rows)
                     : info.reference(plan, inputs);
  }
  std::map<std::string, std::vector<float>> got;
  for (const auto& [name, view] : ws.plan().outputs) {
    got[name] = ws.read(view);
    if (!with_reference) continue;
    std::vector<float> mine = got[name];
    if (head)  // the output's first rows (row-major: the first rows*cols values)
      mine.resize(std::min(mine.size(), reference.at(name).size()));
    result.comparisons.push_back(compare_outputs(name, "float64", mine, reference.at(name), tol));
  }
  if (!is_collective_op(op) && !info.unsharded_variant.empty()) {
    // The unsharded layer pair on one device: the same op at tp = 1 (no collectives), on the
    // same weights. A sequence-parallel rank holds its rows of it (its padding rows are checked
    // against the float64 reference, zeros).
    Workspace one(backend, build_plan(op, info.unsharded_variant, unsharded(shard), tokens, dtype),
                  seed, weights);
    one.run(nullptr);
    std::vector<float> want = one.read(one.plan().outputs.at("out"));
    std::vector<float> mine = got.at("out");
    if (const auto it = plan.output_rows.find("out"); it != plan.output_rows.end()) {
      const std::int64_t h = plan.outputs.at("out").cols;
      want = std::vector<float>(want.begin() + it->second.row0 * h,
                                want.begin() + (it->second.row0 + it->second.rows) * h);
      mine.resize(static_cast<std::size_t>(it->second.rows * h));
    }
    result.comparisons.push_back(compare_outputs("out", "unsharded", mine, want, tol));
  }
  return result;
}

void run_ranks(int ranks, const std::function<void(int)>& body) {
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        std::lock_guard lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

std::vector<VerifyResult> verify_tp_op_inprocess(const std::string& op, const ShardShape& shard,
                                                 std::int64_t tokens, DType dtype,
                                                 std::uint64_t seed, bool with_reference,
                                                 const TensorSource* weights,
                                                 std::int64_t reference_rows) {
  std::vector<VerifyResult> results;
  for (const auto& variant : variants_for(find_op(op), shard)) {
    auto comms = make_inprocess_group(shard.tp, default_comm_timeout());
    std::vector<VerifyResult> per_rank(static_cast<std::size_t>(shard.tp));
    run_ranks(shard.tp, [&](int r) {
      auto backend = make_cpu_backend();
      per_rank[static_cast<std::size_t>(r)] =
          verify_tp_rank(*backend, *comms[static_cast<std::size_t>(r)], op, variant, shard, tokens,
                         dtype, seed, with_reference, weights, reference_rows);
    });
    for (auto& r : per_rank) results.push_back(std::move(r));
  }
  return results;
}

std::vector<VerifyResult> verify_quant_tp_inprocess(const std::string& op, const ShardShape& shard,
                                                    std::int64_t tokens, DType dtype,
                                                    const QuantSpec& spec, std::uint64_t seed,
                                                    const TensorSource* weights) {
  const OpInfo& info = find_op(op);
  if (!info.quant_variants) throw std::invalid_argument(quant_refusal(info));
  const Tolerance tol = tolerance_for(dtype);
  std::vector<VerifyResult> results;
  for (const auto& variant : info.quant_variants(spec)) {
    std::vector<Plan> plans;
    try {
      for (int r = 0; r < shard.tp; ++r) {
        ShardShape s = shard;
        s.rank = r;
        plans.push_back(build_plan(op, variant, s, tokens, dtype, spec));
      }
    } catch (const std::invalid_argument&) {
      continue;  // refused (the sweep says why)
    }
    const std::vector<ReferenceOutputs> want =
        dequantized_tp_reference(plans, logical_inputs(plans.front(), seed, weights), weights);
    auto comms = make_inprocess_group(shard.tp, default_comm_timeout());
    std::vector<VerifyResult> per_rank(static_cast<std::size_t>(shard.tp));
    run_ranks(shard.tp, [&](int r) {
      const auto rank = static_cast<std::size_t>(r);
      auto backend = make_cpu_backend();
      Workspace ws(*backend, plans[rank], seed, weights);
      ws.run(comms[rank].get());
      VerifyResult result{op, variant + "/rank:" + std::to_string(r), {}, tokens};
      for (const auto& [name, view] : ws.plan().outputs)
        result.comparisons.push_back(
            compare_outputs(name, "float64_dequantized", ws.read(view), want[rank].at(name), tol));
      per_rank[rank] = std::move(result);
    });
    for (auto& r : per_rank) results.push_back(std::move(r));
  }
  return results;
}

}  // namespace fusebench
