#pragma once
// The registry of ops (qkv, gate_up, ...) and their variants (split, fused, ...).
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fusebench/plan.hpp"

namespace fusebench {

// Host values of the logical tensors a plan reads, rounded to the plan's dtype.
using LogicalTensors = std::map<std::string, std::vector<float>>;
// Reference outputs in float64, keyed like Plan::outputs.
using ReferenceOutputs = std::map<std::string, std::vector<double>>;

struct OpInfo {
  std::string name;
  std::string description;
  std::vector<std::string> variants;  // the first one is the baseline ("split")
  std::function<Plan(const ShardShape&, std::int64_t tokens, DType, const std::string& variant)>
      build;
  // Unsharded semantics of the op computed in float64 from the logical tensors.
  std::function<ReferenceOutputs(const Plan& plan, const LogicalTensors& inputs)> reference;
};

const std::vector<OpInfo>& op_registry();
// Throws std::invalid_argument naming the op and listing the valid ones.
const OpInfo& find_op(std::string_view name);
Plan build_plan(std::string_view op, const std::string& variant, const ShardShape& shard,
                std::int64_t tokens, DType dtype);

}  // namespace fusebench
