// fp8 and int8 through the command line (issue 29): a tiny CPU run with --verify, its entries'
// quant fields, and the refusals.
#include <gtest/gtest.h>

#include "cli_run.hpp"

namespace fusebench::testing {
namespace {

TEST(QuantCli, Fp8AndInt8RunVerifiedWithAccuracyAndEmulatedLabel) {
  const auto path = temp_path("quant_cli", "report.json");
  const CliResult r = run_fusebench(
      "--backend=cpu --models=qwen3-0.6b --ops=qkv,gate_up --dtypes=fp8,int8:channel "
      "--tokens=1 --verify --timing-max-time=0.05 --report=" +
      path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("qkv/fused_channelwise: OK (vs float64_dequantized"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(" emulated"), std::string::npos);  // the console label
  const auto report = load_json(path);
  int entries = 0;
  for (const auto& e : report["benchmarks"]) {
    const std::string dtype = e["dtype"];
    ASSERT_TRUE(dtype == "fp8:tensor" || dtype == "int8:channel") << dtype;
    ++entries;
    EXPECT_EQ(e["quant"]["spec"], dtype);
    // fp8 is emulated on every CPU; int8 runs natively where an exact kernel does (oneDNN with
    // VNNI, or fusebench's own on AVX2), and the label follows what ran.
    const std::string execution = e["quant"]["execution"];
    if (dtype == "fp8:tensor") {
      EXPECT_TRUE(e["emulated"].get<bool>()) << e["name"];
    }
    EXPECT_EQ(e["emulated"].get<bool>(), execution.rfind("emulated", 0) == 0) << execution;
    const auto& err = e["quant_error"];
    for (const char* shard : e["op"] == "qkv" ? std::vector<const char*>{"q", "k", "v"}
                                              : std::vector<const char*>{"gate", "up"}) {
      ASSERT_TRUE(err.contains(shard)) << e["name"];
      EXPECT_GT(err[shard].get<double>(), 0);
      EXPECT_LT(err[shard].get<double>(), 0.1);
    }
    EXPECT_EQ(e.contains("quant_error_vs_split"), e["variant"] != "split") << e["name"];
  }
  EXPECT_EQ(entries, 2 * 3 + 2 * 2);  // fp8: split, fused, fused_channelwise; int8:channel: 2
  std::filesystem::remove(path);
}

TEST(QuantCli, TheCollectivesAreRefusedByName) {
  const CliResult r = run_fusebench(
      "--backend=cpu --models=qwen3-0.6b --ops=allreduce --tp=2 --dtypes=fp8 "
      "--tokens=1 --list");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("op allreduce has no quantized"), std::string::npos) << r.output;
}

// The TP pipelines quantized, as a user runs them: two in-process ranks on the CPU, every
// variant verified on every rank against the float64 replay of both ranks' plans, and each entry
// with its accuracy on the pipeline's output against the unquantized layer pair.
TEST(QuantCli, TpPipelinesRunQuantizedVerifiedOnEveryRankWithTheirAccuracy) {
  const auto path = temp_path("quant_tp_cli", "report.json");
  const CliResult r = run_fusebench(
      "--backend=cpu --models=qwen3-0.6b --ops=tp_mlp --tp=2 --dtypes=int8 --tokens=3 --verify "
      "--timing-max-time=0.05 --report=" +
      path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* v : {"naive", "paired", "sp", "overlap"})
    for (const char* rank : {"0", "1"})
      EXPECT_NE(r.output.find(std::string("tp_mlp/") + v + "/rank:" + rank +
                              ": OK (vs float64_dequantized"),
                std::string::npos)
          << v << " rank " << rank << "\n"
          << r.output;
  const auto report = load_json(path);
  int entries = 0;
  for (const auto& e : report["benchmarks"]) {
    ++entries;
    EXPECT_EQ(e["quant"]["spec"], "int8:tensor");
    EXPECT_EQ(e["quant"]["shard_fusion"], "column layer: channelwise (exact; vLLM's INT8 w8a8)");
    ASSERT_TRUE(e["quant_error"].contains("out")) << e["name"];
    EXPECT_GT(e["quant_error"]["out"].get<double>(), 0);
    EXPECT_LT(e["quant_error"]["out"].get<double>(), 0.1);
    EXPECT_EQ(e.contains("quant_error_vs_split"), e["variant"] != "naive") << e["name"];
  }
  EXPECT_EQ(entries, 4);
  std::filesystem::remove(path);
}

// A GPU's quantized sweep listed from here: fp8 at every granularity (128x128 blocks included)
// and int8 per tensor and per channel run on cuda, every variant listed; int8 with 128x128
// blocks is refused naming why; 128x128 blocks at a token count that is no multiple of 4 are
// left out naming cuBLASLt's block-scaling rule (backends/cuda_scaled_gemm.hpp).
TEST(QuantCli, TheCudaListingRunsFp8BlocksAndInt8AndRefusesInt8BlocksNamingWhy) {
  const CliResult runs = run_fusebench(
      "--backend=cpu --models=qwen3-0.6b --ops=qkv --dtypes=fp8,fp8:channel,fp8:block,int8,"
      "int8:channel --tokens=1,4 --timing=eager --list --list-for=cuda");
  ASSERT_EQ(runs.exit_code, 0) << runs.output;
  const std::string head = "/model:qwen3-0.6b/layer:attention/tokens:1/tp:1/dtype:";
  const std::string head4 = "/model:qwen3-0.6b/layer:attention/tokens:4/tp:1/dtype:";
  EXPECT_EQ(runs.output.find("qkv/split" + head + "fp8:block/"), std::string::npos) << runs.output;
  EXPECT_NE(runs.output.find("qkv/split dtype:fp8:block tokens:1 left out for qwen3-0.6b"),
            std::string::npos)
      << runs.output;
  EXPECT_NE(runs.output.find("M and N multiples of 4"), std::string::npos) << runs.output;
  for (const std::string& entry :
       {"qkv/split" + head + "fp8:tensor/", "qkv/fused_channelwise" + head + "fp8:tensor/",
        "qkv/fused" + head + "fp8:channel/", "qkv/split" + head4 + "fp8:block/",
        "qkv/fused" + head4 + "fp8:block/", "qkv/split" + head + "int8:tensor/",
        "qkv/fused" + head + "int8:tensor/", "qkv/fused_channelwise" + head + "int8:tensor/",
        "qkv/split" + head + "int8:channel/", "qkv/fused" + head + "int8:channel/"})
    EXPECT_NE(runs.output.find(entry), std::string::npos) << entry << "\n" << runs.output;
  const CliResult block = run_fusebench(
      "--backend=cpu --models=qwen3-0.6b --ops=qkv --dtypes=int8:block --tokens=1 --list "
      "--list-for=cuda");
  EXPECT_EQ(block.exit_code, 2) << block.output;
  EXPECT_NE(block.output.find("int8:block is not supported here: int8 with 128x128 weight blocks "
                              "on cuda"),
            std::string::npos)
      << block.output;
}

}  // namespace
}  // namespace fusebench::testing
