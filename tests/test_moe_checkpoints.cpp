// The moe op on a checkpoint's experts and router (--weights, docs/checkpoints.md and
// docs/moe.md), on the tiny checkpoints tests/checkpoints/make_moe_checkpoints.py writes (the
// ctest fixture runs it first): Qwen3-MoE with per-expert tensors and the same values in
// transformers 5's 3-D stacks, DeepSeek-V3 with a shared expert and a correction bias. Every
// expert lands in w13/w2 where vLLM's FusedMoE weight_loader puts it (the script's
// transcription), the router read is the checkpoint's and routes the plan, the block verifies
// through the binary, and every fault exits 2 naming the tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_run.hpp"
#include "fusebench/checkpoint_router.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/routing.hpp"
#include "fusebench/workspace.hpp"
#include "runner/checkpoint_weights.hpp"

using namespace fusebench;
namespace fs = std::filesystem;

namespace {

const fs::path kDir = FUSEBENCH_MOE_CHECKPOINTS_DIR;

const nlohmann::json& manifest() {
  static const nlohmann::json m = [] {
    std::ifstream in(kDir / "expected.json");
    if (!in) {
      ADD_FAILURE() << (kDir / "expected.json")
                    << " is missing: the make_moe_checkpoints ctest fixture writes it";
      return nlohmann::json::object();
    }
    return nlohmann::json::parse(in);
  }();
  return m;
}

std::vector<float> floats(const nlohmann::json& j) { return j.get<std::vector<float>>(); }

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<float> read_buffer(Workspace& ws, const std::string& name) {
  const Plan& plan = ws.plan();
  for (std::size_t i = 0; i < plan.buffers.size(); ++i) {
    if (plan.buffers[i].name == name)
      return ws.read(View{static_cast<int>(i), 0, 0, plan.buffers[i].rows, plan.buffers[i].cols});
  }
  ADD_FAILURE() << "no buffer " << name;
  return {};
}

// The case's layer opened as the sweep opens it for moe, and its moe shard with the router read
// from the checkpoint.
struct Opened {
  bench::CheckpointModel model;
  RoutingRule rule;
  ShardShape shard;
};
Opened open(const std::string& name, int layer) {
  Opened o;
  const fs::path dir = kDir / name;
  o.model = bench::open_checkpoint_model(dir.string(), layer, -1, true);
  o.rule = routing_rule_from_config(read(dir / "config.json"), (dir / "config.json").string());
  o.shard = shard(o.model.model, 1, LayerKind::expert);
  auto b = std::make_shared<MoeBlock>();
  b->rule = o.rule;
  b->source = parse_routing("router");
  b->seed = 5;
  for (const auto& l : o.model.model.mlp_layer_list())
    if (l.kind == LayerKind::shared_expert) b->shared_intermediate = l.intermediate;
  b->router = std::make_shared<const RouterWeights>(
      read_router(o.model.layer->checkpoint(), o.model.model, layer, o.rule.correction_bias));
  o.shard.moe = std::move(b);
  return o;
}

struct Case {
  std::string name;
  int layer;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name << " layer " << c.layer; }
// The script's cases and their MoE layers (fixed here: the tests are listed before the ctest
// fixture writes the checkpoints; the manifest must list the same).
const std::vector<Case> kCases = {{"qwen3_moe_experts", 0},
                                  {"qwen3_moe_experts", 1},
                                  {"qwen3_moe_stacked", 0},
                                  {"qwen3_moe_stacked", 1},
                                  {"deepseek_v3", 1}};

TEST(MoeCheckpointScript, ManifestListsTheCases) {
  std::vector<Case> listed;
  for (const auto& [name, c] : manifest().at("cases").items())
    for (int layer : c.at("moe_layers")) listed.push_back({name, layer});
  ASSERT_EQ(listed.size(), kCases.size());
  for (const Case& c : kCases) {
    EXPECT_TRUE(std::any_of(listed.begin(), listed.end(),
                            [&](const Case& l) { return l.name == c.name && l.layer == c.layer; }))
        << c.name << " " << c.layer;
  }
}

class MoeCheckpoint : public ::testing::TestWithParam<Case> {};

// w13 and w2 hold every expert as vLLM's FusedMoE weight_loader builds them; the shared expert
// and the router are the checkpoint's; the plan is routed by that router.
TEST_P(MoeCheckpoint, EveryExpertInW13AndW2AndRoutedByItsRouter) {
  const auto [name, layer] = GetParam();
  SCOPED_TRACE(name + " layer " + std::to_string(layer));
  const auto& want = manifest().at("cases").at(name).at("layers").at(std::to_string(layer));
  const Opened o = open(name, layer);
  EXPECT_EQ(o.model.layer->all_experts().size(), manifest().at("experts").get<std::size_t>());
  auto backend = make_cpu_backend();
  const Plan plan = build_plan("moe", "grouped", o.shard, 8, DType::f32);
  Workspace ws(*backend, plan, 3, o.model.layer.get());
  EXPECT_EQ(read_buffer(ws, "w13"), floats(want.at("w13")));
  EXPECT_EQ(read_buffer(ws, "w2"), floats(want.at("w2")));
  if (want.contains("shared")) {
    std::vector<float> gate_up = floats(want.at("shared").at("gate"));
    const auto up = floats(want.at("shared").at("up"));
    gate_up.insert(gate_up.end(), up.begin(), up.end());
    EXPECT_EQ(read_buffer(ws, "w_shared_gate_up"), gate_up);
    EXPECT_EQ(read_buffer(ws, "w_shared_down"), floats(want.at("shared").at("down")));
  }
  const RouterWeights& router = *o.shard.moe->router;
  EXPECT_EQ(router.router_w, floats(want.at("router")));
  EXPECT_EQ(router.bias, floats(want.at("bias")));
  // The plan's routing is the rule on the script's router (and bias) over the seeded tokens.
  const std::int64_t h = o.model.model.hidden;
  const RouterInputs in = random_router_inputs(o.rule, 8, h, 5);
  const RoutingAssignment expect = route_hidden(o.rule, 8, h, in.hidden_states,
                                                floats(want.at("router")), floats(want.at("bias")));
  EXPECT_EQ(plan.moe->assignment.expert_ids, expect.expert_ids);
  EXPECT_EQ(plan.moe->assignment.weights, expect.weights);
  EXPECT_NE(plan.moe->assignment.router.find("mlp.gate.weight"), std::string::npos);
  // The random router routes the same tokens differently: the checkpoint's is the one used.
  const RoutingAssignment random =
      route_hidden(o.rule, 8, h, in.hidden_states, in.router_w, in.bias);
  EXPECT_NE(plan.moe->assignment.expert_ids, random.expert_ids);
}

INSTANTIATE_TEST_SUITE_P(Script, MoeCheckpoint, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           return p.param.name + "_layer" + std::to_string(p.param.layer);
                         });

