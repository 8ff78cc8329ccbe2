// The run's inputs and outputs by one rule (issue 37, fusebench/input_files.hpp): the bounded
// reader (regular files only, a size limit, a JSON depth limit, a fifo never waited on), and the
// one check of every output against the inputs and the other outputs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "fusebench/input_files.hpp"
#include "fusebench/output_path.hpp"

namespace {

namespace fs = std::filesystem;
using namespace fusebench;

class InputFiles : public ::testing::Test {
 protected:
  fs::path dir;
  void SetUp() override {
    reset_file_registry();
    dir = fs::temp_directory_path() /
          ("fusebench_input_files_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override {
    reset_file_registry();
    fs::remove_all(dir);
  }
  std::string file(const std::string& name, const std::string& text) {
    const fs::path p = dir / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
};

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST_F(InputFiles, ReadsARegularFileWhole) {
  const std::string p = file("a.json", "{\"a\": 1}");
  EXPECT_EQ(read_input_file(p, "the test file"), "{\"a\": 1}");
}

TEST_F(InputFiles, RefusesDevZeroWithoutReadingIt) {
  const std::string e = error_of([] { (void)read_input_file("/dev/zero", "the routing file"); });
  EXPECT_NE(e.find("the routing file /dev/zero: is a character device"), std::string::npos) << e;
  EXPECT_NE(e.find("a regular file of at most 256 MiB"), std::string::npos) << e;
}

TEST_F(InputFiles, RefusesAFifoWithoutWaitingForAWriter) {
  const fs::path fifo = dir / "in.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  const auto start = std::chrono::steady_clock::now();
  const std::string e = error_of([&] { (void)read_input_file(fifo.string(), "the report"); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_NE(e.find("is a fifo"), std::string::npos) << e;
}

TEST_F(InputFiles, RefusesAFileOverTheLimitStatingIt) {
  const std::string p = file("big.json", std::string(4096, ' '));
  const std::string e = error_of([&] { (void)read_input_file(p, "the report", 1024); });
  EXPECT_NE(e.find("4096 bytes, over the limit"), std::string::npos) << e;
  EXPECT_EQ(read_input_file(p, "the report", 4096).size(), 4096u);
  EXPECT_NE(
      error_of([&] { (void)read_input_file(dir.string(), "the report"); }).find("is a directory"),
      std::string::npos);
}

TEST_F(InputFiles, RefusesJsonNestedDeeperThanTheLimitWhileParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string e = error_of([&] { (void)parse_input_json(deep, "r.json"); });
  EXPECT_NE(e.find("r.json: JSON nested deeper than 64 levels"), std::string::npos) << e;
  const auto nested = [](int n) { return std::string(n, '[') + std::string(n, ']'); };
  EXPECT_NO_THROW((void)parse_input_json(nested(kMaxJsonDepth), "ok.json"));
  EXPECT_THROW((void)parse_input_json(nested(kMaxJsonDepth + 1), "deep.json"), InputFileError);
  EXPECT_THROW((void)parse_input_json(R"({"a":)" + nested(70) + "}", "o.json"), InputFileError);
  EXPECT_THROW((void)parse_input_json("[1, 2", "bad.json"), nlohmann::json::parse_error);
}

TEST_F(InputFiles, RefusesAKeyGivenTwiceWhenAsked) {
  const std::string text = R"({"a": {"expert_ids": [[0]], "expert_ids": [[1]]}})";
  EXPECT_NO_THROW((void)parse_input_json(text, "f.json"));  // JSON's own rule: the last wins
  const std::string e =
      error_of([&] { (void)parse_input_json(text, "f.json", {.unique_keys = true}); });
  EXPECT_NE(e.find("f.json: key \"expert_ids\" appears twice in a"), std::string::npos) << e;
  EXPECT_NO_THROW(
      (void)parse_input_json(R"([{"a": 1}, {"a": 2}])", "f.json", {.unique_keys = true}));
}

TEST_F(InputFiles, AnOutputIsNeverAnInputByAnyName) {
  const std::string config = file("config.json", "{}");
  register_input("a --model-config file", config);
  fs::create_symlink(config, dir / "link.json");
  fs::create_hard_link(config, dir / "hard.json");
  const fs::path cwd = fs::current_path();
  fs::current_path(dir);
  for (const std::string& out :
       {config, (dir / "link.json").string(), (dir / "hard.json").string(),
        std::string("./config.json"), (dir / "x/../config.json").string()}) {
    const std::string e = error_of([&] { (void)check_output(out, "--benchmark_out"); });
    EXPECT_NE(e.find("--benchmark_out=" + out + " is a --model-config file"), std::string::npos)
        << e;
    EXPECT_NE(e.find("never replaces an input"), std::string::npos) << e;
  }
  fs::current_path(cwd);
  // A file the readers read is registered by them.
  const std::string routing = file("routing.json", "{}");
  (void)read_input_file(routing, "the routing file");
  EXPECT_NE(error_of([&] { (void)check_output(routing, "--report"); }).find("the routing file"),
            std::string::npos);
}

TEST_F(InputFiles, TwoOutputsNeverShareAFile) {
  const std::string report = (dir / "run.json").string();
  (void)check_output(report, "--report");
  fs::create_symlink(report, dir / "link.json");  // dangling until written
  for (const std::string& out :
       {report, (dir / "link.json").string(), (dir / "sub/../run.json").string()}) {
    const std::string e = error_of([&] { (void)check_output(out, "--benchmark_out"); });
    EXPECT_NE(e.find("is the file --report=" + report + " writes"), std::string::npos) << e;
  }
  EXPECT_NO_THROW((void)check_output((dir / "gbench.json").string(), "--benchmark_out"));
  // Devices that take anything may take several outputs; a descriptor may not.
  EXPECT_NO_THROW((void)check_output("/dev/null", "--report"));
  EXPECT_NO_THROW((void)check_output("/dev/null", "--summary-md"));
  EXPECT_NO_THROW((void)check_output("-", "-o"));
  EXPECT_NE(error_of([] {
              (void)check_output("/dev/stdout", "--benchmark_out");
            }).find("one would replace the other"),
            std::string::npos);
}

TEST_F(InputFiles, AFifoWithoutAReaderFailsAtOnceInsteadOfBlocking) {
  const fs::path fifo = dir / "out.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const OutputTarget t = check_output(fifo.string(), "--report");
  const auto start = std::chrono::steady_clock::now();
  const std::string e = error_of([&] { write_output(t, "{}"); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_NE(e.find("no reader"), std::string::npos) << e;
  // With a reader it is written as before.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  EXPECT_NO_THROW(write_output(t, "{}"));
  char buf[8] = {};
  EXPECT_EQ(::read(reader, buf, sizeof(buf)), 2);
  ::close(reader);
}

TEST_F(InputFiles, AFailedWriteIsAnErrorNamingThePath) {
  if (::access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full here";
  const OutputTarget t = check_output("/dev/full", "--benchmark_out");
  const std::string e = error_of([&] { write_output(t, "{}"); });
  EXPECT_NE(e.find("/dev/full"), std::string::npos) << e;
  EXPECT_NE(e.find(std::strerror(ENOSPC)), std::string::npos) << e;
  EXPECT_NE(error_of([&] { append_output(t, "# summary\n"); }).find(std::strerror(ENOSPC)),
            std::string::npos);
}

}  // namespace
