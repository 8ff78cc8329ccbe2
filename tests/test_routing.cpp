// MoE routing as data (issue 30, docs/moe.md): each family's rule on hand-computed logits, the
// rules read from configs (published and transformers-written) and their refusals, the routing
// sources and theirs, the statistics, and the padding arithmetic of moe_align_block_size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "error_of.hpp"
#include "fusebench/routing.hpp"
#include "fusebench/shapes.hpp"

namespace {

using namespace fusebench;

std::string read(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string config(const std::string& file) {
  return read(std::string(FUSEBENCH_TEST_CONFIGS) + "/" + file);
}

double sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }

RoutingRule rule(std::int64_t E, std::int64_t k) {
  RoutingRule r;
  r.experts = E;
  r.top_k = k;
  return r;
}

std::vector<std::int32_t> ids_of(const RoutingAssignment& a, std::int64_t t) {
  return {a.expert_ids.begin() + t * a.top_k, a.expert_ids.begin() + (t + 1) * a.top_k};
}

// --- Rules on hand-computed logits ------------------------------------------------------------

TEST(RoutingRules, SoftmaxTopkRenormalized) {
  // softmax([1, 2, 3, 0]); top-2 = experts 2, 1; renormalized: e^3 / (e^3 + e^2) = sigmoid(1).
  RoutingRule r = rule(4, 2);
  r.renormalize = true;
  const auto a = route_logits(r, 1, {1, 2, 3, 0}, {});
  EXPECT_EQ(ids_of(a, 0), (std::vector<std::int32_t>{2, 1}));
  EXPECT_NEAR(a.weights[0], sig(1), 1e-6);
  EXPECT_NEAR(a.weights[1], 1 - sig(1), 1e-6);
  // Without renormalization the weights are the softmax probabilities themselves.
  r.renormalize = false;
  const double sum = std::exp(1) + std::exp(2) + std::exp(3) + 1;
  const auto b = route_logits(r, 1, {1, 2, 3, 0}, {});
  EXPECT_NEAR(b.weights[0], std::exp(3) / sum, 1e-6);
  EXPECT_NEAR(b.weights[1], std::exp(2) / sum, 1e-6);
}

TEST(RoutingRules, TopkOfLogitsThenScoring) {
  // gpt-oss / GraniteMoE: softmax over the two largest logits (3 and 2) = sigmoid(1), 1 - it.
  RoutingRule r = rule(4, 2);
  r.order = TopkOrder::topk_then_score;
  const auto a = route_logits(r, 1, {1, 2, 3, 0}, {});
  EXPECT_EQ(ids_of(a, 0), (std::vector<std::int32_t>{2, 1}));
  EXPECT_NEAR(a.weights[0], sig(1), 1e-6);
  EXPECT_NEAR(a.weights[1], 1 - sig(1), 1e-6);
  // Llama-4: sigmoid of the top-1 logit, not normalized.
  RoutingRule l = rule(4, 1);
  l.order = TopkOrder::topk_then_score;
  l.scoring = RouterScoring::sigmoid;
  EXPECT_NEAR(route_logits(l, 1, {1, 2, 3, 0}, {}).weights[0], sig(3), 1e-6);
}

// Eight experts in four groups of two: sigmoid scores
// [s(0), s(-0.5) | s(2), s(-2) | s(1), s(1) | s(-1), s(3)], bias +0.5 on expert 6.
const std::vector<float> kGroupLogits = {0, -0.5f, 2, -2, 1, 1, -1, 3};

TEST(RoutingRules, SigmoidBiasGroupsAndScaling) {
  RoutingRule r = rule(8, 2);
  r.scoring = RouterScoring::sigmoid;
  r.correction_bias = true;
  r.n_group = 4;
  r.topk_group = 2;
  r.renormalize = true;
  r.routed_scaling_factor = 2.5;
  std::vector<float> bias(8, 0.0f);
  bias[6] = 0.5f;
  // Group scores (top-2 sums of the biased scores): 0.878, 1.0, 1.462, 1.722: groups 3 and 2.
  // Inside them the biased choice is 7 (0.953), then 6 (0.269 + 0.5), over 4 and 5 (0.731);
  // expert 2 (0.881) is outside the chosen groups. Weights: the unbiased scores, renormalized,
  // times 2.5.
  const auto a = route_logits(r, 1, kGroupLogits, bias);
  EXPECT_EQ(ids_of(a, 0), (std::vector<std::int32_t>{7, 6}));
  const double sum = sig(3) + sig(-1);
  EXPECT_NEAR(a.weights[0], 2.5 * sig(3) / sum, 1e-5);
  EXPECT_NEAR(a.weights[1], 2.5 * sig(-1) / sum, 1e-5);
}

TEST(RoutingRules, GroupsWithoutBiasScoreByMax) {
  // Without a correction bias a group scores its max: 0.5, 0.881, 0.731, 0.953: groups 3 and 1.
  RoutingRule r = rule(8, 2);
  r.scoring = RouterScoring::sigmoid;
  r.n_group = 4;
  r.topk_group = 2;
  const auto a = route_logits(r, 1, kGroupLogits, {});
  EXPECT_EQ(ids_of(a, 0), (std::vector<std::int32_t>{7, 2}));
  EXPECT_NEAR(a.weights[0], sig(3), 1e-6);
  EXPECT_NEAR(a.weights[1], sig(2), 1e-6);
  // A grouping that does not split the experts routes ungrouped (vLLM's valid_grouping).
  r.n_group = 3;
  r.topk_group = 1;
  EXPECT_EQ(ids_of(route_logits(r, 1, kGroupLogits, {}), 0), (std::vector<std::int32_t>{7, 2}));
}

TEST(RoutingRules, RouteHiddenMultipliesByTheRouterWeights) {
  // logits = [1, 2] x [[1, 0], [0, 1], [1, 1]]^T = [1, 2, 3]: top-1 is expert 2.
  RoutingRule r = rule(3, 1);
  const auto a = route_hidden(r, 1, 2, {1, 2}, {1, 0, 0, 1, 1, 1}, {});
  EXPECT_EQ(a.expert_ids[0], 2);
  EXPECT_NE(error_of([&] {
              route_hidden(r, 1, 2, {1, 2}, {1, 0}, {});
            }).find("router_w"),
            std::string::npos);
  r.correction_bias = true;
  EXPECT_NE(error_of([&] {
              route_logits(r, 1, {1, 2, 3}, {});
            }).find("e_score_correction_bias"),
            std::string::npos);
}

TEST(RoutingRules, ValidateRefusesInconsistentRules) {
  EXPECT_NE(error_of([] { validate(rule(4, 5)); }).find("top_k=5"), std::string::npos);
  RoutingRule r = rule(8, 4);
  r.n_group = 4;
  r.topk_group = 1;  // one group of two experts cannot hold four
  EXPECT_NE(error_of([&] { validate(r); }).find("top_k=4"), std::string::npos);
  RoutingRule g = rule(8, 2);
  g.order = TopkOrder::topk_then_score;
  g.correction_bias = true;
  EXPECT_NE(error_of([&] { validate(g); }), "");
}

// --- Rules read from configs ------------------------------------------------------------------

TEST(RoutingConfig, PublishedConfigs) {
  const auto v3 = routing_rule_from_config(config("deepseek-v3.json"), "deepseek-v3.json");
  EXPECT_EQ(v3.experts, 256);
  EXPECT_EQ(v3.top_k, 8);
  EXPECT_EQ(v3.scoring, RouterScoring::sigmoid);
  EXPECT_TRUE(v3.correction_bias);
  EXPECT_TRUE(v3.renormalize);
  EXPECT_EQ(v3.n_group, 8);
  EXPECT_EQ(v3.topk_group, 4);
  EXPECT_TRUE(v3.grouped());
  EXPECT_DOUBLE_EQ(v3.routed_scaling_factor, 2.5);

  const auto oss = routing_rule_from_config(config("gpt-oss-20b.json"), "gpt-oss-20b.json");
  EXPECT_EQ(oss.experts, 32);
  EXPECT_EQ(oss.top_k, 4);
  EXPECT_EQ(oss.order, TopkOrder::topk_then_score);
  EXPECT_EQ(oss.scoring, RouterScoring::softmax);

  const auto mix = routing_rule_from_config(config("mixtral-8x7b.json"), "mixtral-8x7b.json");
  EXPECT_EQ(mix.experts, 8);
  EXPECT_EQ(mix.top_k, 2);
  EXPECT_TRUE(mix.renormalize);

  EXPECT_TRUE(routing_rule_from_config(config("qwen3-30b-a3b.json"), "q3").renormalize);
  EXPECT_FALSE(routing_rule_from_config(config("qwen1.5-moe-a2.7b.json"), "q2").renormalize);

  const auto lite = routing_rule_from_config(config("deepseek-v2-lite.json"), "v2-lite");
  EXPECT_EQ(lite.scoring, RouterScoring::softmax);
  EXPECT_FALSE(lite.correction_bias);
  EXPECT_FALSE(lite.grouped());  // greedy
  EXPECT_FALSE(lite.renormalize);
}

TEST(RoutingConfig, TransformersWrittenConfigs) {
  // Glm4MoeConfig writes no scoring_func/topk_method: the class's sigmoid + bias rule applies.
  const std::string dir = std::string(FUSEBENCH_FAMILY_CHECKPOINTS) + "/";
  const auto glm = routing_rule_from_config(read(dir + "glm4_moe/config.json"), "glm4_moe");
  EXPECT_EQ(glm.scoring, RouterScoring::sigmoid);
  EXPECT_TRUE(glm.correction_bias);
  EXPECT_EQ(glm.n_group, 1);
  const auto qwen = routing_rule_from_config(read(dir + "qwen3_moe/config.json"), "qwen3_moe");
  EXPECT_EQ(qwen.experts, 4);
  EXPECT_FALSE(qwen.renormalize);
  // PhiMoE's sparsemixer is not mapped: refused naming the field that drives it (attention_bias
  // set, which the shape reader requires of phimoe before the router is looked at).
  nlohmann::json phimoe = nlohmann::json::parse(read(dir + "phimoe/config.json"));
  phimoe["attention_bias"] = true;
  const std::string message = error_of([&] { routing_rule_from_config(phimoe.dump(), "phimoe"); });
  EXPECT_NE(message.find("'router_jitter_noise'"), std::string::npos) << message;
}

// Small configs of the families no published test config covers, with the rule each must read.
const char kBase[] = R"("hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
    "num_hidden_layers": 2, "hidden_act": "silu", "head_dim": 16, "intermediate_size": 32)";
