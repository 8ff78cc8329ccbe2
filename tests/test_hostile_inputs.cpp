// Hostile inputs through the fusebench binary (issue 27): one row per input, with the files it
// needs, the exit code and the fragments the message must (and must not) hold. Each row names the
// bad value; none measures anything. Adding a case is adding a row.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cli_run.hpp"

namespace {

namespace fs = std::filesystem;
using fusebench::testing::CliResult;

// A file a case needs, under the case's own temporary directory.
struct CaseFile {
  enum Kind { text, directory, fifo, symlink };
  std::string path;     // relative to the case directory
  std::string content;  // for text: written as is (bytes); for a symlink: its target
  Kind kind = text;
};

struct HostileCase {
  std::string what;  // the issue item and the input, for the failure message
  std::string args;  // fusebench's flags; {dir} is the case directory
  std::vector<CaseFile> files;
  int exit_code = 2;
  std::vector<std::string> says;        // fragments the output must hold
  std::vector<std::string> never = {};  // fragments it must not hold
};

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

void make_files(const fs::path& dir, const std::vector<CaseFile>& files) {
  for (const CaseFile& f : files) {
    const fs::path p = dir / f.path;
    fs::create_directories(p.parent_path());
    switch (f.kind) {
      case CaseFile::directory:
        fs::create_directories(p);
        break;
      case CaseFile::fifo:
        ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0) << p << ": " << std::strerror(errno);
        break;
      case CaseFile::text:
        std::ofstream(p, std::ios::binary) << f.content;
        break;
      case CaseFile::symlink:
        fs::create_symlink(f.content, p);
        break;
    }
  }
}

void check(const HostileCase& c, std::size_t row) {
  const fs::path dir = fusebench::testing::temp_path("fusebench_hostile", std::to_string(row));
  fs::remove_all(dir);
  fs::create_directories(dir);
  make_files(dir, c.files);
  const std::string args = replace_all(c.args, "{dir}", dir.string());
  const CliResult r = fusebench::testing::run_fusebench("--backend=cpu " + args);
  SCOPED_TRACE(c.what + "\n  fusebench --backend=cpu " + args + "\n" + r.output);
  EXPECT_EQ(r.exit_code, c.exit_code);
  if (c.exit_code == 2) {
    EXPECT_NE(r.output.find("fusebench: error: "), std::string::npos);
    EXPECT_EQ(r.output.find("elapsed"), std::string::npos);  // nothing measured
  }
  for (const auto& said : c.says) {
    const std::string s = replace_all(said, "{dir}", dir.string());
    EXPECT_NE(r.output.find(s), std::string::npos) << "missing: " << s;
  }
  for (const auto& s : c.never) EXPECT_EQ(r.output.find(s), std::string::npos) << "present: " << s;
  fs::remove_all(dir);
}

// A small valid Llama config (one layer), and the same with `tail` spliced in before the '}'.
std::string llama_config(const std::string& tail = "") {
  return R"({"model_type": "llama", "hidden_size": 8, "num_attention_heads": 2,
             "num_key_value_heads": 1, "head_dim": 4, "intermediate_size": 8,
             "num_hidden_layers": 1)" +
         tail + "}";
}

std::string moe_config(const std::string& top_k) {
  return R"({"model_type": "qwen3_moe", "hidden_size": 64, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96,
             "moe_intermediate_size": 32, "num_experts": 4, "num_experts_per_tok": )" +
         top_k + R"(, "decoder_sparse_step": 1, "mlp_only_layers": [], "num_hidden_layers": 2})";
}

