// Bad input through the fusebench command line (issue 14, items 16-18): every bad value exits 2
// with "fusebench: error: " and a message naming the flag, before anything is measured.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_run.hpp"

namespace {

using fusebench::testing::CliResult;

CliResult run(const std::string& args) {
  return fusebench::testing::run_fusebench("--backend=cpu " + args);
}

struct BadInput {
  std::string args;
  std::string must_say;  // a fragment the message must contain
};

void expect_refused(const BadInput& bad) {
  const CliResult r = run(bad.args);
  EXPECT_EQ(r.exit_code, 2) << bad.args << "\n" << r.output;
  EXPECT_NE(r.output.find("fusebench: error: "), std::string::npos) << bad.args << "\n" << r.output;
  EXPECT_NE(r.output.find(bad.must_say), std::string::npos)
      << bad.args << ": expected '" << bad.must_say << "' in\n"
      << r.output;
  // Nothing measured: no progress line, no result row.
  EXPECT_EQ(r.output.find("elapsed"), std::string::npos) << bad.args << "\n" << r.output;
}

}  // namespace

TEST(CliInputs, BadNumbersExitTwoWithTheUsualMessage) {
  for (const BadInput& bad : std::vector<BadInput>{
           // Retired by the interleaved stopping rule (docs/timing.md): refused, naming the
           // replacement, whatever its value.
           {"--timing-target-cv=0 --list", "--timing-target-cv is retired"},
           {"--timing-target-cv=-0.1 --list", "--timing-target-ci"},
           {"--timing-target-ci=0 --list", "--timing-target-ci"},
           {"--timing-target-ci=-0.1 --list", "--timing-target-ci"},
           {"--timing-target-ci=abc --list", "--timing-target-ci"},
           {"--tokens=abc --list", "--tokens"},
           {"--tokens=0 --list", "--tokens"},
           {"--tp=x --list", "--tp"},
           {"--seed=-1 --list", "--seed"},
           {"--seed=abc --list", "--seed"},
           {"--timing-max-time=-1 --list", "--timing-max-time"},
           {"--timing-max-time=0 --list", "--timing-max-time"},
           {"--timing-min-time=-1 --list", "--timing-min-time"},
           {"--timing-min-time=1 --timing-max-time=0.1 --list", "--timing-min-time"},
           {"--timing-blocks=0 --list", "--timing-blocks: '0' is invalid (auto, or a whole"},
           {"--timing-blocks=101 --list", "--timing-blocks"},
           {"--timing-blocks=2.5 --list", "--timing-blocks"},
           {"--timing-blocks=abc --list", "--timing-blocks"},
           // Issue 36: each flag becomes its type once, where the flags are read, its error
           // naming the value and the valid ones.
           {"--cpu-threads=0 --list",
            "--cpu-threads: '0' is invalid (auto, or a whole number of threads 1..1024)"},
           {"--cpu-threads=two --list", "--cpu-threads: 'two' is invalid"},
           {"--comm=gloo --list",
            "--comm: 'gloo' is invalid (valid: auto, nccl, modelled, inprocess, mpi)"},
           {"--timing=warm --list",
            "--timing: unknown regime 'warm' (valid: cold, batch, eager, graph)"},
           {"--timing=eager,eager --list", "--timing: 'eager' is given twice"},
       }) {
    expect_refused(bad);
  }
}

TEST(CliInputs, TheCpuTimeDefaultsStayValid) {
  // Guards the checks above against refusing what the defaults themselves are.
  EXPECT_EQ(run("--timing-min-time=0 --timing-max-time=0.5 --list").exit_code, 0);
  EXPECT_EQ(run("--seed=18446744073709551615 --list").exit_code, 0);
  EXPECT_EQ(run("--timing-blocks=auto --list").exit_code, 0);
  EXPECT_EQ(run("--timing-blocks=100 --list").exit_code, 0);
}

TEST(CliInputs, EmptyValuesAndMissingValuesExitTwo) {
  for (const BadInput& bad : std::vector<BadInput>{
           {"--models= --list", "--models"},
           // Followed by another flag, the flag must not become the value.
           {"--models= --ops=qkv --list", "--models"},
           {"--models --ops=qkv --list", "--models"},
           {"--tokens= --list", "--tokens"},
           {"--report= --list", "--report"},
       }) {
    expect_refused(bad);
  }
}