std::string small(const std::string& type, const std::string& fields) {
  return "{\"model_type\": \"" + type + "\", " + kBase + ", " + fields + "}";
}
std::string llama4(int k) {
  return R"({"model_type": "llama4", "text_config": )" +
         small("llama4_text", R"("intermediate_size_mlp": 64, "num_local_experts": 4,
             "interleave_moe_layer_step": 1, "num_experts_per_tok": )" +
                                  std::to_string(k)) +
         "}";
}
std::string dbrx(const char* normalize) {
  return std::string(R"({"model_type": "dbrx", "d_model": 64, "n_heads": 4, "n_layers": 2,
      "attn_config": {"kv_n_heads": 2}, "ffn_config": {"moe_num_experts": 4, "moe_top_k": 2,
      "ffn_hidden_size": 32, "moe_normalize_expert_weights": )") +
         normalize + "}}";
}

TEST(RoutingConfig, EveryMoeFamilyReadsItsRule) {
  struct Case {
    std::string name, json;
    RouterScoring scoring;
    TopkOrder order;
    bool renormalize, bias, on_input;
    std::int64_t n_group;
    double scaling;
  };
  const auto S = RouterScoring::softmax, G = RouterScoring::sigmoid;
  const auto first = TopkOrder::score_then_topk, logits = TopkOrder::topk_then_score;
  const Case cases[] = {
      {"llama4", llama4(1), G, logits, false, false, true, 0, 1.0},
      {"dbrx", dbrx("1"), S, first, true, false, false, 0, 1.0},
      {"hunyuan", small("hunyuan_v1_moe", R"("moe_intermediate_size": 32, "num_experts": 4,
           "moe_topk": 2, "use_mixed_mlp_moe": 1, "num_shared_expert": 1)"),
       S, first, true, false, false, 0, 1.0},
      {"ernie", small("ernie4_5_moe", R"("moe_intermediate_size": 32, "moe_num_experts": 4,
           "moe_k": 2, "moe_num_shared_experts": 0)"),
       S, first, true, true, false, 0, 1.0},
      {"granitemoe", small("granitemoe", R"("num_local_experts": 4, "num_experts_per_tok": 2)"), S,
       logits, false, false, false, 0, 1.0},
      {"olmoe", small("olmoe", R"("num_experts": 4, "num_experts_per_tok": 2,
           "norm_topk_prob": false)"),
       S, first, false, false, false, 0, 1.0},
      {"dots1", small("dots1", R"("moe_intermediate_size": 32, "n_routed_experts": 4,
           "num_experts_per_tok": 2, "n_shared_experts": 1, "first_k_dense_replace": 0,
           "n_group": 2, "topk_group": 1, "norm_topk_prob": true, "routed_scaling_factor": 2.0)"),
       G, first, true, true, false, 2, 2.0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const RoutingRule r = routing_rule_from_config(c.json, c.name);
    EXPECT_EQ(r.scoring, c.scoring);
    EXPECT_EQ(r.order, c.order);
    EXPECT_EQ(r.renormalize, c.renormalize);
    EXPECT_EQ(r.correction_bias, c.bias);
    EXPECT_EQ(r.weight_on_input, c.on_input);
    EXPECT_EQ(r.n_group, c.n_group);
    EXPECT_DOUBLE_EQ(r.routed_scaling_factor, c.scaling);
    EXPECT_EQ(r.experts, 4);
  }
  // What vLLM would route otherwise: DBRX's p-norm other than 1, Llama-4 with top_k > 1.
  EXPECT_NE(error_of([] {
              routing_rule_from_config(dbrx("2"), "dbrx");
            }).find("'ffn_config.moe_normalize_expert_weights' = 2"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              routing_rule_from_config(llama4(2), "llama4");
            }).find("num_experts_per_tok = 2"),
            std::string::npos);
}

TEST(RoutingConfig, RefusesWhatItCannotRead) {
  const auto edited = [](std::string file, const std::string& key, const char* value) {
    nlohmann::json j = nlohmann::json::parse(config(file));
    if (value == nullptr) {
      j.erase(key);
    } else {
      j[key] = nlohmann::json::parse(value);
    }
    return j.dump();
  };
  const auto refusal = [](const std::string& text) {
    return error_of([&] { routing_rule_from_config(text, "cfg.json"); });
  };
  struct Case {
    std::string file, key;
    const char* value;
    std::string says;
  };
  const Case cases[] = {
      {"qwen3-30b-a3b.json", "norm_topk_prob", nullptr, "missing field 'norm_topk_prob'"},
      {"qwen3-30b-a3b.json", "norm_topk_prob", "\"yes\"", "'norm_topk_prob' = \"yes\""},
      {"deepseek-v3.json", "routed_scaling_factor", nullptr, "'routed_scaling_factor'"},
      {"deepseek-v3.json", "n_group", nullptr, "missing field 'n_group'"},
      {"deepseek-v3.json", "topk_group", "9", "'topk_group' = 9"},
      {"deepseek-v3.json", "scoring_func", "\"softmax\"", "'scoring_func' = 'softmax'"},
      {"deepseek-v3.json", "topk_method", "\"greedy\"", "'topk_method' = 'greedy'"},
      {"deepseek-v2-lite.json", "topk_method", nullptr, "missing field 'topk_method'"},
      {"deepseek-v2-lite.json", "n_group", "8", "'n_group' = 8"},
      {"deepseek-v2-lite.json", "scoring_func", "\"tanh\"", "'scoring_func' = 'tanh'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file + " " + c.key);
    const std::string message = refusal(edited(c.file, c.key, c.value));
    EXPECT_NE(message.find("cfg.json"), std::string::npos) << message;
    EXPECT_NE(message.find(c.says), std::string::npos) << message;
  }
  // A dense model has no router; OLMoE with norm_topk_prob true is routed differently by vLLM.
  EXPECT_NE(refusal(config("llama-3.1-8b.json")).find("no routed experts"), std::string::npos);
  const std::string olmoe = R"({"model_type": "olmoe", "hidden_size": 64,
      "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 32,
      "num_experts": 8, "num_experts_per_tok": 2, "num_hidden_layers": 2, "hidden_act": "silu",
      "norm_topk_prob": true})";
  EXPECT_NE(refusal(olmoe).find("'norm_topk_prob' = true"), std::string::npos);
}

