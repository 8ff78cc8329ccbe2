#pragma once
// MoE routing as data (issue 30, the foundation of the `moe` op): the rule a model's router
// applies (read from its config.json as vLLM's model class builds its FusedMoE), the sources of a
// routing (--routing=router|uniform|balanced|zipf:S|file:PATH), each producing one assignment that
// every variant of a comparison consumes, its statistics, and the padding arithmetic of vLLM's
// moe_align_block_size. Pure host code; docs/moe.md describes it.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace fusebench {

// --- The rule ---------------------------------------------------------------------------------

enum class RouterScoring { softmax, sigmoid };
// Where top-k is taken: on the scores of all experts (Qwen-MoE, Mixtral, DeepSeek), or on the
// logits, the scoring then applied to the k chosen logits only (gpt-oss and GraniteMoE: softmax
// over the top-k; Llama-4: sigmoid of the top-k).
enum class TopkOrder { score_then_topk, topk_then_score };
std::string_view to_string(RouterScoring scoring);
std::string_view to_string(TopkOrder order);

struct RoutingRule {
  std::string family;  // model_type it was read for ("" for a rule built by hand)
  std::int64_t experts = 0, top_k = 0;
  RouterScoring scoring = RouterScoring::softmax;
  TopkOrder order = TopkOrder::score_then_topk;
  bool renormalize = false;  // divide the k weights by their sum (norm_topk_prob)
  // e_score_correction_bias added to the scores for the choice only; the weights come from the
  // unbiased scores (vLLM's grouped_topk and fused_topk_bias, DeepSeek-V3's noaux_tc).
  bool correction_bias = false;
  // Group-limited top-k (n_group, topk_group): the experts split into n_group equal groups, a
  // group scored by its max score (or, with a correction bias, the sum of its top two biased
  // scores), top-k taken inside the best topk_group groups. 0: no groups. As vLLM does, a grouping
  // that does not split the experts (E <= n_group or E % n_group != 0) routes ungrouped.
  std::int64_t n_group = 0, topk_group = 0;
  double routed_scaling_factor = 1.0;  // multiplies the final weights
  // Llama-4: the weight scales the expert's input, not its output (apply_router_weight_on_input).
  bool weight_on_input = false;
  // qwen2_moe: the shared expert's output is scaled by sigmoid(x . shared_expert_gate), a
  // Linear(hidden, 1) of the block (vLLM's Qwen2MoeSparseMoeBlock). Read with the rule because it
  // is the family's block, as vLLM's model class builds it; it matters only with a shared expert.
  bool shared_expert_gate = false;
  std::string fields;  // the config fields (or the family's fixed rule) it was read from

  bool grouped() const;  // n_group splits the experts (vLLM's valid_grouping)
  nlohmann::json to_json() const;
};

// Throws std::invalid_argument naming the inconsistent value (k > E, groups that cannot hold k
// experts, a bias or groups with topk_then_score, a non-positive scaling factor, ...).
void validate(const RoutingRule& rule);

// The routing rule of a HF config.json, for every MoE model_type of the family table (see
// docs/moe.md): experts and top_k as parse_hf_config reads them, the rule's fields as vLLM's model
// class uses them. A field the rule needs that is missing or malformed, a value vLLM and
// transformers would route differently by, a family whose router the suite does not map (phimoe's
// sparsemixer) or a model without routed experts: std::invalid_argument naming the file and field.
RoutingRule routing_rule_from_config(std::string_view json_text, const std::string& name);
// The rule of a model preset (its config excerpt in src/core/shapes.cpp).
RoutingRule routing_rule_for_preset(std::string_view preset);

// --- One routing ------------------------------------------------------------------------------

// Per token: k expert ids and k weights (slot s = token * top_k + i); per expert: the slots routed
// to it, grouped by expert in expert order and by slot inside an expert (the permutation
// moe_align_block_size sorts into, without the padding).
struct RoutingAssignment {
  std::string routing;  // router | uniform | balanced | zipf:S | file:PATH
  std::uint64_t seed = 0;
  std::int64_t tokens = 0, experts = 0, top_k = 0;
  std::vector<std::int32_t> expert_ids;     // [tokens * top_k]
  std::vector<float> weights;               // [tokens * top_k]
  std::vector<std::int64_t> expert_offset;  // [experts + 1] into expert_slots
  std::vector<std::int64_t> expert_slots;   // [tokens * top_k]; slot / top_k is the token
  // Source router: whose router weights routed the tokens ("" random: random_router_inputs').
  std::string router;

  std::int64_t rows(std::int64_t expert) const {
    return expert_offset[expert + 1] - expert_offset[expert];
  }
  std::vector<std::int64_t> rows_per_expert() const;
};

// Builds expert_offset/expert_slots from expert_ids after checking every token's ids (in range,
// k distinct): std::invalid_argument naming the token and the id.
void index_by_expert(RoutingAssignment& a);

