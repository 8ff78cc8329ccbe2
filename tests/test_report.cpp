#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "fusebench/report.hpp"

using namespace fusebench;

TEST(Report, SanitizeDropsNonFiniteAndRecordsPath) {
  nlohmann::json j = {{"a", 1.0}, {"b", std::nan("")}, {"c", {{"d", INFINITY}, {"e", "x"}}}};
  std::vector<std::string> dropped;
  const auto clean = sanitize(j, &dropped);
  EXPECT_FALSE(clean.contains("b"));
  EXPECT_FALSE(clean["c"].contains("d"));
  EXPECT_EQ(clean["c"]["e"], "x");
  EXPECT_EQ(dropped, (std::vector<std::string>{"b", "c.d"}));
  // Strict parsers accept the result.
  nlohmann::json parsed;
  EXPECT_NO_THROW(parsed = nlohmann::json::parse(clean.dump()));
  EXPECT_EQ(parsed, clean);
}

TEST(Report, AtomicWriteReplacesWholeFileAndCreatesDirs) {
  const auto dir = std::filesystem::temp_directory_path() / "fusebench_atomic_test";
  std::filesystem::remove_all(dir);
  const auto path = (dir / "sub" / "report.json").string();
  write_file_atomically(path, "first");
  write_file_atomically(path, "second");
  std::ifstream in(path);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "second");
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir / "sub")) ++files;
  EXPECT_EQ(files, 1);  // no temporary left behind
  std::filesystem::remove_all(dir);
}

TEST(Report, AtomicWriteFailureNamesPath) {
  try {
    write_file_atomically("/proc/fusebench/nope.json", "x");
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("/proc/fusebench"), std::string::npos);
  }
}

TEST(Report, ContextNamesLibraries) {
  const auto ctx = collect_context({{"backend", "cpu"}}, {});
  EXPECT_EQ(ctx["backend"], "cpu");
  EXPECT_TRUE(ctx["libraries"].contains("nccl"));
  EXPECT_TRUE(ctx["libraries"].contains("cupti_api"));
  EXPECT_FALSE(ctx["git_revision"].get<std::string>().empty());
}