TEST(RoutingConfig, MoePresets) {
  const auto v3 = find_model("deepseek-v3");
  EXPECT_EQ(v3.hidden, 7168);
  EXPECT_EQ(v3.experts, 256);
  EXPECT_EQ(v3.experts_per_token, 8);
  EXPECT_EQ(v3.attention, LayerKind::mla);
  const auto v3_rule = routing_rule_for_preset("deepseek-v3");
  EXPECT_TRUE(v3_rule.correction_bias);
  EXPECT_EQ(v3_rule.n_group, 8);
  EXPECT_EQ(v3_rule.topk_group, 4);

  const auto oss = find_model("gpt-oss-120b");
  EXPECT_EQ(oss.experts, 128);
  EXPECT_EQ(oss.experts_per_token, 4);
  EXPECT_EQ(oss.hidden, 2880);
  EXPECT_DOUBLE_EQ(oss.activation_limit, 7.0);
  EXPECT_EQ(routing_rule_for_preset("gpt-oss-120b").order, TopkOrder::topk_then_score);

  const auto mix = find_model("mixtral-8x7b");
  EXPECT_EQ(mix.experts, 8);
  EXPECT_EQ(mix.experts_per_token, 2);
  EXPECT_TRUE(routing_rule_for_preset("mixtral-8x7b").renormalize);

  EXPECT_TRUE(routing_rule_for_preset("qwen3-30b-a3b").renormalize);
  EXPECT_NE(error_of([] { routing_rule_for_preset("llama3-8b"); }), "");
  EXPECT_NE(error_of([] { routing_rule_for_preset("nope"); }).find("unknown model 'nope'"),
            std::string::npos);
}

