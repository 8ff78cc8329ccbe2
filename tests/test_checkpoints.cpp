// Hugging Face checkpoints (docs/checkpoints.md), on the small checkpoints and hostile files that
// tests/checkpoints/make_checkpoints.py writes (the ctest fixture runs it first), against the
// values, splits and vLLM narrowings that script computed independently with numpy.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fusebench/checkpoint.hpp"
#include "fusebench/hf_layer.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/tp_narrowing.hpp"
#include "fusebench/verify.hpp"
#include "fusebench/workspace.hpp"

using namespace fusebench;
namespace fs = std::filesystem;

namespace {

const fs::path kDir = FUSEBENCH_CHECKPOINTS_DIR;

struct Expected {
  nlohmann::json manifest;
  std::vector<float> values;

  // The float32 array a manifest reference {offset, shape} points at.
  std::vector<float> at(const nlohmann::json& ref) const {
    std::size_t n = 1;
    for (const auto& d : ref.at("shape")) n *= d.get<std::size_t>();
    const auto offset = ref.at("offset").get<std::size_t>();
    return {values.begin() + static_cast<std::ptrdiff_t>(offset),
            values.begin() + static_cast<std::ptrdiff_t>(offset + n)};
  }
};

const Expected& expected() {
  static const Expected e = [] {
    Expected out;
    std::ifstream json(kDir / "expected.json");
    if (!json) {
      ADD_FAILURE() << (kDir / "expected.json")
                    << " is missing: the make_checkpoints ctest fixture writes it";
      return out;
    }
    out.manifest = nlohmann::json::parse(json);
    std::ifstream bin(kDir / "expected.bin", std::ios::binary);
    const auto bytes = fs::file_size(kDir / "expected.bin");
    out.values.resize(bytes / 4);
    bin.read(reinterpret_cast<char*>(out.values.data()), static_cast<std::streamsize>(bytes));
    return out;
  }();
  return e;
}

ModelShape shape_of(const nlohmann::json& m, const std::string& name) {
  const auto& s = m.at("shape");
  ModelShape shape;
  shape.name = name;
  shape.hidden = s.at("hidden");
  shape.heads = s.at("heads");
  shape.kv_heads = s.at("kv");
  shape.head_dim = s.at("head_dim");
  shape.intermediate = s.at("inter");
  shape.layers = s.at("layers");
  return shape;
}

// Bit equality: a value read back must be the value stored, not a close one.
::testing::AssertionResult bit_equal(const std::vector<float>& got,
                                     const std::vector<float>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << got.size() << " values, expected " << want.size();
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << " != " << want[i]
                                           << " (of " << got.size() << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<float> read_whole(const Checkpoint& c, const std::string& name, DType run) {
  const auto t = c.tensor(name);
  const MatrixShape m = matrix_shape(t.file, t.info);
  return read_window(t.file, t.info, 0, 0, m.rows, m.cols, run);
}

struct Layer {
  std::shared_ptr<const Checkpoint> checkpoint;
  ModelShape shape;
  std::unique_ptr<HfLayerWeights> weights;
};

Layer open_layer(const std::string& model, int layer) {
  const auto& m = expected().manifest.at("models").at(model);
  Layer l;
  l.checkpoint = std::make_shared<Checkpoint>((kDir / m.at("dir").get<std::string>()).string());
  l.shape = shape_of(m, model);
  l.weights = std::make_unique<HfLayerWeights>(
      l.checkpoint, find_layer_family(m.at("model_type").get<std::string>()), l.shape, layer);
  return l;
}

std::vector<std::string> model_names() {
  std::vector<std::string> out;
  for (const auto& [name, m] : expected().manifest.at("models").items()) out.push_back(name);
  return out;
}

int buffer_index(const Plan& plan, const std::string& name) {
  for (std::size_t i = 0; i < plan.buffers.size(); ++i) {
    if (plan.buffers[i].name == name) return static_cast<int>(i);
  }
  ADD_FAILURE() << plan.op << "/" << plan.variant << " has no buffer " << name;
  return 0;
}

std::vector<float> read_buffer(Workspace& ws, const std::string& name) {
  const int i = buffer_index(ws.plan(), name);
  const auto& b = ws.plan().buffers[static_cast<std::size_t>(i)];
  return ws.read(View{i, 0, 0, b.rows, b.cols});
}

}  // namespace

TEST(Safetensors, KnowsEveryDtypeOfTheFormat) {
  for (const char* name : {"BOOL",    "U8",  "I8",   "I16",     "U16",     "I32",     "U32",
                           "I64",     "U64", "F4",   "F6_E2M3", "F6_E3M2", "F8_E5M2", "F8_E4M3",
                           "F8_E8M0", "F16", "BF16", "F32",     "F64",     "C64"}) {
    const auto d = parse_tensor_dtype(name);
    ASSERT_TRUE(d) << name;
    EXPECT_EQ(to_string(*d), name);
    EXPECT_GT(dtype_bits(*d), 0);
  }
  EXPECT_EQ(dtype_bits(TensorDtype::BF16), 16);
  EXPECT_EQ(dtype_bits(TensorDtype::F4), 4);
  EXPECT_FALSE(parse_tensor_dtype("bf16"));  // names are case-sensitive, as in the format
  EXPECT_TRUE(unrunnable_reason(TensorDtype::BF16).empty());
  EXPECT_NE(unrunnable_reason(TensorDtype::F8_E4M3).find("scales"), std::string::npos);
  EXPECT_TRUE(converts_exactly(TensorDtype::BF16, DType::f32));
  EXPECT_TRUE(converts_exactly(TensorDtype::F16, DType::f16));
  EXPECT_FALSE(converts_exactly(TensorDtype::F32, DType::bf16));
  EXPECT_FALSE(converts_exactly(TensorDtype::F16, DType::bf16));
  EXPECT_FALSE(converts_exactly(TensorDtype::BF16, DType::f16));
}

TEST(Safetensors, ParsesAHeaderInMemory) {
  // {"__metadata__":{"k":"v"},"e":{...[0,0]},"w":{"dtype":"F16","shape":[2],...[0,4]}} + 4 bytes
  const std::string json =
      R"({"__metadata__":{"k":"v"},"e":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]},)"
      R"("w":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})";
  std::vector<std::byte> file(8);
  file[0] = static_cast<std::byte>(json.size());
  for (char c : json) file.push_back(static_cast<std::byte>(c));
  for (int i = 0; i < 4; ++i) file.push_back(std::byte{0x3c});
  const auto h = parse_safetensors(file, "mem");
  EXPECT_EQ(h.header_bytes, json.size());
  EXPECT_EQ(h.metadata.at("k"), "v");
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors.at("w").dtype, TensorDtype::F16);
  EXPECT_EQ(h.tensors.at("e").elements(), 0u);
  file.pop_back();  // one byte short: the last tensor ends past the data
  try {
    parse_safetensors(file, "mem");
    ADD_FAILURE() << "a truncated buffer was accepted";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("mem: tensor 'w'"), std::string::npos) << e.what();
  }
}

