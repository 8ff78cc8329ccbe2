#pragma once
// Model shapes (presets and HF config.json) and their tensor-parallel shards (vLLM's rules).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fusebench {

struct ModelShape {
  std::string name;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;     // query heads
  std::int64_t kv_heads = 0;  // key/value heads (GQA)
  std::int64_t head_dim = 0;
  std::int64_t intermediate = 0;
  std::int64_t layers = 0;  // informational

  std::int64_t q_size() const { return heads * head_dim; }
  std::int64_t kv_size() const { return kv_heads * head_dim; }
};

const std::vector<ModelShape>& model_presets();
// Throws std::invalid_argument naming the model and listing the presets.
ModelShape find_model(std::string_view name);
// Reads hidden_size, num_attention_heads, num_key_value_heads (default: heads), head_dim
// (default: hidden/heads), intermediate_size. Throws std::invalid_argument naming the file and
// the field on malformed input.
ModelShape parse_hf_config(std::string_view json_text, const std::string& name);
ModelShape load_hf_config(const std::string& path);

// One rank's slice of the four projections under tensor parallelism.
struct ShardShape {
  int tp = 1;
  std::int64_t hidden = 0;
  std::int64_t head_dim = 0;
  std::int64_t q_heads = 0;       // per rank
  std::int64_t kv_heads = 0;      // per rank (1 when replicated)
  std::int64_t kv_replicas = 1;   // vLLM num_kv_head_replicas
  std::int64_t intermediate = 0;  // per rank
  int rank = 0;  // which rank's slices of the unsharded weights (the TP pipelines use it)

  std::int64_t q_size() const { return q_heads * head_dim; }
  std::int64_t kv_size() const { return kv_heads * head_dim; }
  std::int64_t qkv_size() const { return q_size() + 2 * kv_size(); }
};

// Throws std::invalid_argument when tp does not divide the heads (or kv heads, or
// intermediate), naming the value and the tp sizes that would be valid.
ShardShape shard(const ModelShape& model, int tp);
std::vector<int> valid_tp_sizes(const ModelShape& model, int max_tp = 64);

}  // namespace fusebench
