#pragma once
// The message of the std::invalid_argument that `f` throws (the suite's bad-input error), or ""
// when it throws none; any other exception escapes and fails the test.
#include <functional>
#include <stdexcept>
#include <string>

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}
