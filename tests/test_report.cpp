#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "fusebench/identity.hpp"
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
  // The naming version of its entry names (the gate explains renamed entries by it, issue 28).
  EXPECT_EQ(ctx["entry_naming_version"], fusebench::advise::kEntryNamingVersion);
}

// Issue 23: --report=/tmp was accepted, the sweep ran, then every write failed. The path is now
// checked first; missing parents are created and returned so the caller can say so.
TEST(Report, ReportPathIsCheckedAndItsDirectoriesCreated) {
  namespace fs = std::filesystem;
  const fs::path base =
      fs::temp_directory_path() / ("fusebench_report_path_" + std::to_string(::getpid()));
  fs::remove_all(base);
  fs::create_directories(base);
  const auto refused = [](const std::string& path) -> std::string {
    try {
      prepare_report_path(path, "--report");
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(refused(base.string()).find("--report=" + base.string() + " is a directory"),
            std::string::npos);
  EXPECT_NE(refused(base.string() + "/").find("is a directory"), std::string::npos);
  EXPECT_NE(refused("").find("is empty"), std::string::npos);
  // A file where a directory would have to be.
  std::ofstream(base / "file") << "x";
  EXPECT_NE(refused((base / "file" / "r.json").string()).find("is not a directory"),
            std::string::npos);
  // Missing parents: created, outermost first.
  const auto created = prepare_report_path((base / "a" / "b" / "r.json").string(), "--report");
  EXPECT_EQ(created,
            (std::vector<std::string>{(base / "a").string(), (base / "a" / "b").string()}));
  EXPECT_TRUE(fs::is_directory(base / "a" / "b"));
  EXPECT_TRUE(prepare_report_path((base / "a" / "b" / "r.json").string(), "--report").empty());
  EXPECT_TRUE(prepare_report_path("relative.json", "--report").empty());  // the working directory
  fs::remove_all(base);
}