// model.safetensors of llama_config()'s layer 0 in F32, every value 0.01, but `poisoned` (a
// tensor name) holds `bad` (4 bytes, little-endian F32) at flat element `at`.
std::string llama_safetensors(const std::string& poisoned, std::size_t at, const char* bad) {
  const std::vector<std::pair<std::string, std::pair<int, int>>> tensors = {
      {"q_proj", {8, 8}},    {"k_proj", {4, 8}},  {"v_proj", {4, 8}},   {"o_proj", {8, 8}},
      {"gate_proj", {8, 8}}, {"up_proj", {8, 8}}, {"down_proj", {8, 8}}};
  std::string header = "{", data;
  for (const auto& [short_name, shape] : tensors) {
    const bool attn = short_name.find("_proj") == 1;  // q, k, v, o
    const std::string name =
        "model.layers.0." + std::string(attn ? "self_attn." : "mlp.") + short_name + ".weight";
    const std::size_t begin = data.size();
    for (int i = 0; i < shape.first * shape.second; ++i) {
      const float v = 0.01f;
      char bytes[4];
      std::memcpy(bytes, &v, 4);
      if (name == poisoned && static_cast<std::size_t>(i) == at) std::memcpy(bytes, bad, 4);
      data.append(bytes, 4);
    }
    header += std::string(header.size() > 1 ? ", " : "") + "\"" + name +
              "\": {\"dtype\": \"F32\", \"shape\": [" + std::to_string(shape.first) + ", " +
              std::to_string(shape.second) + "], \"data_offsets\": [" + std::to_string(begin) +
              ", " + std::to_string(data.size()) + "]}";
  }
  header += "}";
  std::string length(8, '\0');
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return length + header + data;
}

// moe_config with the router fields the moe op reads: a model the moe op runs.
std::string moe_run_config() {
  std::string c = moe_config("2");
  c.insert(c.rfind('}'), R"(, "norm_topk_prob": true)");
  return c;
}

constexpr char kNaN[4] = {0, 0, '\xc0', '\x7f'};  // F32 quiet NaN, little-endian
constexpr char kInf[4] = {0, 0, '\x80', '\x7f'};  // F32 +Inf

}  // namespace