TEST(Checkpoints, EveryTensorReadsBackBitEqual) {
  for (const auto& name : model_names()) {
    SCOPED_TRACE(name);
    const auto& m = expected().manifest.at("models").at(name);
    const Checkpoint c((kDir / m.at("dir").get<std::string>()).string());
    const TensorDtype stored = *parse_tensor_dtype(m.at("dtype").get<std::string>());
    const DType own = *exact_run_dtype(stored);
    EXPECT_EQ(c.files().size(), m.at("files").size());
    for (const auto& [tensor, ref] : m.at("tensors").items()) {
      SCOPED_TRACE(tensor);
      ASSERT_TRUE(c.has(tensor));
      const auto want = expected().at(ref);
      EXPECT_TRUE(bit_equal(read_whole(c, tensor, DType::f32), want));
      EXPECT_TRUE(bit_equal(read_whole(c, tensor, own), want));
      // Exact in its own dtype: encoding the values gives back the stored bytes.
      const auto t = c.tensor(tensor);
      const auto bytes = encode(want, own);
      ASSERT_EQ(bytes.size(), t.file.bytes(t.info).size());
      EXPECT_EQ(std::memcmp(bytes.data(), t.file.bytes(t.info).data(), bytes.size()), 0);
    }
    EXPECT_EQ(c.index_path().empty(), m.at("layout") != "index");
  }
}

TEST(Checkpoints, WindowsReadOnlyTheirElements) {
  const auto& m = expected().manifest.at("models").at("qwen3_gqa");
  const Checkpoint c((kDir / m.at("dir").get<std::string>()).string());
  const std::string name = "model.layers.1.mlp.down_proj.weight";  // [64, 96]
  const auto whole = expected().at(m.at("tensors").at(name));
  const auto t = c.tensor(name);
  const auto w = read_window(t.file, t.info, 5, 17, 3, 11, DType::bf16);
  ASSERT_EQ(w.size(), 33u);
  for (int r = 0; r < 3; ++r) {
    for (int col = 0; col < 11; ++col) EXPECT_EQ(w[r * 11 + col], whole[(5 + r) * 96 + 17 + col]);
  }
  EXPECT_THROW(read_window(t.file, t.info, 62, 0, 3, 96, DType::bf16), CheckpointError);
  EXPECT_THROW(read_window(t.file, t.info, 0, -1, 1, 1, DType::bf16), CheckpointError);
  // Empty windows read nothing (the fuzzer found a null buffer handed to memcpy; UBSan sees it).
  EXPECT_TRUE(read_window(t.file, t.info, 0, 96, 3, 0, DType::bf16).empty());
  EXPECT_TRUE(read_window(t.file, t.info, 64, 0, 0, 96, DType::f32).empty());
}