// --- Sources ----------------------------------------------------------------------------------

TEST(RoutingSources, ParseRouting) {
  EXPECT_EQ(parse_routing("router").kind, RoutingKind::router);
  EXPECT_EQ(parse_routing("uniform").kind, RoutingKind::uniform);
  EXPECT_EQ(parse_routing("balanced").kind, RoutingKind::balanced);
  EXPECT_DOUBLE_EQ(parse_routing("zipf:1.2").zipf_s, 1.2);
  EXPECT_EQ(parse_routing("zipf:1.2").name(), "zipf:1.2");
  EXPECT_EQ(parse_routing("file:/tmp/r.json").path, "/tmp/r.json");
  for (const char* bad : {"random", "zipf:", "zipf:-1", "zipf:1.2x", "file:", ""}) {
    const std::string message = error_of([&] { parse_routing(bad); });
    const std::string quoted = std::string("--routing='").append(bad).append("'");
    EXPECT_NE(message.find(quoted), std::string::npos) << message;
    EXPECT_NE(message.find("valid: router, uniform, balanced, zipf:S"), std::string::npos)
        << message;
  }
}

TEST(RoutingSources, BalancedCountsAreExact) {
  const auto a = balanced_routing(256, 128, 8, 1);
  for (std::int64_t e = 0; e < 128; ++e) ASSERT_EQ(a.rows(e), 16) << e;
  // Token 3 with E=8, k=2 (stride 4): experts 3 and 7.
  const auto b = balanced_routing(16, 8, 2, 1);
  EXPECT_EQ(ids_of(b, 3), (std::vector<std::int32_t>{3, 7}));
  for (std::int64_t e = 0; e < 8; ++e) EXPECT_EQ(b.rows(e), 4);
  // E=6, k=4: stride 2 reaches 0 + 3*2 = 6 = 0 mod 6, the same expert twice.
  EXPECT_NE(error_of([] { balanced_routing(4, 6, 4, 1); }).find("experts=6"), std::string::npos);
}

