// The routing rule of an MoE family as data: read from config.json as vLLM's model class builds
// its router (docs/moe.md has the table), and applied to router logits.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <stdexcept>

#include "fusebench/routing.hpp"
#include "fusebench/shapes.hpp"

namespace fusebench {

std::string_view to_string(RouterScoring scoring) {
  return scoring == RouterScoring::softmax ? "softmax" : "sigmoid";
}

std::string_view to_string(TopkOrder order) {
  return order == TopkOrder::score_then_topk ? "score_then_topk" : "topk_then_score";
}

bool RoutingRule::grouped() const {
  return n_group > 0 && experts > n_group && experts % n_group == 0;
}

nlohmann::json RoutingRule::to_json() const {
  return {{"family", family},
          {"experts", experts},
          {"top_k", top_k},
          {"scoring", to_string(scoring)},
          {"order", to_string(order)},
          {"renormalize", renormalize},
          {"correction_bias", correction_bias},
          {"n_group", n_group},
          {"topk_group", topk_group},
          {"routed_scaling_factor", routed_scaling_factor},
          {"weight_on_input", weight_on_input},
          {"shared_expert_gate", shared_expert_gate},
          {"fields", fields}};
}

void validate(const RoutingRule& r) {
  const auto bad = [](const std::string& what) {
    throw std::invalid_argument("routing rule: " + what);
  };
  if (r.experts <= 0) bad("experts=" + std::to_string(r.experts) + " must be positive");
  if (r.top_k <= 0 || r.top_k > r.experts)
    bad("top_k=" + std::to_string(r.top_k) + " must be in 1.." + std::to_string(r.experts));
  if (!(r.routed_scaling_factor > 0) || !std::isfinite(r.routed_scaling_factor))
    bad("routed_scaling_factor=" + std::to_string(r.routed_scaling_factor) + " must be positive");
  if (r.order == TopkOrder::topk_then_score &&
      (r.correction_bias || r.n_group > 0 || r.renormalize))
    bad("top-k of the logits takes no correction bias, groups or renormalization");
  if (r.n_group < 0 || r.topk_group < 0) bad("n_group and topk_group must not be negative");
  if (r.grouped()) {
    if (r.topk_group < 1 || r.topk_group > r.n_group)
      bad("topk_group=" + std::to_string(r.topk_group) +
          " must be in 1..n_group=" + std::to_string(r.n_group));
    const std::int64_t reachable = r.topk_group * (r.experts / r.n_group);
    if (r.top_k > reachable)
      bad("top_k=" + std::to_string(r.top_k) + " exceeds the " + std::to_string(reachable) +
          " experts of topk_group=" + std::to_string(r.topk_group) + " groups");
  }
}

namespace {

// How a family's top-k weights are renormalized.
enum class Renorm {
  always,          // FusedMoE(renormalize=True)
  never,           // top-k of the logits (the scoring normalizes), or Llama-4's sigmoid
  norm_topk_prob,  // renormalize=config.norm_topk_prob (required)
  olmoe,           // vLLM hard-codes False; transformers reads norm_topk_prob: true is refused
  top_k_gt_1,      // HunYuan: renormalize=top_k > 1
  dbrx,            // vLLM: True; transformers: ffn_config.moe_normalize_expert_weights (p-norm)
};
// Which DeepSeek-style fields are read.
enum class Groups {
  none,
  deepseek_v2,   // topk_method, optional scoring_func, n_group/topk_group, norm_topk_prob, scaling
  sigmoid_bias,  // DeepSeek-V3-like: sigmoid + bias fixed by the class; groups, norm, scaling read
};

// One MoE model_type's router as vLLM's model class builds it (vLLM 0.34 model files; dots1 and
// hunyuan from 0.23, see docs/models.md). Adding a family is one row.
struct FamilyRouting {
  std::string_view model_type;
  const char* vllm = "";  // the rule in words, with its source
  RouterScoring scoring = RouterScoring::softmax;
  TopkOrder order = TopkOrder::score_then_topk;
  Renorm renorm = Renorm::always;
  bool bias = false;
  Groups groups = Groups::none;
  bool weight_on_input = false;
  bool shared_expert_gate = false;  // sigmoid(x . shared_expert_gate) scales the shared expert
  const char* not_mapped = "";      // "field: why" when the router is not one the suite maps
};

// clang-format off
const FamilyRouting kRouting[] = {
    {.model_type = "mixtral", .vllm = "MixtralForCausalLM: softmax, top-k, renormalized"},
    {.model_type = "phimoe", .vllm = "PhiMoEForCausalLM: sparsemixer",
     .not_mapped = "router_jitter_noise: vLLM's PhiMoEForCausalLM routes by sparsemixer "
                   "(phimoe_routing_function, masked by router_jitter_noise), which the suite "
                   "does not map"},
    {.model_type = "olmoe", .vllm = "OlmoeForCausalLM: softmax, top-k, not renormalized "
                                    "(FusedMoE renormalize=False)", .renorm = Renorm::olmoe},
    {.model_type = "granitemoe", .vllm = "GraniteMoeForCausalLM: softmax over the top-k logits",
     .order = TopkOrder::topk_then_score, .renorm = Renorm::never},
    {.model_type = "granitemoeshared",
     .vllm = "GraniteMoeSharedForCausalLM: softmax over the top-k logits",
     .order = TopkOrder::topk_then_score, .renorm = Renorm::never},
    {.model_type = "qwen2_moe", .vllm = "Qwen2MoeForCausalLM: softmax, top-k, norm_topk_prob; "
                                        "shared expert scaled by sigmoid(shared_expert_gate)",
     .renorm = Renorm::norm_topk_prob, .shared_expert_gate = true},
    {.model_type = "qwen3_moe", .vllm = "Qwen3MoeForCausalLM: softmax, top-k, norm_topk_prob",
     .renorm = Renorm::norm_topk_prob},
    {.model_type = "glm4_moe", .vllm = "Glm4MoeForCausalLM: sigmoid + e_score_correction_bias, "
                                       "grouped top-k, norm_topk_prob, routed_scaling_factor",
     .scoring = RouterScoring::sigmoid, .renorm = Renorm::norm_topk_prob, .bias = true,
     .groups = Groups::sigmoid_bias},
    {.model_type = "dots1", .vllm = "Dots1ForCausalLM: sigmoid + e_score_correction_bias, "
                                    "grouped top-k, norm_topk_prob, routed_scaling_factor",
     .scoring = RouterScoring::sigmoid, .renorm = Renorm::norm_topk_prob, .bias = true,
     .groups = Groups::sigmoid_bias},
    {.model_type = "deepseek_v2", .vllm = "DeepseekV2ForCausalLM: scoring_func, grouped top-k "
                                          "(topk_method), norm_topk_prob, routed_scaling_factor",
     .renorm = Renorm::norm_topk_prob, .groups = Groups::deepseek_v2},
    {.model_type = "deepseek_v3", .vllm = "DeepseekV3ForCausalLM: sigmoid + "
                                          "e_score_correction_bias (noaux_tc), grouped top-k, "
                                          "norm_topk_prob, routed_scaling_factor",
     .scoring = RouterScoring::sigmoid, .renorm = Renorm::norm_topk_prob, .bias = true,
     .groups = Groups::sigmoid_bias},
    {.model_type = "ernie4_5_moe", .vllm = "Ernie4_5_MoeForCausalLM: softmax, "
                                           "e_score_correction_bias (moe_statics), renormalized",
     .bias = true},
    {.model_type = "hunyuan_v1_moe", .vllm = "HunYuanMoEV1ForCausalLM: softmax, top-k, "
                                             "renormalized when top_k > 1",
     .renorm = Renorm::top_k_gt_1},
    {.model_type = "llama4_text", .vllm = "Llama4ForCausalLM: sigmoid of the top-k logits, "
                                          "weight applied to the expert's input",
     .scoring = RouterScoring::sigmoid, .order = TopkOrder::topk_then_score,
     .renorm = Renorm::never, .weight_on_input = true},
    {.model_type = "llama4", .vllm = "Llama4ForConditionalGeneration: sigmoid of the top-k "
                                     "logits, weight applied to the expert's input",
     .scoring = RouterScoring::sigmoid, .order = TopkOrder::topk_then_score,
     .renorm = Renorm::never, .weight_on_input = true},
    {.model_type = "dbrx", .vllm = "DbrxForCausalLM: softmax, top-k, renormalized",
     .renorm = Renorm::dbrx},
    {.model_type = "gpt_oss", .vllm = "GptOssForCausalLM: softmax over the top-k logits",
     .order = TopkOrder::topk_then_score, .renorm = Renorm::never},
};
// clang-format on

// Typed reads of one config object; every error names the file and the field.
class Fields {
 public:
  Fields(const nlohmann::json& cfg, std::string where) : cfg_(cfg), where_(std::move(where)) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument(where_ + ": " + what);
  }
  bool has(const std::string& key) const { return cfg_.contains(key) && !cfg_.at(key).is_null(); }
  bool flag(const std::string& key, const std::string& why) const {
    if (!has(key)) fail("missing field '" + key + "' (" + why + ")");
    if (!cfg_.at(key).is_boolean())
      fail("field '" + key + "' = " + cfg_.at(key).dump() + " is not a boolean");
    return cfg_.at(key).get<bool>();
  }
  std::int64_t positive(const std::string& key, const std::string& why) const {
    if (!has(key)) fail("missing field '" + key + "' (" + why + ")");
    const auto& v = cfg_.at(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 1)
      fail("field '" + key + "' = " + v.dump() + " is not a positive integer");
    return v.get<std::int64_t>();
  }
  double number(const std::string& key, const std::string& why) const {
    if (!has(key)) fail("missing field '" + key + "' (" + why + ")");
    const auto& v = cfg_.at(key);
    if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
      fail("field '" + key + "' = " + v.dump() + " is not a positive number");
    return v.get<double>();
  }
  std::optional<std::string> text(const std::string& key) const {
    if (!has(key)) return std::nullopt;
    if (!cfg_.at(key).is_string())
      fail("field '" + key + "' = " + cfg_.at(key).dump() + " is not a string");
    return cfg_.at(key).get<std::string>();
  }
  const nlohmann::json& json() const { return cfg_; }