TEST(Checkpoints, FingerprintNamesTheCheckpoint) {
  const auto open = [](const std::string& model) {
    return Checkpoint(
        (kDir / expected().manifest.at("models").at(model).at("dir").get<std::string>()).string());
  };
  const std::string a = open("qwen3_gqa").fingerprint();
  EXPECT_EQ(a, open("qwen3_gqa").fingerprint());
  EXPECT_EQ(a.rfind("fnv1a64:", 0), 0u);
  EXPECT_EQ(a.size(), 8u + 16u);
  EXPECT_NE(a, open("phi3_fused").fingerprint());
  EXPECT_NE(open("llama_sharded").fingerprint(), open("llama_multifile").fingerprint());
}

TEST(Checkpoints, ConfigInTheDirectoryGivesTheManifestShape) {
  for (const auto& name : model_names()) {
    const auto& m = expected().manifest.at("models").at(name);
    const ModelShape cfg =
        load_hf_config((kDir / m.at("dir").get<std::string>() / "config.json").string());
    const ModelShape want = shape_of(m, name);
    EXPECT_EQ(cfg.hidden, want.hidden) << name;
    EXPECT_EQ(cfg.q_size(), want.q_size()) << name;
    EXPECT_EQ(cfg.kv_size(), want.kv_size()) << name;
    EXPECT_EQ(cfg.intermediate, want.intermediate) << name;
    EXPECT_EQ(cfg.layers, want.layers) << name;
  }
}

TEST(HfLayer, LogicalTensorsAreVllmsSplitOfTheCheckpoint) {
  for (const auto& name : model_names()) {
    const auto& m = expected().manifest.at("models").at(name);
    for (const auto& [layer, logical] : m.at("logical").items()) {
      SCOPED_TRACE(name + " layer " + layer);
      const Layer l = open_layer(name, std::stoi(layer));
      for (const auto& [tensor, ref] : logical.items()) {
        SCOPED_TRACE(tensor);
        ASSERT_TRUE(l.weights->has(tensor));
        const auto want = expected().at(ref);
        const auto& shape = ref.at("shape");
        const std::int64_t rows = shape[0],
                           cols = shape.size() > 1 ? shape[1].get<std::int64_t>() : 1;
        EXPECT_TRUE(bit_equal(l.weights->window({tensor, BufferRole::weight, rows, cols, 0, 0, rows,
                                                 cols, DType::f32}),
                              want));
      }
      // Exactly the logical tensors the script expects: no bias invented, none dropped.
      for (const char* b : {"b_q", "b_k", "b_v", "b_o"}) {
        EXPECT_EQ(l.weights->has(b), logical.contains(b)) << b;
      }
    }
  }
}

TEST(HfLayer, SaysWhereEachLogicalTensorComesFrom) {
  const Layer phi3 = open_layer("phi3_fused", 0);  // q 64, kv 32, intermediate 80
  const auto s = phi3.weights->sources();
  EXPECT_EQ(s.at("w_q"), "model.layers.0.self_attn.qkv_proj.weight rows [0, 64)");
  EXPECT_EQ(s.at("w_k"), "model.layers.0.self_attn.qkv_proj.weight rows [64, 96)");
  EXPECT_EQ(s.at("w_v"), "model.layers.0.self_attn.qkv_proj.weight rows [96, 128)");
  EXPECT_EQ(s.at("w_up"), "model.layers.0.mlp.gate_up_proj.weight rows [80, 160)");
  EXPECT_EQ(s.at("w_o"), "model.layers.0.self_attn.o_proj.weight");
  EXPECT_EQ(phi3.weights->stored_dtype(), TensorDtype::BF16);
  EXPECT_EQ(open_layer("qwen2_bias", 0).weights->sources().at("b_k"),
            "model.layers.0.self_attn.k_proj.bias");
  EXPECT_EQ(open_layer("qwen2_bias", 0).weights->stored_dtype(), TensorDtype::F16);
  EXPECT_THROW(find_layer_family("mamba"), CheckpointError);  // gpt_neox is mapped now
  // A bias asked as a row [1, n] is the same values as the column [n, 1].
  const Layer q2 = open_layer("qwen2_bias", 0);
  const auto col = q2.weights->window({"b_q", BufferRole::weight, 48, 1, 0, 0, 48, 1, DType::f32});
  const auto row = q2.weights->window({"b_q", BufferRole::weight, 1, 48, 0, 0, 1, 48, DType::f32});
  EXPECT_TRUE(bit_equal(row, col));
  // A plan that asks for a shape the checkpoint does not hold is refused, naming both.
  try {
    q2.weights->window({"w_q", BufferRole::weight, 24, 48, 0, 0, 24, 48, DType::f32});
    ADD_FAILURE() << "a 24x48 w_q was served from a 48x48 tensor";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("q_proj.weight' holds it as 48x48"), std::string::npos)
        << e.what();
  }
}