TEST(CliInputs, DuplicateAxisValuesAreRefused) {
  for (const BadInput& bad : std::vector<BadInput>{
           {"--timing=eager,eager --list", "eager"},
           {"--models=qwen3-0.6b,qwen3-0.6b --list", "qwen3-0.6b"},
           {"--tokens=1,4,1 --list", "--tokens"},
           {"--tp=1,1 --list", "--tp"},
           {"--dtypes=fp32,fp32 --list", "fp32"},
           {"--ops=qkv,qkv --list", "qkv"},
           {"--variants=fused,fused --list", "fused"},
       }) {
    expect_refused(bad);
  }
}

TEST(CliInputs, CollectiveSweepAtTpOneAloneIsRefused) {
  expect_refused({"--collective-sweep --list", "--collective-sweep"});
  expect_refused({"--collective-sweep --tp=1 --list", "tp"});
  EXPECT_EQ(run("--collective-sweep --tp=1,2 --ops=tp_attn --list").exit_code, 0);
}

TEST(CliInputs, BadCommTimeoutEnvironmentIsRefused) {
  for (const char* value : {"abc", "0", "-5", "3s"}) {
    const std::string cmd = std::string("FUSEBENCH_COMM_TIMEOUT=") + value + " " +
                            std::string(FUSEBENCH_BIN_DIR) +
                            "/fusebench --backend=cpu --ops=tp_attn --tp=2 --list 2>&1";
    FILE* pipe = ::popen(cmd.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string out;
    char buf[4096];
    while (std::fgets(buf, sizeof(buf), pipe)) out += buf;
    const int status = ::pclose(pipe);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << value << "\n" << out;
    EXPECT_NE(out.find("FUSEBENCH_COMM_TIMEOUT"), std::string::npos) << value << "\n" << out;
  }
}

TEST(CliInputs, SharperMessages) {
  // A TP variant without a TP op points to the op that has it.
  expect_refused({"--variants=naive --list", "--ops=tp_attn"});
  // The unknown link profile lists every valid value, measured included.
  expect_refused({"--ops=tp_attn --tp=2 --link-profile=nvlink-h300 --list", "measured"});
  // A directory given as a config says so instead of "not valid JSON".
  const auto dir = fusebench::testing::temp_path("fusebench_inputs", "config_dir");
  std::filesystem::create_directories(dir);
  expect_refused({"--model-config=" + dir.string() + " --list", "is a directory"});
  std::filesystem::remove_all(dir);
  // A size that cannot fit is refused before measuring, naming the size and what is free.
  expect_refused(
      {"--models=llama3-70b --ops=gate_up --variants=fused --tokens=4000000 "
       "--dtypes=fp32",
       "free"});
}

// Issue 23: the refusal advised "a lower tp", but a higher tp shrinks a rank's shard; with
// in-process ranks (all in this process) no tp helps, and the advice says so.
TEST(CliInputs, OutOfMemoryAdviceNamesWhatWouldFit) {
  const CliResult shard =
      run("--models=llama3-70b --ops=gate_up --variants=fused --tokens=4000000 --dtypes=fp32");
  EXPECT_EQ(shard.exit_code, 2) << shard.output;
  EXPECT_NE(shard.output.find("or a higher --tp (one rank's shard holds 1/tp of the weights"),
            std::string::npos)
      << shard.output;
  EXPECT_EQ(shard.output.find("lower tp"), std::string::npos) << shard.output;
  const CliResult ranks = run(
      "--models=llama3-70b --ops=tp_mlp --variants=naive --tp=2 --tokens=4000000 --dtypes=fp32");
  EXPECT_EQ(ranks.exit_code, 2) << ranks.output;
  EXPECT_NE(ranks.output.find("a higher --tp would not help here: the 2 in-process ranks"),
            std::string::npos)
      << ranks.output;
  EXPECT_EQ(ranks.output.find("lower tp"), std::string::npos) << ranks.output;
}

TEST(CliInputs, HelpExitsZeroAndStillListsGoogleBenchmarksFlags) {
  const CliResult r = run("--help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--benchmark_filter"), std::string::npos) << r.output;
}

// --list-for and --list-bytes only shape what --list prints (the device check's --plan).
TEST(CliInputs, ListForAndListBytesNeedListAndAKnownBackend) {
  expect_refused({"--list-bytes", "--list-bytes only changes what --list prints: add --list"});
  expect_refused({"--list-for=cuda", "--list-for only changes what --list prints: add --list"});
  expect_refused({"--list --list-for=rocm", "--list-for"});
}

