// The moe op's per-model set-up: the routing block each of its shards carries (the rule read from
// the model's own config, the routing source, the seed, a checkpoint's router) and what the block
// refuses. The sweep calls it through OpInfo::setup and names no op (docs/adding-an-op.md).
#include "fusebench/input_files.hpp"
#include "op_list.hpp"

namespace fusebench::ops {

namespace {

// A checkpoint's router (--weights, --routing=router): read before anything runs, so that a
// missing or misshapen router tensor is bad input naming it (a model whose rule is refused is
// left out by the preparer instead).
std::shared_ptr<const RouterWeights> checkpoint_router(const ModelSetup& m) {
  if (!m.read_router || m.routing.kind != RoutingKind::router) return nullptr;
  const std::string path = m.checkpoint_dir + "/config.json";
  RoutingRule rule;
  try {
    rule = routing_rule_from_config(read_input_file(path, "the checkpoint config"), path);
  } catch (const std::invalid_argument&) {
    return nullptr;  // the preparer says why
  }
  return m.read_router(rule.correction_bias);
}

// The routing block of the model: its rule read from the config it came from (a preset's
// excerpt, a --model-config file, a checkpoint's config.json).
std::shared_ptr<const MoeBlock> moe_block(const ModelSetup& m,
                                          const std::shared_ptr<const RouterWeights>& router) {
  auto b = std::make_shared<MoeBlock>();
  b->router = router;
  if (!m.preset.empty()) {
    b->rule = routing_rule_for_preset(m.preset);
    b->config_name = "the preset " + m.preset;
  } else {
    const std::string path =
        !m.config_path.empty() ? m.config_path : m.checkpoint_dir + "/config.json";
    b->rule = routing_rule_from_config(read_input_file(path, "the model config"), path);
    b->config_name = path;
  }
  b->source = m.routing;
  b->seed = m.seed;
  b->placement = m.expert_placement;
  b->redundant_experts = m.redundant_experts;
  for (const auto& l : m.model->mlp_layer_list())
    if (l.kind == LayerKind::shared_expert) b->shared_intermediate = l.intermediate;
  return b;
}

}  // namespace

ShardPreparer moe_setup(const ModelSetup& m) { return moe_block_setup(m, "moe", "per_expert"); }

ShardPreparer moe_block_setup(const ModelSetup& m, const std::string& op,
                              const std::string& probe_variant) {
  const auto router = checkpoint_router(m);
  // The block, once per model (its config is read once): read-only, shared by every shard. What
  // makes it unreadable (a rule the suite refuses, an unreadable config) is the op's refusal.
  std::shared_ptr<const MoeBlock> block;
  std::string unreadable;
  if (!op_layers(op, *m.model).empty()) {
    try {
      block = moe_block(m, router);
    } catch (const std::invalid_argument& e) {
      unreadable = e.what();
    }
  }
  return [m, op, probe_variant, block, unreadable](ShardShape& shard,
                                                   const std::vector<QuantSpec>& specs) {
    if (op_layers(op, *m.model).empty())
      return std::vector<OpRefusal>{{op, "the model has no routed experts"}};
    if (!block) return std::vector<OpRefusal>{{op, unreadable}};
    std::string why;  // the block's own refusals, at one token
    try {
      ShardShape probe = shard;
      // A routing file is checked where it is used, at the sweep's own token counts (a
      // tokens_per_expert file fits one M): this probe at M=1 routes uniformly.
      probe.moe = file_routing_as_uniform(block);
      build_plan(op, probe_variant, probe, 1, DType::f32);
    } catch (const std::invalid_argument& e) {
      why = e.what();
    }
    if (why.empty()) {
      shard.moe = block;
      return std::vector<OpRefusal>{};
    }
    // Left out with the reason, never an error: a sweep over dense and MoE models, or a GPU
    // sweep, runs the rest. A quantized spec's own refusal where it says more: vLLM's block rule
    // at tp > 1 (Qwen3-30B-A3B's 768-wide experts at tp 8: 96 per rank).
    std::vector<OpRefusal> out{{op, why}};
    for (const QuantSpec& spec : specs) {
      try {
        ShardShape q = shard;
        q.moe = block;
        build_plan(op, probe_variant, q, 1, DType::bf16, spec);
      } catch (const std::invalid_argument& e) {
        if (why != e.what()) out.push_back({op + " dtype:" + spec.name(), e.what()});
      }
    }
    return out;
  };
}

}  // namespace fusebench::ops