TEST(Workspace, RandomPathIsUnchangedAndCheckpointWeightsReplaceOnlyWeights) {
  auto backend = make_cpu_backend();
  const Layer l = open_layer("qwen3_gqa", 1);
  const ShardShape s = shard(l.shape, 1);
  const Plan plan = build_plan("qkv", "fused", s, 3, DType::f32);
  Workspace plain(*backend, plan, 7);
  const RandomTensors random(7);
  Workspace explicit_random(*backend, plan, 7, &random);
  Workspace real(*backend, plan, 7, l.weights.get());
  // The random generator as an explicit source gives the same bits as the default path.
  EXPECT_TRUE(bit_equal(read_buffer(plain, "w_qkv"), read_buffer(explicit_random, "w_qkv")));
  EXPECT_TRUE(bit_equal(read_buffer(plain, "w_qkv"), [&] {
    std::vector<float> v;
    for (const std::string n : {"w_q", "w_k", "w_v"}) {
      const auto part = logical_tensor(n, n == "w_q" ? s.q_size() : s.kv_size(), s.hidden,
                                       BufferRole::weight, DType::f32, 7);
      v.insert(v.end(), part.begin(), part.end());
    }
    return v;
  }()));
  // Inputs stay random; weights are the checkpoint's.
  EXPECT_TRUE(bit_equal(read_buffer(plain, "x"), read_buffer(real, "x")));
  const auto& logical = expected().manifest.at("models").at("qwen3_gqa").at("logical").at("1");
  std::vector<float> want;
  for (const char* n : {"w_q", "w_k", "w_v"}) {
    const auto part = expected().at(logical.at(n));
    want.insert(want.end(), part.begin(), part.end());
  }
  EXPECT_TRUE(bit_equal(read_buffer(real, "w_qkv"), want));
  // What the float64 reference reads comes from the same source.
  const auto in = logical_inputs(plan, 7, l.weights.get());
  EXPECT_TRUE(bit_equal(in.at("w_k"), expected().at(logical.at("w_k"))));
  EXPECT_TRUE(bit_equal(in.at("x"), logical_inputs(plan, 7).at("x")));
}

TEST(Workspace, Fp32CheckpointInBf16RoundsAsEncodeDoes) {
  auto backend = make_cpu_backend();
  if (auto why = backend->unsupported_reason(DType::bf16); !why.empty()) GTEST_SKIP() << why;
  const Layer l = open_layer("llama_sharded", 0);
  const Plan plan = build_plan("gate_up", "split", shard(l.shape, 1), 2, DType::bf16);
  Workspace ws(*backend, plan, 3, l.weights.get());
  const auto stored = expected().at(
      expected().manifest.at("models").at("llama_sharded").at("logical").at("0").at("w_up"));
  std::vector<float> rounded;
  for (float v : stored) rounded.push_back(bf16_to_float(float_to_bf16(v)));
  const auto got = read_buffer(ws, "w_up");
  EXPECT_TRUE(bit_equal(got, rounded));
  EXPECT_FALSE(bit_equal(got, stored));  // fp32 -> bf16 is not exact: the data must show it
}

TEST(Workspace, FusedEqualsSplitAndFloat64OnCheckpointWeights) {
  auto backend = make_cpu_backend();
  for (const auto& [model, layer] : std::vector<std::pair<std::string, int>>{
           {"qwen3_gqa", 1}, {"phi3_fused", 0}, {"qwen2_bias", 0}, {"llama_sharded", 1}}) {
    const Layer l = open_layer(model, layer);
    for (const std::string op : {"qkv", "gate_up"}) {
      SCOPED_TRACE(model + " " + op);
      const OpInfo& info = find_op(op);
      const Tolerance tol = tolerance_for(DType::f32);
      std::map<std::string, std::vector<float>> baseline;
      for (const auto& variant : variants_for(info, shard(l.shape, 1))) {
        const Plan plan = build_plan(op, variant, shard(l.shape, 1), 5, DType::f32);
        Workspace ws(*backend, plan, 11, l.weights.get());
        ws.run();
        const auto reference = info.reference(plan, logical_inputs(plan, 11, l.weights.get()));
        for (const auto& [name, view] : ws.plan().outputs) {
          const auto got = ws.read(view);
          EXPECT_TRUE(compare_outputs(name, "float64", got, reference.at(name), tol).ok)
              << variant << " " << name;
          if (baseline.count(name) == 0) {
            baseline[name] = got;
          } else {
            EXPECT_TRUE(compare_outputs(name, "split", got, baseline[name], tol).ok)
                << variant << " " << name;
          }
        }
      }
    }
  }
}

