// fusebench-region on the CPU (issue 14 item 22): every op runs, TP ops and collectives with the
// communicator fusebench would give them, and --help describes every flag with its default.
#include <gtest/gtest.h>

#include <string>

#include "cli_run.hpp"

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

TEST(Region, HelpDescribesEveryFlagWithItsDefault) {
  const auto r = region("--help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* fragment : {"--op TEXT=qkv", "--tokens INT=1", "--iterations INT=1",
                               "--comm TEXT=auto", "allreduce:sum", "token count"}) {
    EXPECT_NE(r.output.find(fragment), std::string::npos) << fragment << "\n" << r.output;
  }
}
