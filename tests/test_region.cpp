// fusebench-region on the CPU (issue 14 item 22): every op runs, TP ops and collectives with the
// communicator fusebench would give them, and --help describes every flag with its default.
#include <gtest/gtest.h>

#include <string>

#include "cli_run.hpp"
#include "fusebench/shapes.hpp"

namespace {

fusebench::testing::CliResult region(const std::string& args) {
  return fusebench::testing::run_command(std::string(FUSEBENCH_BIN_DIR) +
                                         "/fusebench-region --backend=cpu " + args + " 2>&1");
}

}  // namespace

TEST(Region, RunsEveryOpWithItsCommunicator) {
  struct Case {
    std::string args, says;
  };
  for (const Case& c : {
           Case{"--op=qkv --tokens=3 --dtype=fp32", "region qkv/fused/"},
           Case{"--op=gate_up --variant=split --tokens=3 --dtype=fp32", "region gate_up/split/"},
           Case{"--op=tp_attn --tp=2 --tokens=3 --dtype=fp32", "comm=inprocess"},
           Case{"--op=tp_mlp --variant=naive --tp=2 --tokens=3 --dtype=fp32 --iterations=2",
                "runs=2 comm=inprocess"},
           Case{"--op=tp_mlp --tp=4 --comm=modelled --tokens=3 --dtype=fp32", "comm=modelled"},
           Case{"--op=allreduce --tp=2 --tokens=3 --dtype=fp32", "region allreduce/sum/"},
           Case{"--op=allgather --tp=2 --tokens=3 --dtype=fp32", "region allgather/cols/"},
       }) {
    const auto r = region(c.args);
    EXPECT_EQ(r.exit_code, 0) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.args << "\n" << r.output;
  }
}

TEST(Region, BadRequestsExitTwoWithAMessage) {
  for (const std::string args : {"--op=allreduce", "--op=tp_attn --variant=fused", "--op=nope",
                                 "--iterations=0", "--op=tp_attn --tp=3"}) {
    const auto r = region(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("fusebench-region: error: "), std::string::npos) << args << "\n"
                                                                             << r.output;
  }
}

// An MoE model's gate_up runs on three layers: --layer picks one; a layer the op lacks is bad
// input naming the valid ones.
TEST(Region, LayerPicksTheLayerOfAnMoeModel) {
  const std::string model =
      std::string("--model-config=") + FUSEBENCH_TEST_CONFIGS + "/deepseek-v2-lite.json";
  const auto first = region(model + " --op=gate_up --tokens=2 --dtype=fp32");
  EXPECT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("/layer:dense/"), std::string::npos) << first.output;
  const auto shared = region(model + " --op=gate_up --layer=shared_expert --tokens=2 --dtype=fp32");
  EXPECT_EQ(shared.exit_code, 0) << shared.output;
  EXPECT_NE(shared.output.find("region gate_up/fused/model:deepseek-v2-lite/layer:shared_expert/"),
            std::string::npos)
      << shared.output;
  const auto bad = region(model + " --op=gate_up --layer=mla --tokens=2 --dtype=fp32");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("valid: dense, expert, shared_expert"), std::string::npos)
      << bad.output;
}

TEST(Region, HelpDescribesEveryFlagWithItsDefault) {
  const auto r = region("--help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* fragment : {"--op TEXT=qkv", "--tokens INT=1", "--iterations INT=1",
                               "--comm TEXT=auto", "allreduce:sum", "token count"}) {
    EXPECT_NE(r.output.find(fragment), std::string::npos) << fragment << "\n" << r.output;
  }
}

// Issue 23: the region tool takes one --dtype, and its messages name that flag (the sweep's
// said --dtypes); its help lists every preset from the preset table.
TEST(Region, DtypeMessagesNameItsOwnFlag) {
  struct Case {
    std::string args, says;
  };
  for (const Case& c : {
           Case{"--dtype=fp16", "fusebench-region: error: --dtype: fp16 is not supported here"},
           Case{"--dtype=fp8", "--dtype: unknown dtype 'fp8' (valid: bf16, fp16, fp32)"},
           Case{"--dtypes=fp32", "unknown flag --dtypes (did you mean --dtype?)"},
           Case{"--tokens=abc", "--tokens: 'abc' is invalid (a token count, a whole number >= 1)"},
           Case{"--expert=1", "--expert picks a routed expert of an MoE layer of a checkpoint"},
       }) {
    const auto r = region(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_EQ(r.output.find("--dtypes:"), std::string::npos) << c.args << "\n" << r.output;
  }
}

TEST(Region, HelpListsEveryModelPreset) {
  const auto r = region("--help");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const auto& m : fusebench::model_presets())
    EXPECT_NE(r.output.find(m.name), std::string::npos) << m.name << "\n" << r.output;
}