TEST(RoutingSources, SeededAndDeterministic) {
  const auto u1 = uniform_routing(64, 32, 4, 7), u2 = uniform_routing(64, 32, 4, 7);
  EXPECT_EQ(u1.expert_ids, u2.expert_ids);
  EXPECT_EQ(u1.weights, u2.weights);
  EXPECT_NE(u1.expert_ids, uniform_routing(64, 32, 4, 8).expert_ids);
  const auto z1 = zipf_routing(64, 32, 4, 1.2, 7), z2 = zipf_routing(64, 32, 4, 1.2, 7);
  EXPECT_EQ(z1.expert_ids, z2.expert_ids);
  EXPECT_NE(z1.expert_ids, zipf_routing(64, 32, 4, 1.2, 8).expert_ids);
  EXPECT_EQ(z1.routing, "zipf:1.2");
  // The weights of a synthetic source are positive and sum to 1 per token.
  for (std::int64_t t = 0; t < 64; ++t) {
    double sum = 0;
    for (std::int64_t i = 0; i < 4; ++i) {
      EXPECT_GT(u1.weights[t * 4 + i], 0.0f);
      sum += u1.weights[t * 4 + i];
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
  // The router source: the same seed routes the same tokens.
  const RoutingRule r = routing_rule_for_preset("qwen3-30b-a3b");
  const auto a = make_routing(parse_routing("router"), r, 16, 64, 3);
  EXPECT_EQ(a.expert_ids, make_routing(parse_routing("router"), r, 16, 64, 3).expert_ids);
  EXPECT_EQ(a.seed, 3u);
  // One seed is one router: the first tokens route alike at every M of a sweep.
  const auto b = make_routing(parse_routing("router"), r, 4, 64, 3);
  EXPECT_TRUE(std::equal(b.expert_ids.begin(), b.expert_ids.end(), a.expert_ids.begin()));
  EXPECT_TRUE(std::equal(b.weights.begin(), b.weights.end(), a.weights.begin()));
}

TEST(RoutingSources, ZipfIsMoreSkewedThanUniform) {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const auto u = routing_stats(uniform_routing(256, 128, 8, seed));
    const auto z = routing_stats(zipf_routing(256, 128, 8, 1.2, seed));
    EXPECT_GT(z.max_over_mean, u.max_over_mean) << seed;
    EXPECT_LT(z.active_experts, u.active_experts + 1) << seed;
  }
}

TEST(RoutingSources, ExpertIdsFileCycles) {
  const auto a = file_routing(R"({"expert_ids": [[0, 1], [2, 3]]})", "r.json", 5, 4, 2, 1);
  EXPECT_EQ(ids_of(a, 4), (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(a.rows_per_expert(), (std::vector<std::int64_t>{3, 3, 2, 2}));
  // Expert 2's slots: token 1 slot 0 (2) and token 3 slot 0 (6), in slot order.
  EXPECT_EQ(a.expert_slots[a.expert_offset[2]], 2);
  EXPECT_EQ(a.expert_slots[a.expert_offset[2] + 1], 6);
  EXPECT_EQ(a.routing, "file:r.json");
}

TEST(RoutingSources, TokensPerExpertFile) {
  const auto a = file_routing(R"({"tokens_per_expert": [3, 1, 0, 4]})", "n.json", 4, 4, 2, 1);
  EXPECT_EQ(a.rows_per_expert(), (std::vector<std::int64_t>{3, 1, 0, 4}));
  const auto s = routing_stats(a);
  EXPECT_EQ(s.active_experts, 3);
  EXPECT_EQ(s.max_rows, 4);
  EXPECT_DOUBLE_EQ(s.mean_rows, 2.0);
  EXPECT_DOUBLE_EQ(s.mean_active_rows, 8.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.max_over_mean, 2.0);
}

TEST(RoutingSources, FileRefusalsNameTheValue) {
  const auto refusal = [](const char* json) {
    return error_of([&] { file_routing(json, "r.json", 4, 4, 2, 1); });
  };
  EXPECT_NE(refusal(R"({"expert_ids": [[0, 4]]})").find("expert id 4, outside 0..3"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"expert_ids": [[0, 1], [2]]})").find("expert_ids[1] = [2]"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"expert_ids": [[1, 1]]})").find("expert id 1 twice"), std::string::npos);
  EXPECT_NE(refusal(R"({"expert_ids": [[0, 1.5]]})").find("1.5 is not an integer"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"tokens_per_expert": [4, 4, 0, 1]})").find("sums to 9, not M*k"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"tokens_per_expert": [5, 3, 0, 0]})").find("tokens_per_expert[0] = 5"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"tokens_per_expert": [8]})").find("must list 4 counts"), std::string::npos);
  EXPECT_NE(refusal(R"({"other": 1})").find("exactly one of"), std::string::npos);
  EXPECT_NE(refusal("[1, 2").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of([] {
              make_routing(parse_routing("file:/nonexistent/r.json"), rule(4, 2), 4, 8, 1);
            }).find("/nonexistent/r.json"),
            std::string::npos);
}