TEST(HostileInputs, EachIsRefusedNamingTheBadValue) {
  const std::string k_proj = "model.layers.0.self_attn.k_proj.weight";
  const std::vector<CaseFile> llama = {{"m/config.json", llama_config()}};
  const auto with_llama = [&](std::vector<CaseFile> more) {
    more.insert(more.begin(), llama.begin(), llama.end());
    return more;
  };
  const std::vector<HostileCase> cases = {
      // Item 2: sizes that overflow 63 bits are refused before anything is listed or allocated,
      // naming the token count and the limit; what fits 63 bits meets the memory check.
      {"27.2 tokens 2^62 (segfaulted)",
       "--ops=qkv --tokens=4611686018427387904 --dtypes=fp32",
       {},
       2,
       {"--tokens=4611686018427387904", "exceeds the size limit 9223372036854775807 (2^63-1)"}},
      {"27.2 tokens 2^52 (vector max_size)",
       "--ops=qkv --tokens=4503599627370496 --dtypes=fp32",
       {},
       2,
       {"--tokens=4503599627370496", "(2^63-1)", "use fewer tokens"},
       {"max_size"}},
      {"27.2 --list-bytes (printed a wrapped count)",
       "--list --list-bytes --ops=qkv --tokens=4503599627370496 --dtypes=fp32",
       {},
       2,
       {"--tokens=4503599627370496", "(2^63-1)"}},
      {"27.2 plain --list of an overflowing size",
       "--list --ops=gate_up --tokens=4611686018427387904",
       {},
       2,
       {"--tokens=4611686018427387904"}},
      {"27.2 sequence-parallel padding of 2^63-1 tokens",
       "--list --ops=tp_mlp --variants=sp --tp=2 --tokens=9223372036854775807",
       {},
       2,
       {"--tokens=9223372036854775807 padded to a multiple of tp=2", "(2^63-1)"}},
      {"27.2 2^40 tokens: fits 63 bits, refused by the memory check",
       "--ops=qkv --tokens=1099511627776 --dtypes=fp32",
       {},
       2,
       {"free", "use fewer tokens"}},
      // Item 6: top-k routing beyond the routed experts, or none.
      {"27.6 num_experts_per_tok 9 of 4",
       "--model-config={dir}/moe.json --list",
       {{"moe.json", moe_config("9")}},
       2,
       {"'num_experts_per_tok' = 9", "num_experts = 4"}},
      {"27.6 num_experts_per_tok 0",
       "--model-config={dir}/moe.json --list",
       {{"moe.json", moe_config("0")}},
       2,
       {"'num_experts_per_tok' = 0", "num_experts = 4"}},
      {"27.6 num_experts_per_tok -1",
       "--model-config={dir}/moe.json --list",
       {{"moe.json", moe_config("-1")}},
       2,
       {"'num_experts_per_tok' = -1", "[1, 4]"}},
      // Item 7: a key given twice, at the top and nested.
      {"27.7 hidden_size twice",
       "--model-config={dir}/dup.json --list",
       {{"dup.json", llama_config(R"(, "hidden_size": 128)")}},
       2,
       {"key 'hidden_size' appears twice"}},
      {"27.7 a nested key twice",
       "--model-config={dir}/dup.json --list",
       {{"dup.json", llama_config(R"(, "rope_scaling": {"factor": 2, "factor": 4})")}},
       2,
       {"key 'factor' appears twice in 'rope_scaling'"}},
      // Item 8: no model_type: refused, not read with Llama's rules.
      {"27.8 no model_type",
       "--model-config={dir}/none.json --list",
       {{"none.json", R"({"hidden_size": 8, "num_attention_heads": 2, "intermediate_size": 8,
                          "architectures": ["LlamaForCausalLM"]})"}},
       2,
       {"missing field 'model_type'", "LlamaForCausalLM"}},
      // Item 9: combinations that do nothing, and empty list items.
      {"27.9 --list --verify", "--list --verify", {}, 2, {"--list and --verify"}},
      {"27.9 trailing comma", "--tokens=1, --list", {}, 2, {"--tokens: item 2 of '1,' is empty"}},
      {"27.9 empty middle item",
       "--ops=qkv,,gate_up --list",
       {},
       2,
       {"--ops: item 2 of 'qkv,,gate_up' is empty"}},
      {"27.9 leading comma, value after a space",
       "--models ,qwen3-0.6b --list",
       {},
       2,
       {"--models: item 1 of ',qwen3-0.6b' is empty"}},
      {"27.9 --dtypes", "--dtypes=fp32,, --list", {}, 2, {"--dtypes: item 2"}},
      // Item 10: non-finite weights, refused at load naming tensor, flat and multi-dim index.
      {"27.10 NaN weight",
       "--weights={dir}/m --ops=qkv --tokens=1 --verify",
       with_llama({{"m/model.safetensors", llama_safetensors(k_proj, 19, kNaN)}}),
       2,
       {k_proj, "nan at element 19 (index [2, 3] of shape [4, 8]) is not finite"}},
      {"27.10 Inf weight",
       "--weights={dir}/m --ops=gate_up --tokens=1",
       with_llama({{"m/model.safetensors",
                    llama_safetensors("model.layers.0.mlp.up_proj.weight", 63, kInf)}}),
       2,
       {"up_proj.weight", "inf at element 63 (index [7, 7]"}},
      // Item 11: checkpoint files that are not what they should be, and untrusted text.
      {"27.11 index entry '.'",
       "--weights={dir}/m --list",
       with_llama(
           {{"m/model.safetensors.index.json", R"({"weight_map": {")" + k_proj + R"(": "."}})"}}),
       2,
       {"refers to '.'", "is a directory; expected a regular file"},
       {"does not exist"}},
      {"27.11 model.safetensors a directory",
       "--weights={dir}/m --list",
       with_llama({{"m/model.safetensors", "", CaseFile::directory}}),
       2,
       {"model.safetensors is a directory; expected a regular file"}},
      {"27.11 model.safetensors a fifo",
       "--weights={dir}/m --list",
       with_llama({{"m/model.safetensors", "", CaseFile::fifo}}),
       2,
       {"model.safetensors is a fifo; expected a regular file"}},
      {"27.11 index naming itself",
       "--weights={dir}/m --list",
       with_llama({{"m/model.safetensors.index.json",
                    R"({"weight_map": {")" + k_proj + R"(": "model.safetensors.index.json"}})"}}),
       2,
       {"maps to the index itself"}},
      {"27.11 a JSON file as a shard",
       "--weights={dir}/m --list",
       with_llama({{"m/model.safetensors.index.json",
                    R"({"weight_map": {")" + k_proj + R"(": "x.safetensors"}})"},
                   {"m/x.safetensors", R"({"weight_map": {}})"}}),
       2,
       {"not a safetensors file but JSON"}},
      {"27.11 NUL in model_type",
       "--model-config={dir}/nul.json --list",
       {{"nul.json", R"({"model_type": "llama\u0000evil", "hidden_size": 8})"}},
       2,
       {"model_type 'llama\\x00evil' is not a family"}},
      {"27.11 invalid UTF-8",
       "--model-config={dir}/utf8.json --list",
       {{"utf8.json", "{\"model_type\": \"ll\xff\xfe\", \"hidden_size\": 8}"}},
       2,
       {"not valid JSON", "\\xff"},
       {"\xff"}},
      {"27.11 --model-config a fifo",
       "--model-config={dir}/fifo.json --list",
       {{"fifo.json", "", CaseFile::fifo}},
       2,
       {"fifo.json' is a fifo; expected a regular file"}},
      // Item 3: output paths that would destroy what they name (fusebench/output_path.hpp).
      {"27.3 --report over the --model-config it reads",
       "--model-config={dir}/m/config.json --report={dir}/m/config.json --ops=qkv --tokens=1",
       llama,
       2,
       {"--report=", "is a --model-config file", "never replaces an input"}},
      {"27.3 --report over a checkpoint's config.json",
       "--weights={dir}/m --report={dir}/m/config.json --ops=qkv --tokens=1",
       with_llama({{"m/model.safetensors", llama_safetensors("", 0, kNaN)}}),
       2,
       {"is read by --weights", "never replaces an input"}},
      {"27.3 --report a closed descriptor",
       "--ops=qkv --tokens=1 --report=/dev/fd/987",
       {},
       2,
       {"--report=/dev/fd/987: descriptor 987 is not open"}},
      {"27.3 --report a new file under /dev",
       "--ops=qkv --tokens=1 --report=/dev/fusebench-no-such-disk",
       {},
       2,
       {"no file is created under /dev/"}},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) check(cases[i], i);
}

