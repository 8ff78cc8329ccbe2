#include <gtest/gtest.h>

#include "error_of.hpp"
#include "fusebench/shapes.hpp"

using namespace fusebench;

TEST(Shapes, PresetsMatchPublishedConfigs) {
  const ModelShape q = find_model("qwen3-0.6b");
  EXPECT_EQ(q.hidden, 1024);
  EXPECT_EQ(q.q_size(), 2048);  // q_size != hidden
  EXPECT_EQ(q.kv_size(), 1024);
  EXPECT_EQ(find_model("llama3-70b").intermediate, 28672);
  EXPECT_EQ(find_model("qwen3-32b").heads, 64);
}

TEST(Shapes, UnknownModelListsPresets) {
  const auto msg = error_of([] { find_model("gpt5"); });
  EXPECT_NE(msg.find("gpt5"), std::string::npos);
  EXPECT_NE(msg.find("llama3-8b"), std::string::npos);
}

TEST(Shapes, ShardFollowsVllmRules) {
  const ModelShape m = find_model("llama3-8b");  // 32 q heads, 8 kv heads
  const ShardShape s2 = shard(m, 2);
  EXPECT_EQ(s2.q_heads, 16);
  EXPECT_EQ(s2.kv_heads, 4);
  EXPECT_EQ(s2.kv_replicas, 1);
  EXPECT_EQ(s2.intermediate, 7168);
  const ShardShape s8 = shard(m, 8);
  EXPECT_EQ(s8.kv_heads, 1);
  EXPECT_EQ(s8.kv_replicas, 1);
  // tp > kv heads: one kv head per rank, replicated tp / kv_heads times.
  const ShardShape s16 = shard(m, 16);
  EXPECT_EQ(s16.q_heads, 2);
  EXPECT_EQ(s16.kv_heads, 1);
  EXPECT_EQ(s16.kv_replicas, 2);
  EXPECT_EQ(s16.qkv_size(), 2 * 128 + 2 * 128);
}

TEST(Shapes, IndivisibleTpNamesValueAndValidSizes) {
  const auto msg = error_of([] { shard(find_model("qwen3-0.6b"), 3); });
  EXPECT_NE(msg.find("tp=3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("num_attention_heads=16"), std::string::npos) << msg;
  EXPECT_NE(msg.find("valid tp sizes: 1, 2, 4, 8, 16"), std::string::npos) << msg;
}

TEST(Shapes, HfConfigWithExplicitHeadDim) {
  const ModelShape m = parse_hf_config(
      R"({"model_type": "llama",
          "hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 4,
          "head_dim": 128, "intermediate_size": 6144, "num_hidden_layers": 48})",
      "custom");
  EXPECT_EQ(m.q_size(), 4096);  // differs from hidden
  EXPECT_EQ(m.kv_size(), 512);
  EXPECT_EQ(m.layers, 48);
}

TEST(Shapes, HfConfigDefaultsHeadDimAndKvHeads) {
  const ModelShape m = parse_hf_config(
      R"({"model_type": "llama",
          "hidden_size": 4096, "num_attention_heads": 32, "intermediate_size": 11008})",
      "llama2");
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.kv_heads, 32);
}

TEST(Shapes, MalformedConfigNamesField) {
  EXPECT_NE(error_of([] {
              parse_hf_config(R"({"model_type": "llama", "hidden_size": 4096})", "c.json");
            }).find("num_attention_heads"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_hf_config(
                  R"({"model_type": "llama", "hidden_size": -1, "num_attention_heads": 2,
                      "intermediate_size": 8})",
                  "c.json");
            }).find("hidden_size"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_hf_config("{not json", "c.json"); }).find("not valid JSON"),
            std::string::npos);
  EXPECT_NE(
      error_of([] { load_hf_config("/nonexistent/config.json"); }).find("/nonexistent/config.json"),
      std::string::npos);
}