// The rule on router logits [M, E] (row-major), with the e_score_correction_bias (E values; empty
// when the rule has none). Ties go to the lower expert id (torch.topk leaves them unspecified).
RoutingAssignment route_logits(const RoutingRule& rule, std::int64_t tokens,
                               const std::vector<float>& logits, const std::vector<float>& bias);
// logits = hidden[M, H] x router_w[E, H]^T (accumulated in double), then route_logits.
RoutingAssignment route_hidden(const RoutingRule& rule, std::int64_t tokens, std::int64_t hidden,
                               const std::vector<float>& hidden_states,
                               const std::vector<float>& router_w, const std::vector<float>& bias);

// Seeded router inputs (router_w and bias drawn first: one seed is one router at every M, and
// token t the same token): hidden ~ N(0, 1), router_w ~ N(0, 1/H) (logits ~ N(0, 1), the
// near-uniform routing of vLLM's benchmark_moe.py randn logits), bias ~ N(0, 0.1^2) when the rule
// has one.
struct RouterInputs {
  std::vector<float> hidden_states, router_w, bias;
};
RouterInputs random_router_inputs(const RoutingRule& rule, std::int64_t tokens, std::int64_t hidden,
                                  std::uint64_t seed);

// --- Sources (--routing=) ---------------------------------------------------------------------

enum class RoutingKind { router, uniform, balanced, zipf, file };
struct RoutingSource {
  RoutingKind kind = RoutingKind::router;
  double zipf_s = 0;         // zipf: the exponent S
  std::string path;          // file: the JSON file
  std::string name() const;  // the --routing= spelling
};
// Parses a --routing= value; throws std::invalid_argument naming it and listing the valid forms.
RoutingSource parse_routing(std::string_view value);

// Synthetic sources. Their weights are seeded random positive values summing to 1 per token, so
// that a variant that applies the wrong slot's weight fails verification.
// uniform: k distinct experts uniformly at random per token.
RoutingAssignment uniform_routing(std::int64_t tokens, std::int64_t experts, std::int64_t top_k,
                                  std::uint64_t seed);
// balanced (TensorRT-LLM's rule): token t takes experts (t + i * ceil(E / k)) mod E, i < k; every
// expert gets M*k/E rows when E divides M. Refused when the stride repeats an expert in a token.
RoutingAssignment balanced_routing(std::int64_t tokens, std::int64_t experts, std::int64_t top_k,
                                   std::uint64_t seed);
// zipf:S: expert popularity p ∝ 1 / rank^S (ranks a seeded permutation of the experts), k distinct
// experts per token drawn by popularity without replacement.
RoutingAssignment zipf_routing(std::int64_t tokens, std::int64_t experts, std::int64_t top_k,
                               double s, std::uint64_t seed);
// file: {"expert_ids": [[e, ..], ..]} (k ids per token, cycled over M tokens) or
// {"tokens_per_expert": [n_0, ..]} (E counts, summing to M*k, each <= M). Refusals name the value.
RoutingAssignment file_routing(std::string_view json_text, const std::string& name,
                               std::int64_t tokens, std::int64_t experts, std::int64_t top_k,
                               std::uint64_t seed);
// Any source: router applies `rule` to random_router_inputs(rule, tokens, hidden, seed).
RoutingAssignment make_routing(const RoutingSource& source, const RoutingRule& rule,
                               std::int64_t tokens, std::int64_t hidden, std::uint64_t seed);

// A model's own router (a checkpoint's, --weights): router_w [E, H] and the
// e_score_correction_bias [E] (empty when the rule has none), `name` saying where they come from.
struct RouterWeights {
  std::vector<float> router_w, bias;
  std::string name;
};
// The source `router` with `router`'s weights on random_router_inputs' hidden states (the same
// seeded tokens as a random router's); any other source as make_routing. Throws
// std::invalid_argument when the weights are not [E, H] (and [E] for a rule with a bias).
RoutingAssignment make_routing(const RoutingSource& source, const RoutingRule& rule,
                               std::int64_t tokens, std::int64_t hidden, std::uint64_t seed,
                               const RouterWeights& router);

// --- Statistics and padding -------------------------------------------------------------------

struct RoutingStats {
  std::int64_t active_experts = 0;
  std::int64_t max_rows = 0;
  double mean_rows = 0;         // over all experts: M*k/E
  double mean_active_rows = 0;  // over the experts with a row
  double max_over_mean = 0;     // max / mean over all experts (TensorRT-LLM's imbalance + 1)
};
RoutingStats routing_stats(const RoutingAssignment& a);
// {routing, seed, tokens, experts, top_k, active_experts, tokens_per_expert: {max, mean,
// mean_active, max_over_mean}, histogram: [rows of expert 0, ..]} for the report.
nlohmann::json routing_json(const RoutingAssignment& a);