// Item 3 end to end: --report=- and /dev/stdout print the report to stdout (the rows go to
// stderr) and leave /dev/stdout a symlink; a symlinked --report updates its target.
TEST(HostileInputs, ReportPathsWriteWhatTheyNameAndReplaceNothingElse) {
  const std::string run =
      "--ops=qkv --variants=fused --tokens=1 --dtypes=fp32 "
      "--timing-max-time=0.02 --timing-blocks=1 --launch-counts=off ";
  for (const std::string stdout_name : {"-", "/dev/stdout"}) {
    const CliResult r =
        fusebench::testing::run_fusebench("--backend=cpu " + run + "--report=" + stdout_name);
    SCOPED_TRACE(r.output);
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_NE(r.output.find("goes to standard output"), std::string::npos);
    EXPECT_NE(r.output.find("\"benchmarks\": ["), std::string::npos);
  }
  struct stat st {};
  ASSERT_EQ(::lstat("/dev/stdout", &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  const fs::path dir = fusebench::testing::temp_path("fusebench_hostile", "symlink");
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "target.json") << "{}";
  fs::create_symlink("target.json", dir / "link.json");
  const CliResult r = fusebench::testing::run_fusebench("--backend=cpu " + run +
                                                        "--report=" + (dir / "link.json").string());
  SCOPED_TRACE(r.output);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
  std::ifstream in(dir / "target.json");
  const std::string written{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  EXPECT_NE(written.find("\"benchmarks\""), std::string::npos);
  fs::remove_all(dir);
}

// The rows above must not refuse what is valid: the same inputs, made right, run.
TEST(HostileInputs, TheValidNeighboursStillRun) {
  const std::vector<HostileCase> cases = {
      {"top_k equal to the expert count",
       "--model-config={dir}/moe.json --list",
       {{"moe.json", moe_config("4")}},
       0,
       {"model:moe/"}},
      {"a finite checkpoint verifies",
       "--weights={dir}/m --ops=qkv --tokens=1 --verify "
       "--timing-max-time=0.02 --timing-blocks=1 --launch-counts=off",
       {{"m/config.json", llama_config()}, {"m/model.safetensors", llama_safetensors("", 0, kNaN)}},
       0,
       {"verification passed"}},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) check(cases[i], 100 + i);
}

// Issue 37: every file the run reads is protected, every reader is bounded. One row per case of
// the issue; each failed before the fix (data replaced, a crash, a hang, a silent wrong result).
TEST(HostileInputs, Issue37InputsAreProtectedAndReadersBounded) {
  const std::string moe = "--model-config={dir}/moe.json --ops=moe ";
  const CaseFile moe_json{"moe.json", moe_run_config()};
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::vector<HostileCase> cases = {
      // Outputs over inputs: --benchmark_out went to Google Benchmark unchecked.
      {"37 --benchmark_out over the --model-config",
       "--model-config={dir}/m/config.json --benchmark_out={dir}/m/config.json --ops=qkv "
       "--tokens=1",
       {{"m/config.json", llama_config()}},
       2,
       {"--benchmark_out={dir}/m/config.json is a --model-config file", "never replaces an input"}},
      {"37 --benchmark_out over the routing file",
       moe + "--routing=file:{dir}/r.json --tokens=4 --benchmark_out={dir}/r.json",
       {moe_json, {"r.json", R"({"tokens_per_expert": [2, 2, 2, 2]})"}},
       2,
       {"--benchmark_out={dir}/r.json is the --routing=file: file", "never replaces an input"}},
      {"37 --report over the routing file",
       moe + "--routing=file:{dir}/r.json --tokens=4 --report={dir}/r.json",
       {moe_json, {"r.json", R"({"tokens_per_expert": [2, 2, 2, 2]})"}},
       2,
       {"--report={dir}/r.json is the --routing=file: file"}},
      {"37 --benchmark_out over a checkpoint's model.safetensors",
       "--weights={dir}/m --ops=qkv --tokens=1 --benchmark_out={dir}/m/model.safetensors",
       {{"m/config.json", llama_config()}, {"m/model.safetensors", llama_safetensors("", 0, kNaN)}},
       2,
       {"model.safetensors is read by --weights"}},
      {"37 --report and --benchmark_out at one path",
       "--ops=qkv --tokens=1 --report={dir}/run.json --benchmark_out={dir}/run.json",
       {},
       2,
       {"--benchmark_out={dir}/run.json is the file --report={dir}/run.json writes"}},
      {"37 --report and --benchmark_out at one path, through a symlink",
       "--ops=qkv --tokens=1 --report={dir}/run.json --benchmark_out={dir}/link.json",
       {{"run.json", "{}"}, {"link.json", "run.json", CaseFile::symlink}},
       2,
       {"is the file --report={dir}/run.json writes"}},
      // Readers bounded: /dev/zero, a fifo, 100,000 levels of JSON.
      {"37 --routing=file:/dev/zero (read until the OOM killer)",
       moe + "--routing=file:/dev/zero --tokens=4 --list",
       {moe_json},
       2,
       {"/dev/zero: is a character device", "256 MiB"}},
      {"37 --routing=file: a fifo (blocked in open)",
       moe + "--routing=file:{dir}/fifo.json --tokens=4 --list",
       {moe_json, {"fifo.json", "", CaseFile::fifo}},
       2,
       {"fifo.json: is a fifo"}},
      {"37 --routing=file: nested 100,000 deep (segfault)",
       moe + "--routing=file:{dir}/deep.json --tokens=4 --list",
       {moe_json, {"deep.json", deep}},
       2,
       {"JSON nested deeper than 64 levels"}},
      {"37 --model-config nested 100,000 deep",
       "--model-config={dir}/deep.json --list",
       {{"deep.json", R"({"a": )" + deep + "}"}},
       2,
       {"JSON nested deeper than 64 levels"}},
      // The routing file's keys.
      {"37 routing file: an unknown key",
       moe + "--routing=file:{dir}/r.json --tokens=4 --list",
       {moe_json, {"r.json", R"({"tokens_per_expert": [2, 2, 2, 2], "expert_idz": [[0, 1]]})"}},
       2,
       {"unknown key \"expert_idz\""}},
      {"37 routing file: expert_ids twice",
       moe + "--routing=file:{dir}/r.json --tokens=4 --list",
       {moe_json, {"r.json", R"({"expert_ids": [[0, 1]], "expert_ids": [[2, 3]]})"}},
       2,
       {"key \"expert_ids\" appears twice"}},
      {"37 tokens_per_expert 2^64-1 printed as read",
       moe + "--routing=file:{dir}/r.json --tokens=4 --list",
       {moe_json, {"r.json", R"({"tokens_per_expert": [18446744073709551615, 0, 0, 0]})"}},
       2,
       {"tokens_per_expert[0] = 18446744073709551615 is not in 0..M=4"},
       {"= -1"}},
      // Flags of one op with no op asked that uses them.
      {"37 --routing without --ops=moe",
       "--routing=uniform --list",
       {},
       2,
       {"--routing=uniform applies to the moe op only", "--ops=moe"}},
      {"37 a malformed routing file without --ops=moe",
       "--ops=qkv --routing=file:{dir}/r.json --list",
       {{"r.json", "{"}},
       2,
       {"applies to the moe op only"}},
      // The MoE block in the memory preflight.
      {"37 --ops=moe --tokens=2^30 --list (allocated until killed)",
       "--models=qwen3-30b-a3b --ops=moe --tokens=1073741824 --list",
       {},
       2,
       {"routing 1073741824 tokens", "of host memory", "use fewer tokens"},
       {"bad_alloc"}},
      {"37 --ops=moe --tokens=2^36 --list (bare std::bad_alloc)",
       "--models=qwen3-30b-a3b --ops=moe --tokens=68719476736 --list",
       {},
       2,
       {"routing 68719476736 tokens", "use fewer tokens"},
       {"bad_alloc"}},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) check(cases[i], 200 + i);
}

// Issue 37's valid neighbours: what crashed or was refused and is valid runs.
TEST(HostileInputs, Issue37ValidInputsRun) {
  const std::string moe = "--model-config={dir}/moe.json --ops=moe ";
  const CaseFile moe_json{"moe.json", moe_run_config()};
  std::vector<HostileCase> cases;
  for (const std::string s : {"1100", "1e10", "1e308"}) {
    cases.push_back({"37 zipf:" + s + " (free(): invalid pointer)",
                     moe + "--routing=zipf:" + s + " --tokens=1,16 --list",
                     {moe_json},
                     0,
                     {"moe/"}});
  }
  cases.push_back({"37 zipf:400 on qwen3-30b-a3b",
                   "--models=qwen3-30b-a3b --ops=moe --routing=zipf:400 --tokens=1,64 --list",
                   {},
                   0,
                   {"moe/"}});
  cases.push_back({"37 a tokens_per_expert file valid at --tokens=16 (refused at M=1)",
                   moe + "--routing=file:{dir}/r.json --tokens=16 --list",
                   {moe_json, {"r.json", R"({"tokens_per_expert": [16, 8, 8, 0]})"}},
                   0,
                   {"tokens:16"}});
  for (std::size_t i = 0; i < cases.size(); ++i) check(cases[i], 300 + i);
}

// A tokens_per_expert file at a token count it does not fit is refused naming the run's M.
TEST(HostileInputs, Issue37TokensPerExpertIsCheckedAtTheSweepsTokenCounts) {
  check({"37 tokens_per_expert at --tokens=1,16",
         "--model-config={dir}/moe.json --ops=moe --routing=file:{dir}/r.json --tokens=1,16 --list",
         {{"moe.json", moe_run_config()}, {"r.json", R"({"tokens_per_expert": [16, 8, 8, 0]})"}},
         2,
         {"tokens_per_expert[0] = 16 is not in 0..M=1"}},
        400);
}

// --benchmark_out is written by the suite, and a failed write is exit 2 naming it.
TEST(HostileInputs, Issue37BenchmarkOutIsCheckedAndWritten) {
  const std::string run =
      "--backend=cpu --ops=qkv --variants=fused --tokens=1 --dtypes=fp32 "
      "--timing-max-time=0.02 --timing-blocks=1 --launch-counts=off ";
  const fs::path dir = fusebench::testing::temp_path("fusebench_hostile", "gbench_out");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const CliResult ok = fusebench::testing::run_fusebench(
      run + "--report=" + (dir / "r.json").string() +
      " --benchmark_out=" + (dir / "g.json").string() + " --benchmark_out_format=json");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  const nlohmann::json g = fusebench::testing::load_json(dir / "g.json");
  EXPECT_TRUE(g.contains("context")) << g.dump();
  ASSERT_TRUE(g.contains("benchmarks")) << g.dump();
  EXPECT_FALSE(g["benchmarks"].empty());
  fs::remove_all(dir);
  if (::access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full here";
  const CliResult full = fusebench::testing::run_fusebench(run + "--benchmark_out=/dev/full");
  EXPECT_EQ(full.exit_code, 2) << full.output;
  EXPECT_NE(full.output.find("--benchmark_out=/dev/full: cannot write /dev/full: " +
                             std::string(std::strerror(ENOSPC))),
            std::string::npos)
      << full.output;
}

// A fifo without a reader as --report or --benchmark_out: exit 2 at once, never blocked (the
// open used to wait with the signals masked, so SIGTERM did nothing).
TEST(HostileInputs, Issue37AnOutputFifoWithoutAReaderNeverBlocks) {
  const fs::path dir = fusebench::testing::temp_path("fusebench_hostile", "out_fifo");
  fs::remove_all(dir);
  fs::create_directories(dir);
  ASSERT_EQ(::mkfifo((dir / "out").c_str(), 0600), 0);
  for (const std::string flag : {"--report", "--benchmark_out"}) {
    const CliResult r = fusebench::testing::run_command(
        "timeout -s KILL 60 " + std::string(FUSEBENCH_BIN_DIR) +
        "/fusebench --backend=cpu --ops=qkv --variants=fused --tokens=1 --dtypes=fp32 "
        "--timing-max-time=0.02 --timing-blocks=1 --launch-counts=off " +
        flag + "=" + (dir / "out").string() + " 2>&1");
    EXPECT_EQ(r.exit_code, 2) << flag << ": " << r.output;
    EXPECT_NE(r.output.find("no reader"), std::string::npos) << r.output;
  }
  fs::remove_all(dir);
}