 private:
  const nlohmann::json& cfg_;
  std::string where_;
};

// n_group, topk_group (and whether they split the experts) as vLLM's grouped_topk takes them.
void read_groups(const Fields& c, RoutingRule& r) {
  r.n_group = c.positive("n_group", "vLLM's grouped top-k reads it");
  r.topk_group = c.positive("topk_group", "vLLM's grouped top-k reads it");
  if (r.topk_group > r.n_group)
    c.fail("field 'topk_group' = " + std::to_string(r.topk_group) +
           " exceeds n_group = " + std::to_string(r.n_group));
  if (r.grouped() && r.top_k > r.topk_group * (r.experts / r.n_group))
    c.fail("num_experts_per_tok = " + std::to_string(r.top_k) + " exceeds the experts of " +
           "topk_group = " + std::to_string(r.topk_group) + " groups");
}

void read_deepseek(const Fields& c, const FamilyRouting& f, RoutingRule& r) {
  if (f.groups == Groups::sigmoid_bias) {
    // The class hard-codes sigmoid + bias (transformers' config does not write these fields);
    // a config that says otherwise routes differently in vLLM's DeepseekV2MoE.
    if (auto s = c.text("scoring_func"); s && *s != "sigmoid")
      c.fail("field 'scoring_func' = '" + *s + "': " + std::string(f.model_type) +
             " routes by sigmoid scores (transformers' class), vLLM would use '" + *s + "'");
    if (auto m = c.text("topk_method"); m && *m != "noaux_tc")
      c.fail("field 'topk_method' = '" + *m + "': " + std::string(f.model_type) +
             " routes with e_score_correction_bias (noaux_tc)");
    read_groups(c, r);
  } else {
    const auto method = c.text("topk_method");
    if (!method) c.fail("missing field 'topk_method' (greedy, group_limited_greedy or noaux_tc)");
    if (*method != "greedy" && *method != "group_limited_greedy" && *method != "noaux_tc")
      c.fail("field 'topk_method' = '" + *method +
             "' is not one of greedy, group_limited_greedy, noaux_tc");
    const auto scoring = c.text("scoring_func").value_or("softmax");
    if (scoring != "softmax" && scoring != "sigmoid")
      c.fail("field 'scoring_func' = '" + scoring + "' is not softmax or sigmoid");
    r.scoring = scoring == "softmax" ? RouterScoring::softmax : RouterScoring::sigmoid;
    r.correction_bias = *method == "noaux_tc";
    if (*method == "greedy") {
      // transformers' greedy ignores groups; vLLM's grouped_topk would apply n_group > 1.
      if (c.has("n_group") && c.positive("n_group", "") > 1)
        c.fail("field 'n_group' = " + c.json().at("n_group").dump() +
               " with topk_method 'greedy': transformers routes ungrouped, vLLM grouped");
    } else {
      read_groups(c, r);
    }
  }
  r.routed_scaling_factor =
      c.number("routed_scaling_factor", "vLLM scales the routed experts' output by it");
}

}  // namespace

