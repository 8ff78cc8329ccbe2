// Quantized checkpoints as published (issue 29, item 6): tiny block FP8, per-tensor FP8 (static),
// compressed-tensors FP8 and INT8 checkpoints written by
// tests/checkpoints/make_quant_checkpoints.py (numpy, ml_dtypes, safetensors) are read with their
// scales, every projection verified end to end, and the configs the suite does not run are refused
// naming the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "cli_run.hpp"
#include "fusebench/hf_layer.hpp"
#include "fusebench/quant_checkpoint.hpp"
#include "fusebench/shapes.hpp"

namespace fusebench::testing {
namespace {

namespace fs = std::filesystem;
const fs::path kDir = FUSEBENCH_QUANT_CHECKPOINTS_DIR;
const char* const kFormats[] = {"fp8-block", "fp8-tensor", "ct-fp8", "ct-int8"};

nlohmann::json expected() { return load_json(kDir / "expected.json"); }

std::shared_ptr<const HfLayerWeights> open_layer(const std::string& format) {
  const std::string dir = (kDir / format).string();
  const ModelShape model = load_hf_config(dir + "/config.json");
  return std::make_shared<const HfLayerWeights>(std::make_shared<const Checkpoint>(dir),
                                                find_layer_family(model.family), model, 0, 0,
                                                read_checkpoint_quant_file(dir + "/config.json"));
}

std::string error_of(const nlohmann::json& config) {
  try {
    (void)read_checkpoint_quant(config, "config.json");
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "(accepted)";
}

// Each format: the spec read from its quantization_config, every projection's stored codes and
// dequantized values where the generator put them (computed there in float64 with ml_dtypes).
TEST(QuantCheckpoints, EachFormatReadsItsCodesScalesAndDequantizedValues) {
  const auto want = expected();
  for (const char* format : kFormats) {
    SCOPED_TRACE(format);
    const auto layer = open_layer(format);
    ASSERT_TRUE(layer->quant().has_value());
    EXPECT_EQ(layer->quant()->spec.name(), want[format]["spec"].get<std::string>());
    const auto scales = layer->scale_sources();
    for (const auto& [logical, samples] : want[format]["samples"].items()) {
      SCOPED_TRACE(logical);
      EXPECT_EQ(scales.at(logical), want[format]["scales"][logical].get<std::string>());
      // The generator's shapes: hidden 256, q 2 x 128, k and v 128, intermediate 384.
      const std::map<std::string, std::pair<std::int64_t, std::int64_t>> shapes = {
          {"w_q", {256, 256}},    {"w_k", {128, 256}},  {"w_v", {128, 256}},   {"w_o", {256, 256}},
          {"w_gate", {384, 256}}, {"w_up", {384, 256}}, {"w_down", {256, 384}}};
      const auto [rows, cols] = shapes.at(logical);
      const WindowRequest r{logical, BufferRole::weight, rows, cols, 0, 0, rows, cols, DType::f32};
      const auto codes = layer->stored_quantized(r);
      ASSERT_TRUE(codes.has_value());
      const auto values = layer->window(r);
      for (const auto& s : samples) {
        const std::int64_t row = s["row"], col = s["col"];
        EXPECT_EQ(codes->codes.at(static_cast<std::size_t>(row * cols + col)),
                  s["code"].get<int>());
        EXPECT_EQ(values.at(static_cast<std::size_t>(row * cols + col)),
                  static_cast<float>(s["value"].get<double>()))
            << "(" << row << ", " << col << ")";
      }
    }
    // A window that does not start on a 128x128 scale block (how the up-front value check reads
    // row blocks) dequantizes with the stored grid: the sample at (130, 3) of w_gate.
    const auto& s130 = want[format]["samples"]["w_gate"][3];
    ASSERT_EQ(s130["row"].get<int>(), 130);
    const auto window =
        layer->window({"w_gate", BufferRole::weight, 384, 256, 129, 1, 10, 10, DType::f32});
    EXPECT_EQ(window.at(1 * 10 + 2), static_cast<float>(s130["value"].get<double>()));
    if (want[format].contains("input_scales")) {
      for (const auto& [logical, scale] : want[format]["input_scales"].items())
        EXPECT_EQ(*layer->stored_input_scale(logical), scale.get<float>()) << logical;
    }
  }
}

// End to end: the run's dtype follows the checkpoint, every variant of qkv and gate_up is verified
// against the float64 product of the stored codes and scales, and the report names each scale
// tensor.
class QuantCheckpointRun : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantCheckpointRun, EveryProjectionRunsVerifiedAtTheCheckpointsSpec) {
  const auto want = expected();
  {
    const char* format = GetParam();
    const auto path = temp_path("quant_ckpt", std::string(format) + ".json");
    const CliResult r = run_fusebench("--backend=cpu --weights=" + (kDir / format).string() +
                                      " --ops=qkv,gate_up --tokens=1,16 --verify "
                                      "--timing-max-time=0.02 --report=" +
                                      path.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output.find("MISMATCH"), std::string::npos) << r.output;
    const auto report = load_json(path);
    const std::string spec = want[format]["spec"];
    int entries = 0;
    for (const auto& e : report["benchmarks"]) {
      EXPECT_EQ(e["dtype"], spec) << e["name"];
      EXPECT_EQ(e["weights"], "checkpoint") << e["name"];
      ++entries;
    }
    // qkv and gate_up at 2 token counts: split, fused (and fused_channelwise per tensor).
    EXPECT_EQ(entries, 2 * 2 * (spec.starts_with("fp8:tensor") ? 3 : 2)) << r.output;
    const auto& q = report["context"]["weights"]["checkpoints"][0]["quantization"];
    EXPECT_EQ(q["spec"], spec);
    for (const auto& [logical, name] : want[format]["scales"].items())
      EXPECT_EQ(q["scales"][logical], name) << logical;
    fs::remove(path);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantCheckpointRun, ::testing::ValuesIn(kFormats),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// The per-tensor checkpoint's k and v scales are far below q's: vLLM's fused layer requantizes
// them to q's scale and loses there, the max shard (q) and the channelwise merge lose nothing.
TEST(QuantCheckpoints, MaxScaleFusionCostsTheSmallerShardsOfARealCheckpoint) {
  const auto path = temp_path("quant_ckpt", "maxscale.json");
  const CliResult r =
      run_fusebench("--backend=cpu --weights=" + (kDir / "fp8-tensor").string() +
                    " --ops=qkv --tokens=16 --timing-max-time=0.02 --report=" + path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto report = load_json(path);
  int seen = 0;
  for (const auto& e : report["benchmarks"]) {
    if (e["variant"] == "split") continue;
    ++seen;
    const auto& vs = e["quant_error_vs_split"];
    if (e["variant"] == "fused_channelwise") {
      for (const char* s : {"q", "k", "v"}) EXPECT_LT(vs[s].get<double>(), 1e-3) << s;
    } else {
      EXPECT_LT(vs["q"].get<double>(), 1e-3);
      EXPECT_GT(vs["k"].get<double>(), 0.005);
      EXPECT_GT(vs["v"].get<double>(), 0.005);
    }
  }
  EXPECT_EQ(seen, 2);
  fs::remove(path);
}

// Block FP8 with 64-row k and v: split runs verified, the fused q/k/v layer is left out with vLLM's
// validate_fp8_block_shape message (and not verified: it has no plan), gate_up fuses.
TEST(QuantCheckpoints, BlockScalesOfShardsNotWholeBlocksAreRefusedAsVllmRefusesThem) {
  const auto path = temp_path("quant_ckpt", "kv64.json");
  const CliResult r =
      run_fusebench("--backend=cpu --weights=" + (kDir / "fp8-block-kv64").string() +
                    " --ops=qkv,gate_up --tokens=1 --verify "
                    "--timing-max-time=0.02 --report=" +
                    path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto report = load_json(path);
  std::set<std::string> ran;
  for (const auto& e : report["benchmarks"])
    ran.insert(e["op"].get<std::string>() + "/" + e["variant"].get<std::string>());
  EXPECT_EQ(ran, (std::set<std::string>{"qkv/split", "gate_up/split", "gate_up/fused"}));
  const auto& refused = report["context"]["refused"];
  ASSERT_EQ(refused.size(), 1u) << refused;
  EXPECT_EQ(refused[0]["op"], "qkv/fused dtype:fp8:block");
  EXPECT_NE(refused[0]["reason"].get<std::string>().find(
                "Weight output_partition_size = 64 is not divisible by weight quantization "
                "block_n = 128."),
            std::string::npos);
  EXPECT_NE(r.output.find("qkv/split: OK"), std::string::npos) << r.output;
  fs::remove(path);
}

TEST(QuantCheckpoints, AConflictingDtypeIsRefusedNamingTheCheckpointsSpec) {
  for (const char* dtypes : {"bf16", "fp8", "int8:channel"}) {
    const CliResult r = run_fusebench("--backend=cpu --weights=" + (kDir / "fp8-block").string() +
                                      " --ops=qkv --tokens=1 --list --dtypes=" + dtypes);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("is a quantized checkpoint"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("give --dtypes=fp8:block or leave --dtypes out"), std::string::npos)
        << r.output;
  }
  // Another activation granularity of the same weights: for dynamic activations only.
  const CliResult token = run_fusebench("--backend=cpu --weights=" + (kDir / "ct-fp8").string() +
                                        " --ops=qkv --tokens=1 --list --dtypes=fp8:channel:tensor");
  EXPECT_EQ(token.exit_code, 0) << token.output;
  EXPECT_NE(token.output.find("dtype:fp8:channel:tensor"), std::string::npos) << token.output;
  const CliResult stat = run_fusebench("--backend=cpu --weights=" + (kDir / "fp8-tensor").string() +
                                       " --ops=qkv --tokens=1 --list --dtypes=fp8:tensor");
  EXPECT_EQ(stat.exit_code, 2) << stat.output;
  EXPECT_NE(stat.output.find("run at fp8:tensor:static only"), std::string::npos) << stat.output;
  const CliResult ok = run_fusebench("--backend=cpu --weights=" + (kDir / "fp8-block").string() +
                                     " --ops=qkv --tokens=1 --list --dtypes=fp8:block");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

TEST(QuantCheckpoints, ConfigsTheSuiteDoesNotRunAreRefusedNamingTheField) {
  const auto ct = [](nlohmann::json weights, nlohmann::json acts) {
    return nlohmann::json{
        {"quantization_config",
         {{"quant_method", "compressed-tensors"},
          {"config_groups", {{"group_0", {{"weights", weights}, {"input_activations", acts}}}}}}}};
  };
  const nlohmann::json w8 = {{"num_bits", 8}, {"type", "int"}, {"strategy", "channel"}};
  const nlohmann::json a8 = {
      {"num_bits", 8}, {"type", "int"}, {"strategy", "token"}, {"dynamic", true}};
  EXPECT_EQ(error_of(ct(w8, a8)), "(accepted)");
  EXPECT_EQ(read_checkpoint_quant(ct(w8, a8), "c")->spec.name(), "int8:channel");
  const struct {
    nlohmann::json config;
    std::string says;
  } cases[] = {
      {{{"quantization_config", {{"quant_method", "gptq"}, {"bits", 4}}}},
       "quantization_config.quant_method: 'gptq' is not read (valid: fp8, compressed-tensors)"},
      {ct({{"num_bits", 4}, {"type", "int"}, {"strategy", "group"}}, nullptr),
       "config_groups.group_0.weights.num_bits: 4: the suite runs 8-bit"},
      {ct(w8, nullptr), "config_groups.group_0.input_activations: null: a weight-only scheme"},
      {ct({{"num_bits", 8}, {"type", "int"}, {"strategy", "channel"}, {"symmetric", false}}, a8),
       "weights.symmetric: false: asymmetric quantization"},
      {ct({{"num_bits", 8},
           {"type", "float"},
           {"strategy", "block"},
           {"block_structure", {64, 64}}},
          {{"num_bits", 8}, {"type", "float"}, {"strategy", "group"}, {"dynamic", true}}),
       "block_structure: [64,64]: the suite runs 128x128 weight blocks only"},
      {{{"quantization_config",
         {{"quant_method", "fp8"},
          {"activation_scheme", "static"},
          {"weight_block_size", {128, 128}}}}},
       "activation_scheme: 'static' with weight_block_size"},
      {{{"quantization_config", {{"quant_method", "fp8"}, {"activation_scheme", "lazy"}}}},
       "activation_scheme: 'lazy' (valid: dynamic, static)"},
      {ct(w8, {{"num_bits", 8}, {"type", "float"}, {"strategy", "token"}, {"dynamic", true}}),
       "input_activations.type: 'float' beside weights of type 'int'"},
  };
  for (const auto& c : cases) {
    const std::string e = error_of(c.config);
    EXPECT_NE(e.find(c.says), std::string::npos) << e;
  }
  EXPECT_FALSE(read_checkpoint_quant(nlohmann::json{{"model_type", "qwen3"}}, "c").has_value());
}

// A checkpoint whose scale tensor is missing or of the wrong shape is refused naming it.
TEST(QuantCheckpoints, AMissingOrMisshapenScaleIsRefusedNamingTheTensor) {
  const fs::path dir = temp_path("quant_ckpt", "noscale");
  fs::create_directories(dir);
  fs::copy_file(kDir / "fp8-tensor" / "config.json", dir / "config.json",
                fs::copy_options::overwrite_existing);
  // The fp8-block checkpoint's tensors under a per-tensor config: weight_scale is absent.
  fs::copy_file(kDir / "fp8-block" / "model.safetensors", dir / "model.safetensors",
                fs::copy_options::overwrite_existing);
  const std::string d = dir.string();
  const ModelShape model = load_hf_config(d + "/config.json");
  try {
    HfLayerWeights layer(std::make_shared<const Checkpoint>(d), find_layer_family("qwen3"), model,
                         0, 0, read_checkpoint_quant_file(d + "/config.json"));
    ADD_FAILURE() << "accepted";
  } catch (const CheckpointError& e) {
    EXPECT_NE(
        std::string(e.what()).find("no tensor 'model.layers.0.self_attn.q_proj.weight_scale'"),
        std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

// Issue 37: a finite positive scale whose products overflow (3e38: the outputs were inf and
// quant_error read 0.0) or underflow (1e-45 zeroed the projection) float32 is refused naming the
// tensor and the value.
TEST(QuantCheckpoints, AScaleWhoseProductsOverflowOrUnderflowIsRefusedNamingTheTensor) {
  const std::string scale = "model.layers.0.self_attn.q_proj.weight_scale";
  for (const float bad : {3e38f, 1e-45f}) {
    const fs::path dir = temp_path("quant_ckpt", "badscale");
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::copy_file(kDir / "fp8-tensor" / "config.json", dir / "config.json");
    std::ifstream in(kDir / "fp8-tensor" / "model.safetensors", std::ios::binary);
    std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    std::uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    const auto header = nlohmann::json::parse(bytes.substr(8, n));
    ASSERT_EQ(header.at(scale).at("dtype"), "F32");
    const std::size_t at = 8 + n + header.at(scale).at("data_offsets")[0].get<std::size_t>();
    std::memcpy(bytes.data() + at, &bad, 4);
    std::ofstream(dir / "model.safetensors", std::ios::binary) << bytes;
    const std::string d = dir.string();
    const ModelShape model = load_hf_config(d + "/config.json");
    try {
      HfLayerWeights layer(std::make_shared<const Checkpoint>(d), find_layer_family(model.family),
                           model, 0, 0, read_checkpoint_quant_file(d + "/config.json"));
      ADD_FAILURE() << "accepted scale " << bad;
    } catch (const CheckpointError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("tensor '" + scale + "'"), std::string::npos) << what;
      EXPECT_NE(what.find("is outside"), std::string::npos) << what;
      EXPECT_NE(what.find("overflow or underflow float32"), std::string::npos) << what;
    }
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace fusebench::testing