TEST(RoutingSources, ReportJson) {
  const auto a = file_routing(R"({"tokens_per_expert": [3, 1, 0, 4]})", "n.json", 4, 4, 2, 9);
  const auto j = routing_json(a);
  EXPECT_EQ(j.at("routing"), "file:n.json");
  EXPECT_EQ(j.at("seed"), 9);
  EXPECT_EQ(j.at("active_experts"), 3);
  EXPECT_EQ(j.at("tokens_per_expert").at("max"), 4);
  EXPECT_DOUBLE_EQ(j.at("tokens_per_expert").at("max_over_mean").get<double>(), 2.0);
  EXPECT_EQ(j.at("histogram"), (nlohmann::json{3, 1, 0, 4}));
}

// --- Statistics and padding -------------------------------------------------------------------

TEST(RoutingPadding, BlockSizeByTokens) {
  const std::pair<std::int64_t, std::int64_t> cases[] = {
      {1, 16},   {128, 16}, {192, 16}, {193, 32},  {256, 32},   {384, 32},
      {385, 64}, {512, 64}, {768, 64}, {769, 128}, {1024, 128}, {100000, 128}};
  for (const auto& [m, block] : cases) EXPECT_EQ(vllm_block_size_m(m), block) << "M=" << m;
}

TEST(RoutingPadding, AlignAndPadToLargest) {
  const std::vector<std::int64_t> rows = {5, 0, 17, 16};
  const auto aligned = align_block_rows(rows, 16);
  EXPECT_EQ(aligned.rows, 16 + 0 + 32 + 16);
  EXPECT_EQ(aligned.useful_rows, 38);
  EXPECT_EQ(aligned.wasted_rows(), 26);
  EXPECT_EQ(aligned.bound, 38 + 4 * 15);
  const auto largest = pad_to_largest_rows(rows);
  EXPECT_EQ(largest.block, 17);
  EXPECT_EQ(largest.rows, 68);
  EXPECT_EQ(largest.wasted_rows(), 30);
  // Qwen3-30B-A3B's expert: w13 [2*768, 2048] and w2 [2048, 768], 2 FLOPs a multiply-add.
  EXPECT_DOUBLE_EQ(rows_flops(26, {{1536, 2048}, {2048, 768}}), 245366784.0);
  // The block bound holds on a real routing.
  const auto z = zipf_routing(256, 128, 8, 1.2, 1);
  const auto p = align_block_rows(z.rows_per_expert(), vllm_block_size_m(256));
  EXPECT_LE(p.rows, p.bound);
  EXPECT_GE(p.rows, 256 * 8);
}