RoutingRule routing_rule_from_config(std::string_view json_text, const std::string& name) {
  const ModelShape m = parse_hf_config(json_text, name);  // refuses what it cannot map
  const nlohmann::json root = nlohmann::json::parse(json_text);
  const bool nested = !root.contains("hidden_size") && root.contains("text_config") &&
                      root["text_config"].is_object();
  const Fields c(nested ? root["text_config"] : root, nested ? name + " (text_config)" : name);

  const FamilyRouting* f = nullptr;
  for (const auto& row : kRouting) {
    if (row.model_type == m.family) f = &row;
  }
  if (f == nullptr || m.experts == 0) {
    c.fail("model_type '" + m.family + "' has no routed experts" +
           (f == nullptr ? std::string(" (MoE families: see docs/moe.md)")
                         : " in this config (every layer dense)"));
  }
  if (*f->not_mapped != '\0') {
    const std::string_view why(f->not_mapped);
    const auto colon = why.find(':');
    c.fail("field '" + std::string(why.substr(0, colon)) + "'" + std::string(why.substr(colon)));
  }
  RoutingRule r;
  r.family = m.family;
  r.experts = m.experts;
  r.top_k = m.experts_per_token;
  r.scoring = f->scoring;
  r.order = f->order;
  r.correction_bias = f->bias;
  r.weight_on_input = f->weight_on_input;
  r.shared_expert_gate = f->shared_expert_gate;
  r.fields = f->vllm;
  const std::string vllm_class = m.vllm_class;
  switch (f->renorm) {
    case Renorm::always:
      r.renormalize = true;
      break;
    case Renorm::never:
      break;
    case Renorm::norm_topk_prob:
      r.renormalize =
          c.flag("norm_topk_prob", vllm_class + " renormalizes the top-k weights by it");
      break;
    case Renorm::olmoe:
      if (c.has("norm_topk_prob") && c.flag("norm_topk_prob", ""))
        c.fail(
            "field 'norm_topk_prob' = true: transformers' OLMoE renormalizes the top-k "
            "weights, vLLM's OlmoeForCausalLM does not (renormalize=False)");
      break;
    case Renorm::top_k_gt_1:
      r.renormalize = r.top_k > 1;
      break;
    case Renorm::dbrx: {
      r.renormalize = true;
      const auto& ffn = c.json().contains("ffn_config") ? c.json().at("ffn_config") : c.json();
      const char* key = "moe_normalize_expert_weights";
      if (ffn.contains(key) && (!ffn.at(key).is_number() || ffn.at(key).get<double>() != 1.0))
        c.fail("field 'ffn_config." + std::string(key) + "' = " + ffn.at(key).dump() +
               ": vLLM's DbrxForCausalLM renormalizes by the sum (p = 1) whatever it says");
      break;
    }
  }
  if (f->groups != Groups::none) read_deepseek(c, *f, r);
  if (r.weight_on_input && r.top_k != 1)  // FusedMoE asserts it: the weights would not commute
    c.fail("num_experts_per_tok = " + std::to_string(r.top_k) + ": vLLM's " + m.vllm_class +
           " applies the router weight to the expert's input, which it supports at top_k 1 only");
  try {
    validate(r);
  } catch (const std::invalid_argument& e) {
    c.fail(e.what());
  }
  return r;
}

