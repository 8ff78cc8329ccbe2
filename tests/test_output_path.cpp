// The output rule every binary writes by (fusebench/output_path.hpp, issue 27): a symlink's
// target is written and the link kept, streams are never replaced, inputs are never outputs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "fusebench/output_path.hpp"
#include "fusebench/report.hpp"

namespace fusebench {
namespace {

namespace fs = std::filesystem;

class OutputPath : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fusebench_output_path_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string at(const std::string& name) const { return (dir_ / name).string(); }
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static std::string refusal(const std::string& path) {
    try {
      resolve_output(path, "--report");
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(OutputPath, RegularFileIsReplacedAtomicallyKeepingItsMode) {
  std::ofstream(at("r.json")) << "old";
  ::chmod(at("r.json").c_str(), 0640);
  const OutputTarget t = resolve_output(at("r.json"), "--report");
  EXPECT_TRUE(t.atomic);
  EXPECT_TRUE(t.note.empty());
  write_output(t, "new");
  EXPECT_EQ(read(at("r.json")), "new");
  struct stat st {};
  ASSERT_EQ(::stat(at("r.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 1);  // no temporary left behind
}

TEST_F(OutputPath, SymlinkTargetIsWrittenAndTheLinkStays) {
  std::ofstream(at("target.json")) << "old";
  fs::create_symlink("target.json", at("link.json"));
  const OutputTarget t = resolve_output(at("link.json"), "--report");
  EXPECT_EQ(t.path, at("target.json"));
  EXPECT_NE(t.note.find("is a symlink"), std::string::npos);
  write_output(t, "new");
  EXPECT_TRUE(fs::is_symlink(at("link.json")));
  EXPECT_EQ(read(at("target.json")), "new");
  // A dangling link: its target is created (in its directory, missing parents too).
  fs::create_symlink("sub/made.json", at("dangling.json"));
  write_file_atomically(at("dangling.json"), "made");
  EXPECT_TRUE(fs::is_symlink(at("dangling.json")));
  EXPECT_EQ(read(at("sub/made.json")), "made");
  // A loop is refused, not followed forever.
  fs::create_symlink("loop_b", at("loop_a"));
  fs::create_symlink("loop_a", at("loop_b"));
  EXPECT_NE(refusal(at("loop_a")).find("symlinks to follow"), std::string::npos);
}

TEST_F(OutputPath, StreamsAreWrittenOnceAndNeverReplaced) {
  const OutputTarget null = resolve_output("/dev/null", "--report");
  EXPECT_FALSE(null.atomic);
  EXPECT_NE(null.note.find("character device"), std::string::npos);
  write_output(null, "x");
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  // A fifo: written through, still a fifo.
  ASSERT_EQ(::mkfifo(at("fifo").c_str(), 0600), 0);
  const int reader = ::open(at("fifo").c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  write_output(resolve_output(at("fifo"), "--report"), "through");
  char buf[16] = {};
  EXPECT_EQ(::read(reader, buf, sizeof(buf)), 7);
  EXPECT_EQ(std::string(buf), "through");
  ::close(reader);
  ASSERT_EQ(::lstat(at("fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  // Descriptors: "-" and /dev/stdout are stdout; a closed one is refused.
  for (const std::string stdout_name : {"-", "/dev/stdout", "/proc/self/fd/1"}) {
    const OutputTarget t = resolve_output(stdout_name, "--report");
    EXPECT_EQ(t.fd, STDOUT_FILENO) << stdout_name;
    EXPECT_FALSE(t.atomic);
  }
  EXPECT_EQ(resolve_output("/dev/stderr", "--report").fd, STDERR_FILENO);
  EXPECT_NE(refusal("/dev/fd/987").find("descriptor 987 is not open"), std::string::npos);
}

TEST_F(OutputPath, WhatCannotTakeAReportIsRefusedNamingIt) {
  EXPECT_NE(refusal("").find("is empty"), std::string::npos);
  EXPECT_NE(refusal(dir_.string()).find("is a directory"), std::string::npos);
  EXPECT_NE(refusal("/dev/fusebench_no_such_disk").find("no file is created under /dev/"),
            std::string::npos);
  // A socket.
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock = at("sock");
  ASSERT_LT(sock.size(), sizeof(addr.sun_path));
  std::copy(sock.begin(), sock.end(), addr.sun_path);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_NE(refusal(sock).find("is a socket"), std::string::npos);
  ::close(s);
  // A block device, where the machine has one to look at (never written).
  for (const std::string dev : {"/dev/loop0", "/dev/sda", "/dev/vda", "/dev/nvme0n1"}) {
    struct stat st {};
    if (::stat(dev.c_str(), &st) == 0 && S_ISBLK(st.st_mode)) {
      EXPECT_NE(refusal(dev).find("block device"), std::string::npos) << dev;
      break;
    }
  }
}

TEST_F(OutputPath, AnOutputThatIsAnInputIsRefusedByIdentity) {
  std::ofstream(at("base.json")) << "{}";
  fs::create_symlink("base.json", at("alias.json"));
  const auto refused = [&](const std::string& output) -> std::string {
    try {
      refuse_output_over_input(output, "-o", {{"the baseline report", at("base.json")}});
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(refused(at("base.json")).find("is the baseline report"), std::string::npos);
  EXPECT_NE(refused(at("alias.json")).find("never replaces an input"), std::string::npos);
  EXPECT_NE(refused((dir_ / "." / "base.json").string()).find("-o="), std::string::npos);
  EXPECT_EQ(refused(at("other.json")), "");
  EXPECT_EQ(refused("-"), "");
  // A checkpoint directory stands for its JSON and safetensors files.
  fs::create_directories(dir_ / "ckpt");
  std::ofstream(dir_ / "ckpt" / "config.json") << "{}";
  EXPECT_THROW(refuse_output_over_input(at("ckpt/config.json"), "--report",
                                        {{"read by --weights", at("ckpt")}}),
               std::invalid_argument);
  EXPECT_NO_THROW(refuse_output_over_input(at("ckpt/report.json"), "--report",
                                           {{"read by --weights", at("ckpt")}}));
}

}  // namespace
}  // namespace fusebench