TEST(RoutingPadding, ExpectedActiveExpertsMatchesSimulation) {
  EXPECT_NEAR(expected_active_experts(1, 128, 8), 8.0, 1e-9);
  double mean = 0;
  const int runs = 200;
  for (int seed = 0; seed < runs; ++seed)
    mean += static_cast<double>(routing_stats(uniform_routing(16, 128, 8, seed)).active_experts);
  mean /= runs;
  // 128 * (1 - (1 - 8/128)^16) = 82.42; the mean of 200 runs has a standard error near 0.2.
  EXPECT_NEAR(mean, expected_active_experts(16, 128, 8), 1.0);
}

}  // namespace

// Issue 37: zipf with a large finite exponent. p = rank^-S underflowed to 0 for all but fewer
// than k experts and the draw walked below index 0 (free(): invalid pointer); drawn in log space,
// every token gets k distinct experts, and at a huge S the k most popular ones.
TEST(RoutingSources, ZipfWithAHugeExponentDrawsKDistinctExperts) {
  for (const double s : {400.0, 1100.0, 1e10, 1e308}) {
    const auto z = zipf_routing(64, 128, 8, s, 3);  // qwen3-30b-a3b's experts and top-k
    ASSERT_EQ(z.expert_ids.size(), 64u * 8u);
    std::vector<std::int32_t> first(z.expert_ids.begin(), z.expert_ids.begin() + 8);
    std::sort(first.begin(), first.end());
    for (std::int64_t t = 0; t < 64; ++t) {
      std::vector<std::int32_t> ids(z.expert_ids.begin() + t * 8, z.expert_ids.begin() + t * 8 + 8);
      std::sort(ids.begin(), ids.end());
      EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end()) << "S=" << s;
      for (auto e : ids) EXPECT_TRUE(e >= 0 && e < 128) << e;
      if (s >= 1100) {
        EXPECT_EQ(ids, first) << "S=" << s << ": the k most popular, every token";
      }
    }
  }
  // An ordinary exponent still spreads the tokens over many experts, the hot ones hotter.
  EXPECT_GT(routing_stats(zipf_routing(256, 128, 8, 1.2, 1)).active_experts, 16);
}