RoutingRule routing_rule_for_preset(std::string_view preset) {
  return routing_rule_from_config(preset_config(preset), std::string(preset));
}

namespace {

// Indices of the k largest values among `allowed` (all when empty), ties to the lower index.
std::vector<std::int32_t> top_indices(const std::vector<double>& v, std::int64_t k,
                                      const std::vector<char>& allowed) {
  std::vector<std::int32_t> idx;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (allowed.empty() || allowed[i]) idx.push_back(static_cast<std::int32_t>(i));
  }
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](std::int32_t a, std::int32_t b) {
    return v[a] > v[b] || (v[a] == v[b] && a < b);
  });
  idx.resize(static_cast<std::size_t>(k));
  return idx;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

void softmax(std::vector<double>& v) {
  const double mx = *std::max_element(v.begin(), v.end());
  double sum = 0;
  for (double& x : v) sum += (x = std::exp(x - mx));
  for (double& x : v) x /= sum;
}

// One token's ids and weights under the rule (in double; the weights stored as float, as vLLM
// keeps topk_weights in fp32).
void route_token(const RoutingRule& r, const float* logits, const std::vector<float>& bias,
                 std::int32_t* ids, float* weights) {
  const std::int64_t E = r.experts, k = r.top_k;
  std::vector<double> w(static_cast<std::size_t>(k));
  std::vector<double> l(logits, logits + E);
  std::vector<std::int32_t> chosen;
  if (r.order == TopkOrder::topk_then_score) {
    chosen = top_indices(l, k, {});
    for (std::int64_t i = 0; i < k; ++i) w[i] = l[chosen[i]];
    if (r.scoring == RouterScoring::softmax) {
      softmax(w);
    } else {
      for (double& x : w) x = sigmoid(x);
    }
  } else {
    std::vector<double> s = l;
    if (r.scoring == RouterScoring::softmax) {
      softmax(s);
    } else {
      for (double& x : s) x = sigmoid(x);
    }
    std::vector<double> choice = s;
    if (r.correction_bias) {
      for (std::int64_t e = 0; e < E; ++e) choice[e] += bias[e];
    }
    std::vector<char> allowed;
    if (r.grouped()) {
      const std::int64_t size = E / r.n_group;
      std::vector<double> group(static_cast<std::size_t>(r.n_group));
      for (std::int64_t g = 0; g < r.n_group; ++g) {
        std::vector<double> in(choice.begin() + g * size, choice.begin() + (g + 1) * size);
        std::sort(in.begin(), in.end(), std::greater<>());
        // vLLM's grouped_topk: the top-2 sum with a correction bias, else the max.
        group[g] = r.correction_bias ? in[0] + (size > 1 ? in[1] : 0.0) : in[0];
      }
      allowed.assign(static_cast<std::size_t>(E), 0);
      for (std::int32_t g : top_indices(group, r.topk_group, {}))
        std::fill(allowed.begin() + g * size, allowed.begin() + (g + 1) * size, 1);
    }
    chosen = top_indices(choice, k, allowed);
    for (std::int64_t i = 0; i < k; ++i) w[i] = s[chosen[i]];  // unbiased scores
    if (r.renormalize) {
      const double sum = std::accumulate(w.begin(), w.end(), 0.0);
      for (double& x : w) x /= sum;
    }
  }
  for (std::int64_t i = 0; i < k; ++i) {
    ids[i] = chosen[i];
    weights[i] = static_cast<float>(w[i] * r.routed_scaling_factor);
  }
}

}  // namespace