// The expert, shared-expert and MLA layers read logical tensors (w_expert_gate, ...) the phase-1
// mapping does not provide: refused naming the tensor, never filled from the dense MLP's.
TEST(Workspace, ALayerTheMappingLacksIsRefusedNamingTheTensor) {
  auto backend = make_cpu_backend();
  const Layer l = open_layer("qwen3_gqa", 1);
  ModelShape moe = l.shape;
  moe.mlp_layers = {{LayerKind::expert, l.shape.intermediate, "test", -1}};
  const Plan plan = build_plan("gate_up", "split", shard(moe, 1, LayerKind::expert), 2, DType::f32);
  try {
    Workspace ws(*backend, plan, 1, l.weights.get());
    ADD_FAILURE() << "an expert plan ran on a dense layer's weights";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("w_expert_gate"), std::string::npos) << e.what();
  }
}

// Each rank's weights, as fusebench's TP plans build them from windows of the logical tensors,
// equal the merged parameters vLLM's weight loaders build (the script's transcription).
TEST(TpNarrowing, PlanWindowsOnTheCheckpointEqualVllmsRankParameters) {
  auto backend = make_cpu_backend();
  for (const auto& name : model_names()) {
    const auto& m = expected().manifest.at("models").at(name);
    const Layer l = open_layer(name, m.at("tp_layer").get<int>());
    for (const auto& [tp_text, ranks] : m.at("tp").items()) {
      const int tp = std::stoi(tp_text);
      for (int rank = 0; rank < tp; ++rank) {
        SCOPED_TRACE(name + " tp " + tp_text + " rank " + std::to_string(rank));
        const auto& want = ranks.at(static_cast<std::size_t>(rank));
        ShardShape s = shard(l.shape, tp);
        s.rank = rank;
        Workspace attn(*backend, build_plan("tp_attn", "paired", s, 1, DType::f32), 1,
                       l.weights.get());
        EXPECT_TRUE(bit_equal(read_buffer(attn, "w_qkv"), expected().at(want.at("qkv_proj"))));
        EXPECT_TRUE(bit_equal(read_buffer(attn, "w_o"), expected().at(want.at("o_proj"))));
        Workspace mlp(*backend, build_plan("tp_mlp", "paired", s, 1, DType::f32), 1,
                      l.weights.get());
        EXPECT_TRUE(
            bit_equal(read_buffer(mlp, "w_gate_up"), expected().at(want.at("gate_up_proj"))));
        EXPECT_TRUE(bit_equal(read_buffer(mlp, "w_down"), expected().at(want.at("down_proj"))));
      }
    }
  }
}