// Issue 37: a routing file's keys and counts, read as the file wrote them.
TEST(RoutingSources, FileKeysAndCountsAreReadStrictly) {
  const auto refused = [](const std::string& text, std::int64_t tokens = 4) {
    return error_of([&] { (void)file_routing(text, "r.json", tokens, 4, 2, 1); });
  };
  EXPECT_NE(refused(R"({"expert_ids": [[0, 1]], "expert_ids": [[2, 3]]})")
                .find("routing file r.json: key \"expert_ids\" appears twice"),
            std::string::npos);
  EXPECT_NE(
      refused(R"({"tokens_per_expert": [2, 2, 2, 2], "seed": 1})").find("unknown key \"seed\""),
      std::string::npos);
  const std::string huge = refused(R"({"tokens_per_expert": [18446744073709551615, 0, 0, 0]})");
  EXPECT_NE(huge.find("tokens_per_expert[0] = 18446744073709551615 is not in 0..M=4"),
            std::string::npos)
      << huge;
  EXPECT_NE(refused(R"({"expert_ids": [[18446744073709551615, 1]]})")
                .find("expert_ids[0][0] = 18446744073709551615 is out of range"),
            std::string::npos);
  // Valid at its own M, at any M it fits.
  EXPECT_NO_THROW(
      (void)file_routing(R"({"tokens_per_expert": [16, 8, 8, 0]})", "r.json", 16, 4, 2, 1));
}