// Expected distinct experts under uniform routing: E * (1 - (1 - k/E)^M).
double expected_active_experts(std::int64_t tokens, std::int64_t experts, std::int64_t top_k);
// The token count from which every expert is expected to be active under uniform routing: the
// smallest M with expected_active_experts(M, E, k) >= E - 0.5 (the expected number of idle
// experts below one half). 1 when k = E. Throws std::invalid_argument unless 1 <= k <= E.
std::int64_t tokens_all_experts_active(std::int64_t experts, std::int64_t top_k);

// BLOCK_SIZE_M of vLLM's tuned fused_moe config for E=128, N=768 on the H200
// (fused_moe/configs/E=128,N=768,device_name=NVIDIA_H200.json): 16 for M <= 128, 32 at 256, 64 at
// 512, 128 from 1024; an unlisted M takes the nearest listed M, the smaller on a tie (get_config's
// min over |listed - M|).
std::int64_t vllm_block_size_m(std::int64_t tokens);

// Rows a padded variant computes, against the M*k it needs.
struct PaddedRows {
  std::int64_t block = 0;        // the row block (largest expert's rows for pad-to-largest)
  std::int64_t rows = 0;         // rows computed, padding included
  std::int64_t useful_rows = 0;  // M*k
  std::int64_t bound = 0;        // moe_align_block_size's buffer: M*k + E*(block - 1)
  std::int64_t wasted_rows() const { return rows - useful_rows; }
};
// moe_align_block_size: each expert's rows rounded up to `block` (an expert without rows: none).
PaddedRows align_block_rows(const std::vector<std::int64_t>& rows_per_expert, std::int64_t block);
// Every one of the E experts padded to the largest expert's rows (strided-batched GEMMs of one
// shape); bound is E * max.
PaddedRows pad_to_largest_rows(const std::vector<std::int64_t>& rows_per_expert);
// FLOPs of `rows` rows through GEMMs of (N, K) each: sum 2 * rows * N * K.
double rows_flops(std::int64_t rows,
                  const std::vector<std::pair<std::int64_t, std::int64_t>>& gemms);

// --- The moe op ---------------------------------------------------------------------------------

// What the moe op's plans read beyond a shard (ShardShape::moe): the rule, the source and seed of
// the routing (one routing per token count, the same for every variant), the shared expert.
struct MoeBlock {
  RoutingRule rule;
  RoutingSource source;
  std::uint64_t seed = 0;
  std::int64_t shared_intermediate = 0;  // the shared expert(s) as one MLP; 0: none
  std::string config_name;               // where the rule was read, for messages
  // The checkpoint's router (--weights under --routing=router); null: a seeded random router.
  std::shared_ptr<const RouterWeights> router;
  // Expert parallelism (tp_moe): vLLM's expert_placement_strategy and EPLB's redundant experts.
  std::string placement = "linear";
  std::int64_t redundant_experts = 0;
};

// What a moe plan carries (Plan::moe): its routing, and for the padded variant the padding.
struct MoeRouting {
  RoutingAssignment assignment;
  PaddedRows padded;         // block 0: the variant does not pad
  double padding_flops = 0;  // matmul FLOPs of the padding rows (w13 and w2)
  // tp_moe: the block across ranks (placement, per-rank rows and costs); null elsewhere.
  nlohmann::json ranks = nullptr;
};
// {routing: routing_json, padding: {block_size, rows, useful_rows, wasted_rows, wasted_fraction,
// padding_flops}} (padding only where the variant pads), uniform: {expected_active_experts at
// this M, tokens_all_experts_active} (the cost model's uniform-routing figures), for the entry.
nlohmann::json moe_json(const MoeRouting& moe);

// --- A routing file that fixes the token count ------------------------------------------------

// True for a `file:` source holding "tokens_per_expert": its counts sum to M*k, so the block
// routes at that one token count only (an "expert_ids" file cycles over any M). Reads the file;
// an unreadable or malformed one is false here (make_routing names what is wrong with it).
bool routing_fixes_tokens(const RoutingSource& source);
// `block` with a `file:` source replaced by uniform routing (the same rule, seed and shared
// expert); any other block as it is. A plan of it exists at every token count with the same
// buffers and steps per row: for probes (the setup's refusals, the verifier's budget at one token)
// and for plans whose routing is then replaced by the whole shape's (the verifier's first rows).
std::shared_ptr<const MoeBlock> file_routing_as_uniform(
    const std::shared_ptr<const MoeBlock>& block);
// Tokens [row0, row0 + rows) of `a` as an assignment of their own (their ids and weights, indexed
// by expert): the float64 reference of a window of a routing that cannot be re-drawn at fewer
// tokens. Throws std::invalid_argument for a window outside the assignment.
RoutingAssignment token_window(const RoutingAssignment& a, std::int64_t row0, std::int64_t rows);

}  // namespace fusebench
