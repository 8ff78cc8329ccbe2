#pragma once
// Typed, remembering access to one object of a Hugging Face config.json (the readers of
// hf_config.cpp and hf_moe_config.cpp). Internal to src/core.
#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fusebench::hf_config {

// No real model has a dimension near this (hidden is at most 2^14 today); the cap keeps the
// products the plans form (rows * cols * dtype bytes of a weight) inside int64, since a config
// is untrusted input (fuzz/fuzz_hf_config.cpp).
inline constexpr std::int64_t kMaxSize = std::int64_t{1} << 20;

// Typed access to one config object as vLLM reads it through transformers' config class: a field
// is found under its own name or under the name the class's `attribute_map` aliases it to
// (Qwen3MoeConfig saves num_experts as num_local_experts), and every field read is remembered, so
// that expert and MLA fields a family's reading never looked at can be refused. Every error names
// the file and the field.
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& cfg, const std::string& where,
               std::vector<std::pair<std::string, std::string>> aliases = {})
      : cfg_(cfg), where_(where), aliases_(std::move(aliases)) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument(where_ + ": " + what);
  }
  // The value of `key` (or of its alias), nullptr when absent or null.
  const nlohmann::json* find(const std::string& key) const {
    read_.insert(key);
    const nlohmann::json* found = nullptr;
    std::string found_name;
    for (const std::string& name : names_of(key)) {
      read_.insert(name);
      if (!cfg_.contains(name) || cfg_.at(name).is_null()) continue;
      if (found != nullptr && *found != cfg_.at(name)) {
        fail("fields '" + found_name + "' (" + found->dump() + ") and '" + name + "' (" +
             cfg_.at(name).dump() +
             ") are one attribute of the config class (attribute_map) but "
             "disagree");
      }
      found = &cfg_.at(name);
      found_name = name;
    }
    return found;
  }
  // The name the field is stored under (for messages): the alias when only it is present.
  std::string stored_name(const std::string& key) const {
    for (const std::string& name : names_of(key)) {
      if (cfg_.contains(name) && !cfg_.at(name).is_null()) return name;
    }
    return key;
  }
  bool has(const std::string& key) const { return find(key) != nullptr; }
  std::int64_t positive(const std::string& key) const {
    if (!has(key)) fail("missing field '" + key + "'");
    return integer(key, 1);
  }
  std::int64_t positive_or(const std::string& key, std::int64_t fallback) const {
    return has(key) ? integer(key, 1) : fallback;
  }
  std::int64_t non_negative_or(const std::string& key, std::int64_t fallback) const {
    return has(key) ? integer(key, 0) : fallback;
  }
  bool flag_or(const std::string& key, bool fallback) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean())
      fail("field '" + stored_name(key) + "' must be true or false, got " + v->dump());
    return v->get<bool>();
  }
  std::optional<std::string> text(const std::string& key) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string())
      fail("field '" + stored_name(key) + "' must be a string, got " + v->dump());
    return v->get<std::string>();
  }
  double number_or(const std::string& key, double fallback) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_number() || !(v->get<double>() > 0))
      fail("field '" + stored_name(key) + "' must be a positive number, got " + v->dump());
    return v->get<double>();
  }
  // An array of non-negative layer indices.
  std::set<std::int64_t> indices(const std::string& key) const {
    std::set<std::int64_t> out;
    const nlohmann::json* v = find(key);
    if (v == nullptr) return out;
    if (!v->is_array()) fail("field '" + stored_name(key) + "' must be an array of layer indices");
    for (const auto& e : *v) {
      if (!e.is_number_integer() || e.get<std::int64_t>() < 0)
        fail("field '" + stored_name(key) + "' must hold layer indices >= 0, got " + e.dump());
      out.insert(e.get<std::int64_t>());
    }
    return out;
  }
  // A nested config object (DBRX's attn_config, ffn_config); an empty one when absent.
  ConfigReader object(const std::string& key) const {
    const nlohmann::json* v = find(key);
    if (v != nullptr && !v->is_object()) fail("field '" + key + "' must be an object");
    return ConfigReader(v != nullptr ? *v : empty(), where_ + " (" + key + ")");
  }
  // Whether the field holds something (not absent, null, 0, false, "" or []).
  bool set(const std::string& name) const {
    if (!cfg_.contains(name)) return false;
    const auto& v = cfg_.at(name);
    return !(v.is_null() || (v.is_number() && v.get<double>() == 0) ||
             (v.is_boolean() && !v.get<bool>()) ||
             (v.is_string() && v.get<std::string>().empty()) || (v.is_array() && v.empty()));
  }
  bool was_read(const std::string& name) const { return read_.count(name) > 0; }
  const nlohmann::json& json() const { return cfg_; }

 private:
  static const nlohmann::json& empty() {
    static const nlohmann::json e = nlohmann::json::object();
    return e;
  }
  std::vector<std::string> names_of(const std::string& key) const {
    std::vector<std::string> names = {key};
    for (const auto& [a, b] : aliases_) {
      if (a == key) names.push_back(b);
      if (b == key) names.push_back(a);
    }
    return names;
  }
  std::int64_t integer(const std::string& key, std::int64_t min) const {
    const nlohmann::json& v = *find(key);
    const bool in_range = v.is_number_unsigned()
                              ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(kMaxSize)
                              : v.is_number_integer() && v.get<std::int64_t>() <= kMaxSize;
    const bool ok = in_range && v.get<std::int64_t>() >= min;
    if (!ok) {
      fail("field '" + stored_name(key) + "' must be an integer in [" + std::to_string(min) + ", " +
           std::to_string(kMaxSize) + "], got " + v.dump());
    }
    return v.get<std::int64_t>();
  }

  const nlohmann::json& cfg_;
  std::string where_;
  std::vector<std::pair<std::string, std::string>> aliases_;
  mutable std::set<std::string> read_;
};

// `text` cut at each `sep` ("" gives no pieces).
inline std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= text.size() && !text.empty()) {
    const std::size_t end = std::min(text.find(sep, at), text.size());
    out.emplace_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

}  // namespace fusebench::hf_config
