#pragma once
// What is at a path where a regular file was expected (a config, an index, a shard): a fifo
// would block the read, a directory reads as empty or fails with a misleading message, so the
// readers say what they found instead.
#include <string>

namespace fusebench {

// "" when `path` is a regular file (or a link to one), else what it is: "does not exist", "is a
// directory", "is a fifo", "is a character device", ...
std::string not_a_regular_file(const std::string& path);

}  // namespace fusebench