namespace {

// A rank's parameter assembled from vllm_narrowing()'s shards of the checkpoint's tensors.
// With `bias`, the column-parallel biases (b_q for w_q, ...) narrowed by the weights' rows.
std::vector<float> assemble(const std::vector<Narrowing>& shards, const HfLayerWeights& w,
                            bool bias = false) {
  // Concatenated along dim 0 (rows) or dim 1 (one shard: the columns).
  std::vector<float> out;
  for (const auto& n : shards) {
    std::string name = n.logical;
    if (bias) name[0] = 'b';
    const std::int64_t lc = bias ? 1 : n.logical_cols;
    const auto win = n.window();
    const auto part =
        w.window({name, BufferRole::weight, n.logical_rows, lc, win.row0, bias ? 0 : win.col0,
                  n.part_rows(), bias ? 1 : (n.dim == 0 ? n.logical_cols : n.size), DType::f32});
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

}  // namespace

TEST(TpNarrowing, PureFunctionOnTheCheckpointEqualsVllmsRankParameters) {
  for (const auto& name : model_names()) {
    const auto& m = expected().manifest.at("models").at(name);
    const Layer l = open_layer(name, m.at("tp_layer").get<int>());
    for (const auto& [tp_text, ranks] : m.at("tp").items()) {
      const int tp = std::stoi(tp_text);
      for (int rank = 0; rank < tp; ++rank) {
        SCOPED_TRACE(name + " tp " + tp_text + " rank " + std::to_string(rank));
        const auto& want = ranks.at(static_cast<std::size_t>(rank));
        const RankNarrowing n = vllm_narrowing(l.shape, tp, rank);
        EXPECT_TRUE(
            bit_equal(assemble(n.qkv_proj, *l.weights), expected().at(want.at("qkv_proj"))));
        EXPECT_TRUE(bit_equal(assemble(n.o_proj, *l.weights), expected().at(want.at("o_proj"))));
        EXPECT_TRUE(bit_equal(assemble(n.gate_up_proj, *l.weights),
                              expected().at(want.at("gate_up_proj"))));
        EXPECT_TRUE(
            bit_equal(assemble(n.down_proj, *l.weights), expected().at(want.at("down_proj"))));
        // A column-parallel bias narrows exactly as its weight's rows.
        if (want.contains("qkv_proj.bias")) {
          EXPECT_TRUE(bit_equal(assemble(n.qkv_proj, *l.weights, true),
                                expected().at(want.at("qkv_proj.bias"))));
        }
      }
    }
  }
}

// The same agreement on every preset and tp size, without a checkpoint: the plans' windows are
// vLLM's narrowing, part by part (name, rows, window), including tp > kv heads.
TEST(TpNarrowing, PlanWindowsAreVllmsNarrowingOnEveryPreset) {
  for (const auto& model : model_presets()) {
    // MLA (the deepseek-v3 preset): vLLM replicates fused_qkv_a_proj, so there is no TP attention
    // pipeline to narrow; tp_attn refuses it, saying why.
    if (model.attention == LayerKind::mla) {
      EXPECT_FALSE(model.refusal("tp_attn").empty()) << model.name;
      continue;
    }
    for (int tp : valid_tp_sizes(model, 16)) {
      for (int rank = 0; rank < tp; ++rank) {
        SCOPED_TRACE(model.name + " tp " + std::to_string(tp) + " rank " + std::to_string(rank));
        // The attention projections, and the dense MLP where the model has one (vllm_narrowing
        // is the dense MLP's; tp_mlp refuses a model without one, the MoE preset).
        ShardShape s = shard(model, tp, model.attention);
        s.rank = rank;
        const bool dense = !op_layers("tp_mlp", model).empty();
        if (dense) {
          s = shard(model, tp, LayerKind::dense);
          s.rank = rank;
        } else {
          EXPECT_FALSE(model.refusal("tp_mlp").empty());
        }
        const RankNarrowing n = vllm_narrowing(model, tp, rank);
        const auto check = [](const Plan& plan, const std::string& buffer,
                              const std::vector<Narrowing>& shards) {
          const auto& b = plan.buffers[static_cast<std::size_t>(buffer_index(plan, buffer))];
          ASSERT_EQ(b.parts.size(), shards.size()) << buffer;
          std::int64_t offset = 0;
          for (std::size_t i = 0; i < shards.size(); ++i) {
            const auto& want = shards[i];
            EXPECT_EQ(b.parts[i], want.logical);
            EXPECT_EQ(b.part_rows[i], want.part_rows()) << want.logical;
            const auto got = b.part_windows.at(i), w = want.window();
            EXPECT_EQ(got.logical_rows, w.logical_rows) << want.logical;
            EXPECT_EQ(got.logical_cols, w.logical_cols) << want.logical;
            EXPECT_EQ(got.row0, w.row0) << want.logical;
            EXPECT_EQ(got.col0, w.col0) << want.logical;
            if (want.dim == 0) {
              EXPECT_EQ(offset, want.param_offset) << want.logical;  // stacked in vLLM's order
              offset += want.size;
            } else {
              EXPECT_EQ(b.cols, want.size) << want.logical;
            }
          }
        };
        check(build_plan("tp_attn", "paired", s, 1, DType::f32), "w_qkv", n.qkv_proj);
        check(build_plan("tp_attn", "paired", s, 1, DType::f32), "w_o", n.o_proj);
        if (!dense) continue;
        check(build_plan("tp_mlp", "paired", s, 1, DType::f32), "w_gate_up", n.gate_up_proj);
        check(build_plan("tp_mlp", "paired", s, 1, DType::f32), "w_down", n.down_proj);
      }
    }
  }
  EXPECT_THROW(vllm_narrowing(find_model("qwen3-0.6b"), 3, 0), std::invalid_argument);
  EXPECT_THROW(vllm_narrowing(find_model("qwen3-0.6b"), 2, 2), std::invalid_argument);
}

// Every hostile input is refused with a CheckpointError whose message names the file and (where
// the fault is in one) the tensor; under ASan this also proves no read strays out of bounds.
TEST(Hostile, EveryCaseIsRefusedNamingFileAndTensor) {
  const auto& cases = expected().manifest.at("hostile");
  ASSERT_GE(cases.size(), 30u);
  for (const auto& c : cases) {
    const std::string name = c.at("name"), kind = c.at("kind");
    SCOPED_TRACE(name);
    const std::string path = (kDir / c.at("path").get<std::string>()).string();
    std::string message;
    try {
      if (kind == "file") {
        SafetensorsFile file(path);
      } else if (kind == "checkpoint") {
        Checkpoint checkpoint(path);
      } else {
        const auto checkpoint = std::make_shared<Checkpoint>(path);
        const ModelShape shape = shape_of(c, name);
        HfLayerWeights layer(checkpoint, find_layer_family(c.at("model_type").get<std::string>()),
                             shape, c.at("layer"));
        if (kind == "window") {
          const auto& r = c.at("request");
          const std::string tensor = r.at("tensor");
          const WindowRequest all{tensor,
                                  BufferRole::weight,
                                  shape.q_size(),
                                  shape.hidden,
                                  0,
                                  0,
                                  shape.q_size(),
                                  shape.hidden,
                                  parse_dtype(r.at("fine_in").get<std::string>())};
          EXPECT_NO_THROW(layer.window(all));
          WindowRequest narrow = all;
          narrow.dtype = parse_dtype(r.at("dtype").get<std::string>());
          layer.window(narrow);
        }
      }
      ADD_FAILURE() << name << " was accepted";
      continue;
    } catch (const CheckpointError& e) {
      message = e.what();
    }
    for (const auto& want : c.at("expect")) {
      EXPECT_NE(message.find(want.get<std::string>()), std::string::npos)
          << "expected " << want << " in: " << message;
    }
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line, control bytes escaped";
  }
}

TEST(Official, ReadsACheckpointTheSafetensorsPackageWrote) {
  const auto& o = expected().manifest.at("official");
  if (!o.at("available").get<bool>()) GTEST_SKIP() << o.at("reason").get<std::string>();
  const auto checkpoint =
      std::make_shared<Checkpoint>((kDir / o.at("dir").get<std::string>()).string());
  const ModelShape shape = shape_of(o, "official");
  const HfLayerWeights layer(checkpoint, find_layer_family(o.at("model_type").get<std::string>()),
                             shape, o.at("layer"));
  EXPECT_EQ(layer.stored_dtype(), TensorDtype::F16);
  EXPECT_EQ(checkpoint->files().front()->header().metadata.at("format"), "pt");
  for (const auto& [tensor, ref] : o.at("logical").items()) {
    SCOPED_TRACE(tensor);
    const std::int64_t rows = ref.at("shape")[0], cols = ref.at("shape")[1];
    EXPECT_TRUE(bit_equal(
        layer.window({tensor, BufferRole::weight, rows, cols, 0, 0, rows, cols, DType::f16}),
        expected().at(ref)));
  }
}

// ---------------------------------------------------------------- MoE and MLA checkpoints

namespace {

struct MoeLayer {
  ModelShape shape;
  std::unique_ptr<HfLayerWeights> weights;
};

const nlohmann::json& moe_model(const std::string& name) {
  return expected().manifest.at("moe_models").at(name);
}

// The model as fusebench reads it: from the directory's config.json.
MoeLayer open_moe_layer(const std::string& name, int layer, std::int64_t expert = 0) {
  const auto& m = moe_model(name);
  const fs::path dir = kDir / m.at("dir").get<std::string>();
  MoeLayer l;
  l.shape = load_hf_config((dir / "config.json").string());
  l.weights =
      std::make_unique<HfLayerWeights>(std::make_shared<Checkpoint>(dir.string()),
                                       find_layer_family(l.shape.family), l.shape, layer, expert);
  return l;
}

}  // namespace

TEST(MoeCheckpoints, EveryExpertsLogicalTensorsAreTheCheckpointsTensors) {
  for (const auto& [name, m] : expected().manifest.at("moe_models").items()) {
    for (const auto& [layer, experts] : m.at("logical").items()) {
      for (const auto& [expert, logical] : experts.items()) {
        SCOPED_TRACE(name + " layer " + layer + " expert " + expert);
        const MoeLayer l = open_moe_layer(name, std::stoi(layer), std::stoll(expert));
        std::size_t served = 0;
        for (const auto& [tensor, ref] : logical.items()) {
          SCOPED_TRACE(tensor);
          ASSERT_TRUE(l.weights->has(tensor));
          const auto& shape = ref.at("shape");
          const std::int64_t rows = shape[0],
                             cols = shape.size() > 1 ? shape[1].get<std::int64_t>() : 1;
          EXPECT_TRUE(bit_equal(l.weights->window({tensor, BufferRole::weight, rows, cols, 0, 0,
                                                   rows, cols, DType::f32}),
                                expected().at(ref)));
          ++served;
        }
        // Exactly those: a dense layer serves no expert tensor, an MoE layer no dense one.
        EXPECT_EQ(l.weights->sources().size(), served);
      }
    }
  }
}

TEST(MoeCheckpoints, ADecoderLayerServesTheMlpLayersTheConfigPutsThere) {
  const MoeLayer dense = open_moe_layer("deepseek_mla", 0);  // first_k_dense_replace = 1
  EXPECT_TRUE(dense.weights->serves(LayerKind::mla));
  EXPECT_TRUE(dense.weights->serves(LayerKind::dense));
  EXPECT_FALSE(dense.weights->serves(LayerKind::expert));
  EXPECT_NE(dense.weights->not_served_reason(LayerKind::expert).find("first_k_dense_replace=1"),
            std::string::npos)
      << dense.weights->not_served_reason(LayerKind::expert);
  const MoeLayer moe = open_moe_layer("deepseek_mla", 1);
  EXPECT_FALSE(moe.weights->serves(LayerKind::dense));
  EXPECT_TRUE(moe.weights->serves(LayerKind::expert));
  EXPECT_TRUE(moe.weights->serves(LayerKind::shared_expert));
  EXPECT_EQ(moe.weights->sources().at("w_expert_up"),
            "model.layers.1.mlp.experts.0.up_proj.weight");
  EXPECT_EQ(moe.weights->sources().at("w_shared_expert_down"),
            "model.layers.1.mlp.shared_experts.down_proj.weight");
  EXPECT_EQ(open_moe_layer("mixtral_moe", 0, 2).weights->sources().at("w_expert_gate"),
            "model.layers.0.block_sparse_moe.experts.2.w1.weight");
  EXPECT_EQ(open_moe_layer("qwen2_moe_shared", 0).weights->sources().at("w_shared_expert_gate"),
            "model.layers.0.mlp.shared_expert.gate_proj.weight");
  // The placement rules themselves, on the family configs (vLLM's conditions).
  const auto kinds = [](const std::string& config, std::int64_t layer) {
    return load_hf_config(std::string(FUSEBENCH_TEST_CONFIGS) + "/" + config).mlp_kinds_at(layer);
  };
  using K = LayerKind;
  EXPECT_EQ(kinds("deepseek-v2-lite.json", 0), std::vector<K>{K::dense});
  EXPECT_EQ(kinds("deepseek-v2-lite.json", 1), (std::vector<K>{K::expert, K::shared_expert}));
  EXPECT_EQ(kinds("qwen3-30b-a3b.json", 0), std::vector<K>{K::expert});
  EXPECT_EQ(kinds("qwen1.5-moe-a2.7b.json", 5), (std::vector<K>{K::expert, K::shared_expert}));
  EXPECT_EQ(kinds("mixtral-8x7b.json", 31), std::vector<K>{K::expert});
  EXPECT_EQ(kinds("llama-3.1-8b.json", 3), std::vector<K>{K::dense});
  // An expert the model does not have is refused naming the count.
  try {
    open_moe_layer("qwen3_moe", 1, 4);
    ADD_FAILURE() << "expert 4 of 4 was accepted";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("4 routed experts: 0 to 3"), std::string::npos)
        << e.what();
  }
  // gpt-oss's experts are not mapped: the reason says why.
  const auto& gpt_oss = find_layer_family("gpt_oss");
  ASSERT_EQ(gpt_oss.unmapped.size(), 1u);
  EXPECT_NE(gpt_oss.unmapped.front().second.find("3-D"), std::string::npos);
}

// One routed expert's w13 and w2 on each rank, as fusebench's gate_up plan and the TP narrowing
// of FusedMoE (intermediate split by tp) cut them, equal vLLM's FusedMoE weight loader's.
TEST(MoeCheckpoints, ExpertRankWindowsEqualVllmsFusedMoeLoader) {
  auto backend = make_cpu_backend();
  for (const auto& [name, m] : expected().manifest.at("moe_models").items()) {
    const MoeLayer l =
        open_moe_layer(name, m.at("tp_layer").get<int>(), m.at("tp_expert").get<std::int64_t>());
    for (const auto& [tp_text, ranks] : m.at("tp").items()) {
      const int tp = std::stoi(tp_text);
      for (int rank = 0; rank < tp; ++rank) {
        SCOPED_TRACE(name + " tp " + tp_text + " rank " + std::to_string(rank));
        ShardShape s = shard(l.shape, tp, LayerKind::expert);
        s.rank = rank;
        Workspace ws(*backend, build_plan("gate_up", "fused", s, 1, DType::f32), 1,
                     l.weights.get());
        const auto& want = ranks.at(static_cast<std::size_t>(rank));
        EXPECT_TRUE(bit_equal(read_buffer(ws, "w_gate_up"), expected().at(want.at("w13"))));
        // w2 (down) narrows by input columns, as RowParallelLinear does.
        const std::int64_t inter = s.intermediate, h = s.hidden;
        EXPECT_TRUE(bit_equal(l.weights->window({"w_expert_down", BufferRole::weight, h, inter * tp,
                                                 0, rank * inter, h, inter, DType::f32}),
                              expected().at(want.at("w2"))));
      }
    }
  }
}

TEST(MoeCheckpoints, FusedEqualsSplitAndFloat64OnExpertAndMlaWeights) {
  auto backend = make_cpu_backend();
  for (const auto& [model, layer] : std::vector<std::pair<std::string, int>>{
           {"qwen3_moe", 1}, {"qwen2_moe_shared", 0}, {"mixtral_moe", 0}, {"deepseek_mla", 1}}) {
    const MoeLayer l = open_moe_layer(model, layer, 2);
    std::vector<std::pair<std::string, LayerKind>> fixtures = {{"qkv", l.shape.attention}};
    for (LayerKind k : l.shape.mlp_kinds_at(layer)) fixtures.push_back({"gate_up", k});
    for (const auto& [op, kind] : fixtures) {
      SCOPED_TRACE(model + " " + op + " " + std::string(to_string(kind)));
      const ShardShape s = shard(l.shape, 1, kind);
      for (const auto& r : verify_op(*backend, op, s, 4, DType::f32, 5, true, 0, l.weights.get()))
        EXPECT_TRUE(r.ok() && r.checked()) << r.summary();
    }
  }
}