RoutingAssignment route_logits(const RoutingRule& rule, std::int64_t tokens,
                               const std::vector<float>& logits, const std::vector<float>& bias) {
  validate(rule);
  if (tokens < 0 || static_cast<std::int64_t>(logits.size()) != tokens * rule.experts)
    throw std::invalid_argument("route_logits: " + std::to_string(logits.size()) + " logits for " +
                                std::to_string(tokens) + " tokens x " +
                                std::to_string(rule.experts) + " experts");
  const std::size_t want_bias = rule.correction_bias ? static_cast<std::size_t>(rule.experts) : 0;
  if (bias.size() != want_bias)
    throw std::invalid_argument("route_logits: " + std::to_string(bias.size()) +
                                " e_score_correction_bias values for a rule that takes " +
                                std::to_string(want_bias));
  RoutingAssignment a;
  a.routing = "router";
  a.tokens = tokens;
  a.experts = rule.experts;
  a.top_k = rule.top_k;
  a.expert_ids.resize(static_cast<std::size_t>(tokens * rule.top_k));
  a.weights.resize(a.expert_ids.size());
  for (std::int64_t t = 0; t < tokens; ++t) {
    route_token(rule, logits.data() + t * rule.experts, bias, a.expert_ids.data() + t * rule.top_k,
                a.weights.data() + t * rule.top_k);
  }
  index_by_expert(a);
  return a;
}

RoutingAssignment route_hidden(const RoutingRule& rule, std::int64_t tokens, std::int64_t hidden,
                               const std::vector<float>& hidden_states,
                               const std::vector<float>& router_w, const std::vector<float>& bias) {
  if (hidden <= 0 || static_cast<std::int64_t>(hidden_states.size()) != tokens * hidden ||
      static_cast<std::int64_t>(router_w.size()) != rule.experts * hidden)
    throw std::invalid_argument("route_hidden: hidden_states must be [" + std::to_string(tokens) +
                                ", " + std::to_string(hidden) + "] and router_w [" +
                                std::to_string(rule.experts) + ", " + std::to_string(hidden) + "]");
  std::vector<float> logits(static_cast<std::size_t>(tokens * rule.experts));
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t e = 0; e < rule.experts; ++e) {
      double acc = 0;
      for (std::int64_t h = 0; h < hidden; ++h)
        acc += double{hidden_states[t * hidden + h]} * double{router_w[e * hidden + h]};
      logits[t * rule.experts + e] = static_cast<float>(acc);
    }
  }
  return route_logits(rule, tokens, logits, bias);
}

}  // namespace fusebench