// The sweep a GPU run would form, listed without one: GPU regimes and one-launch variants, each
// fixture's buffer bytes (the plan's weights and activations) and its two group keys.
TEST(CliInputs, ListForCudaListsTheGpuSweepWithBytes) {
  const CliResult cpu = run("--list --models=qwen3-0.6b --ops=qkv --tokens=1 --dtypes=bf16");
  EXPECT_EQ(cpu.exit_code, 0) << cpu.output;
  EXPECT_EQ(cpu.output.find("qkv/grouped/"), std::string::npos) << cpu.output;
  const CliResult r =
      run("--list --list-for=cuda --list-bytes --models=qwen3-0.6b --ops=qkv --tokens=1 "
          "--dtypes=bf16 --timing=graph");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // qwen3-0.6b qkv: w [(16 + 2 x 8) x 128, 1024] bf16 = 8 MiB, x [1, 1024], y [1, 4096].
  const std::string want =
      "qkv/grouped/model:qwen3-0.6b/layer:attention/tokens:1/tp:1/dtype:bf16/weights:random/"
      "timing:graph\t";
  const auto at = r.output.find(want);
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
  const std::string bytes = line.substr(want.size(), line.find('\t', want.size()) - want.size());
  EXPECT_GE(std::stoull(bytes), 4096ull * 1024 * 2) << line;
  EXPECT_NE(line.find("\tqkv/*/model:qwen3-0.6b/layer:attention/tokens:1/tp:1/dtype:bf16/"
                      "weights:random/timing:graph\tqkv/*/model:qwen3-0.6b/"),
            std::string::npos)
      << line;
}

namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

// Issue 23: Google Benchmark's timing flags cannot mean here what they mean there (our engine
// times every entry): each is refused naming what to use, never silently ignored.
TEST(CliInputs, GoogleBenchmarkFlagsThatCannotApplyAreRefusedNamingOurs) {
  for (const BadInput& bad : std::vector<BadInput>{
           {"--benchmark_min_time=3 --list", "--timing-min-time=SECONDS"},
           {"--benchmark_min_time --list", "--benchmark_min_time is not supported"},
           {"--benchmark_min_warmup_time=0.1 --list", "warms every variant up"},
           {"--benchmark_enable_random_interleaving=true --list", "--benchmark_repetitions=N"},
           {"--benchmark_display_aggregates_only=true --list",
            "--benchmark_report_aggregates_only=true"},
           {"--benchmark_time_unit=ms --list", "microseconds"},
           {"--benchmark_perf_counters=CYCLES --list", "--launch-counts"},
           {"--benchmark_dry_run --list", "use --list"},
       }) {
    expect_refused(bad);
  }
  // Turned off, a refused boolean flag asks nothing.
  EXPECT_EQ(run("--benchmark_enable_random_interleaving=false --list").exit_code, 0);
  // Google Benchmark reads its flags from the environment too.
  const CliResult env =
      fusebench::testing::run_command("BENCHMARK_MIN_TIME=2 " + std::string(FUSEBENCH_BIN_DIR) +
                                      "/fusebench --backend=cpu --list 2>&1");
  EXPECT_EQ(env.exit_code, 2) << env.output;
  EXPECT_NE(env.output.find("BENCHMARK_MIN_TIME=2 (environment) is not supported"),
            std::string::npos)
      << env.output;
}

// --benchmark_repetitions=0 measured nothing and exited 0; "abc" printed Google Benchmark's
// message and then ours. Now one message, before Google Benchmark sees the flag.
TEST(CliInputs, BadRepetitionsGiveOneMessage) {
  for (const char* value : {"0", "-1", "abc", "2.5", ""}) {
    const std::string args = std::string("--benchmark_repetitions=") + value + " --list";
    const CliResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_EQ(count(r.output, "error"), 1u) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("--benchmark_repetitions"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("32-bit integer"), std::string::npos) << r.output;
  }
  EXPECT_EQ(run("--benchmark_repetitions=2 --list").exit_code, 0);
}

// --benchmark_list_tests means what --list means; --help says what each flag does here.
TEST(CliInputs, ListTestsIsListAndHelpSaysHowEachGoogleBenchmarkFlagIsTreated) {
  const std::string axes = "--ops=qkv --tokens=1 --dtypes=fp32 ";
  const CliResult listed = run(axes + "--list");
  const CliResult tests = run(axes + "--benchmark_list_tests");
  ASSERT_EQ(tests.exit_code, 0) << tests.output;
  EXPECT_EQ(tests.output, listed.output);
  EXPECT_NE(tests.output.find("qkv/fused/"), std::string::npos) << tests.output;
  const CliResult help = run("--help");
  for (const char* line :
       {"--benchmark_filter (honoured)", "--benchmark_repetitions (honoured)",
        "--benchmark_list_tests (mapped)", "--benchmark_min_time (refused)",
        "--benchmark_min_warmup_time (refused)", "--benchmark_context (honoured)"})
    EXPECT_NE(help.output.find(line), std::string::npos) << line << "\n" << help.output;
}

