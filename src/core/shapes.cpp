#include "fusebench/shapes.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace fusebench {
namespace {

std::string join_ints(const std::vector<int>& values) {
  std::string out;
  for (int v : values) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out;
}

std::int64_t read_positive(const nlohmann::json& cfg, const char* key, const std::string& where) {
  if (!cfg.contains(key)) throw std::invalid_argument(where + ": missing field '" + key + "'");
  const auto& v = cfg.at(key);
  if (!v.is_number_integer() || v.get<std::int64_t>() <= 0) {
    throw std::invalid_argument(where + ": field '" + key + "' must be a positive integer, got " +
                                v.dump());
  }
  return v.get<std::int64_t>();
}

}  // namespace

const std::vector<ModelShape>& model_presets() {
  // Published configs (hidden, heads, kv heads, head_dim, intermediate, layers).
  static const std::vector<ModelShape> presets = {
      {"qwen3-0.6b", 1024, 16, 8, 128, 3072, 28},
      {"llama3-8b", 4096, 32, 8, 128, 14336, 32},
      {"qwen3-32b", 5120, 64, 8, 128, 25600, 64},
      {"llama3-70b", 8192, 64, 8, 128, 28672, 80},
  };
  return presets;
}

ModelShape find_model(std::string_view name) {
  std::string valid;
  for (const auto& m : model_presets()) {
    if (m.name == name) return m;
    valid += (valid.empty() ? "" : ", ") + m.name;
  }
  throw std::invalid_argument("unknown model '" + std::string(name) + "' (presets: " + valid +
                              "; or pass --model-config=PATH to a HF config.json)");
}

ModelShape parse_hf_config(std::string_view json_text, const std::string& name) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    // Not only parse_error: a number too large for a double throws out_of_range (found by
    // fuzz/fuzz_hf_config), which must still surface as the documented invalid_argument.
    throw std::invalid_argument(name + ": not valid JSON (" + e.what() + ")");
  }
  if (!root.is_object()) throw std::invalid_argument(name + ": top level must be a JSON object");
  // Multimodal configs keep the language model under text_config.
  const nlohmann::json& cfg = (!root.contains("hidden_size") && root.contains("text_config") &&
                               root["text_config"].is_object())
                                  ? root["text_config"]
                                  : root;
  ModelShape m;
  m.name = name;
  m.hidden = read_positive(cfg, "hidden_size", name);
  m.heads = read_positive(cfg, "num_attention_heads", name);
  m.intermediate = read_positive(cfg, "intermediate_size", name);
  m.kv_heads = cfg.contains("num_key_value_heads") && !cfg["num_key_value_heads"].is_null()
                   ? read_positive(cfg, "num_key_value_heads", name)
                   : m.heads;
  if (cfg.contains("head_dim") && !cfg["head_dim"].is_null()) {
    m.head_dim = read_positive(cfg, "head_dim", name);
  } else {
    if (m.hidden % m.heads != 0) {
      throw std::invalid_argument(
          name + ": no head_dim and hidden_size=" + std::to_string(m.hidden) +
          " is not divisible by num_attention_heads=" + std::to_string(m.heads));
    }
    m.head_dim = m.hidden / m.heads;
  }
  if (cfg.contains("num_hidden_layers") && cfg["num_hidden_layers"].is_number_integer()) {
    m.layers = cfg["num_hidden_layers"].get<std::int64_t>();
  }
  if (m.heads % m.kv_heads != 0) {
    throw std::invalid_argument(
        name + ": num_attention_heads=" + std::to_string(m.heads) +
        " is not a multiple of num_key_value_heads=" + std::to_string(m.kv_heads));
  }
  return m;
}

ModelShape load_hf_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("cannot read model config '" + path + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  auto p = std::filesystem::path(path);
  std::string name = p.parent_path().filename().string();
  if (name.empty() || name == ".") name = p.stem().string();
  ModelShape m = parse_hf_config(buffer.str(), path);
  m.name = name;
  return m;
}

ShardShape shard(const ModelShape& model, int tp) {
  const auto fail = [&](const std::string& what) {
    throw std::invalid_argument("tp=" + std::to_string(tp) + " is invalid for " + model.name +
                                ": " + what +
                                " (valid tp sizes: " + join_ints(valid_tp_sizes(model)) + ")");
  };
  if (tp < 1) fail("tp must be >= 1");
  if (model.heads % tp != 0) {
    fail("num_attention_heads=" + std::to_string(model.heads) + " is not divisible by tp");
  }
  ShardShape s;
  s.tp = tp;
  s.hidden = model.hidden;
  s.head_dim = model.head_dim;
  s.q_heads = model.heads / tp;
  if (tp >= model.kv_heads) {
    // vLLM QKVParallelLinear: each rank holds one kv head, replicated tp/kv_heads times.
    if (tp % model.kv_heads != 0) {
      fail("tp is larger than num_key_value_heads=" + std::to_string(model.kv_heads) +
           " but not a multiple of it");
    }
    s.kv_heads = 1;
    s.kv_replicas = tp / model.kv_heads;
  } else {
    if (model.kv_heads % tp != 0) {
      fail("num_key_value_heads=" + std::to_string(model.kv_heads) + " is not divisible by tp");
    }
    s.kv_heads = model.kv_heads / tp;
    s.kv_replicas = 1;
  }
  if (model.intermediate % tp != 0) {
    fail("intermediate_size=" + std::to_string(model.intermediate) + " is not divisible by tp");
  }
  s.intermediate = model.intermediate / tp;
  return s;
}

std::vector<int> valid_tp_sizes(const ModelShape& model, int max_tp) {
  std::vector<int> out;
  for (int tp = 1; tp <= max_tp; ++tp) {
    const bool heads_ok = model.heads % tp == 0;
    const bool kv_ok = tp >= model.kv_heads ? tp % model.kv_heads == 0 : model.kv_heads % tp == 0;
    if (heads_ok && kv_ok && model.intermediate % tp == 0) out.push_back(tp);
  }
  return out;
}

}  // namespace fusebench