nlohmann::json run_verified(const std::string& name, const std::string& args) {
  const auto report = fusebench::testing::temp_path("moe_ckpt", name + ".json");
  const auto r = fusebench::testing::run_fusebench(
      "--backend=cpu --timing-max-time=0.02 --ops=moe --tokens=1,8 --verify --weights=" +
      (kDir / name).string() + " " + args + " --report=" + report.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  if (r.exit_code != 0) return nlohmann::json::object();
  auto j = fusebench::testing::load_json(report);
  fs::remove(report);
  return j;
}

// Through the binary: every variant verifies against float64 on the checkpoint, the entries say
// weights:checkpoint and which router routed them, context.weights names every expert's tensors.
TEST(MoeCheckpointCli, PerExpertAndStackedVerifyAndRouteAlike) {
  std::vector<std::vector<std::int64_t>> histograms[2];
  int i = 0;
  for (const char* name : {"qwen3_moe_experts", "qwen3_moe_stacked"}) {
    SCOPED_TRACE(name);
    const auto j = run_verified(name, "--layer=1");
    if (j.empty()) return;
    ASSERT_EQ(j.at("context").at("verification").size(), 8u);  // 4 variants x 2 token counts
    for (const auto& v : j.at("context").at("verification")) {
      EXPECT_TRUE(v.at("ok").get<bool>()) << v.dump();
      EXPECT_EQ(v.at("weights"), "checkpoint");
    }
    for (const auto& b : j.at("benchmarks")) {
      EXPECT_EQ(b.at("weights"), "checkpoint");
      const auto& routing = b.at("moe").at("routing");
      EXPECT_NE(routing.at("router").get<std::string>().find("model.layers.1.mlp.gate.weight"),
                std::string::npos);
      if (b.at("variant") == "per_expert")
        histograms[i].push_back(routing.at("histogram").get<std::vector<std::int64_t>>());
    }
    const auto& c = j.at("context").at("weights").at("checkpoints").at(0);
    EXPECT_EQ(c.at("layer"), 1);
    EXPECT_EQ(c.at("experts").size(), 4u);
    EXPECT_NE(c.at("router").get<std::string>().find("mlp.gate.weight"), std::string::npos);
    const std::string down3 = c.at("sources").at("w_expert3_down");
    EXPECT_NE(down3.find(i == 0 ? "model.layers.1.mlp.experts.3.down_proj.weight"
                                : "model.layers.1.mlp.experts.down_proj expert 3"),
              std::string::npos)
        << down3;
    ++i;
  }
  EXPECT_EQ(histograms[0], histograms[1]);  // the same values, stored two ways
}

TEST(MoeCheckpointCli, SharedExpertAndCorrectionBiasVerify) {
  const auto j = run_verified("deepseek_v3", "--layer=1");
  if (j.empty()) return;
  for (const auto& v : j.at("context").at("verification")) EXPECT_TRUE(v.at("ok").get<bool>());
  const auto& c = j.at("context").at("weights").at("checkpoints").at(0);
  EXPECT_NE(c.at("router").get<std::string>().find("mlp.gate.e_score_correction_bias"),
            std::string::npos);
  EXPECT_NE(c.at("sources").at("w_shared_expert_down").get<std::string>().find("shared_experts"),
            std::string::npos);
}

// Another --routing= source needs no router: it still runs on the checkpoint's experts.
TEST(MoeCheckpointCli, OtherRoutingSourcesNeedNoRouter) {
  const auto j = run_verified("hostile/missing_router", "--routing=zipf:1.2");
  if (j.empty()) return;
  for (const auto& b : j.at("benchmarks")) {
    EXPECT_EQ(b.at("moe").at("routing").at("routing"), "zipf:1.2");
    EXPECT_TRUE(b.at("moe").at("routing").at("router").is_null());
  }
  EXPECT_TRUE(j.at("context").at("weights").at("checkpoints").at(0).at("router").is_null());
}

TEST(MoeCheckpointCli, AMissingOrMisshapenTensorExitsTwoNamingIt) {
  for (const auto& h : manifest().at("hostile")) {
    const std::string dir = h.at("dir");
    SCOPED_TRACE(dir);
    const auto r = fusebench::testing::run_fusebench(
        "--backend=cpu --ops=moe --tokens=1 --weights=" + (kDir / dir).string() + " " +
        h.at("args").get<std::string>());
    EXPECT_EQ(r.exit_code, 2) << r.output;
    const std::string tensor = h.at("tensor").get<std::string>();
    EXPECT_NE(r.output.find(quote_name(tensor)), std::string::npos) << r.output;
  }
}

}  // namespace