TEST(CliInputs, BenchmarkContextIsRecordedInTheReport) {
  expect_refused({"--benchmark_context=abc --list", "'abc' is not key=value"});
  const auto path = fusebench::testing::temp_path("fusebench_inputs", "context.json");
  const CliResult r =
      run("--ops=qkv --variants=fused --tokens=1 --dtypes=fp32 --timing-blocks=1 "
          "--launch-counts=off --dram-counters=off --timing-max-time=0.1 "
          "--benchmark_context=host=ci,pool=a --report=" +
          path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto report = fusebench::testing::load_json(path);
  EXPECT_EQ(report["context"]["benchmark_context"],
            (nlohmann::json{{"host", "ci"}, {"pool", "a"}}));
  std::filesystem::remove(path);
}

// "Could not convert: --tokens = 1,abc": the bad element and what is valid, for every list flag.
TEST(CliInputs, BadListElementsAreNamedWithWhatIsValid) {
  for (const BadInput& bad : std::vector<BadInput>{
           {"--tokens=1,abc --list", "--tokens: 'abc' is invalid (token counts are whole numbers"},
           {"--tokens=1,0 --list", "--tokens: '0' is invalid"},
           {"--tokens=1,99999999999999999999 --list", "--tokens: '99999999999999999999'"},
           {"--tp=1,x --list", "--tp: 'x' is invalid (tensor-parallel sizes"},
           {"--layer=abc --list", "--layer: 'abc' is invalid (a decoder layer index >= 0)"},
           {"--expert=-1 --list", "--expert: '-1' is invalid (a routed expert index >= 0)"},
           {"--timing-min-time=abc --list", "--timing-min-time: 'abc' is invalid (seconds"},
           {"--timing-target-ci=x --list", "--timing-target-ci: 'x' is invalid"},
           {"--ops=qkv,abc --list", "--ops: unknown op 'abc' (valid: qkv"},
           {"--dtypes=fp32,fp4 --list",
            "--dtypes: unknown dtype 'fp4' (valid: bf16, fp16, fp32, fp8, int8;"},
           {"--models=qwen3-0.6b,gpt-9 --list", "--models: unknown model 'gpt-9' (presets:"},
           {"--ops=tp_attn --tp=2 --link-profile=x --list", "--link-profile: unknown link profile"},
       }) {
    expect_refused(bad);
    EXPECT_EQ(run(bad.args).output.find("Could not convert"), std::string::npos) << bad.args;
  }
  EXPECT_EQ(run("--ops=tp_attn --tp=2 --link-profile=measured --list").exit_code, 0);
}

TEST(CliInputs, UnknownFlagsSuggestTheNearestOne) {
  for (const BadInput& bad : std::vector<BadInput>{
           {"--modles= --list", "unknown flag --modles (did you mean --models?)"},
           {"--modles=qwen3-0.6b --list", "(did you mean --models?)"},
           {"--token=1 --list", "(did you mean --tokens?)"},
           {"--dtype=fp32 --list", "(did you mean --dtypes?)"},
           {"--benchmark_repetiton=2 --list", "(did you mean --benchmark_repetitions?)"},
           {"--zzzzzzzz=1 --list", "unknown flag --zzzzzzzz; fusebench --help lists the flags"},
       }) {
    expect_refused(bad);
  }
}

TEST(CliInputs, LayerAndExpertWithoutWeightsSayWhatTheyNeed) {
  const CliResult expert = run("--expert=1 --list");
  EXPECT_EQ(expert.exit_code, 2) << expert.output;
  EXPECT_NE(expert.output.find("--expert picks a routed expert of an MoE layer"), std::string::npos)
      << expert.output;
  EXPECT_NE(expert.output.find("--weights=DIR"), std::string::npos) << expert.output;
  EXPECT_EQ(expert.output.find("(expert)"), std::string::npos) << expert.output;
  expect_refused({"--layer=2 --list", "--layer picks a decoder layer of a checkpoint"});
}
