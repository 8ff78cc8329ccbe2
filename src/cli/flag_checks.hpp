#pragma once
// Checks shared by fusebench's and fusebench-region's flag parsers (CLI11). CLI11 alone says
// "Could not convert: --tokens = 1,abc" for a bad list element and "The following argument was
// not expected: --modles" for a typo; these name the bad element and what is valid, and the
// nearest known flag.
#include <CLI/CLI.hpp>
#include <charconv>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace fusebench::bench {

// Each element of the option (after its ',' delimiter) must be a whole number of type Int, at
// least `min`; else CLI11 throws "--flag: 'abc' is invalid (<valid>)".
template <class Int>
CLI::Validator whole_number(std::string valid, Int min = std::numeric_limits<Int>::min()) {
  return CLI::Validator(
      [valid, min](std::string& text) -> std::string {
        Int v{};
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, v);
        if (text.empty() || ec != std::errc() || ptr != end || v < min)
          return "'" + text + "' is invalid (" + valid + ")";
        return {};
      },
      "");
}

// A number (CLI11 reads it as a double); the range is checked where the option is used.
CLI::Validator real_number(std::string valid);

// Each element goes through `check`, which throws std::invalid_argument with the library's own
// message ("unknown op 'abc' (valid: ...)"); CLI11 prefixes the flag.
CLI::Validator checked_by(std::function<void(const std::string&)> check);

// The known name nearest to `given` by edit distance (a transposition counts one), or "" when
// none is near enough to be what was meant.
std::string closest_name(std::string_view given, const std::vector<std::string>& known);

// The long flags of `app` ("--models", ...), for closest_name.
std::vector<std::string> flag_names(const CLI::App& app);

// Throws std::invalid_argument for the first --flag[=value] that neither `app` nor `also_known`
// has: "unknown flag --modles (did you mean --models?); <help>".
void reject_unknown_flags(const CLI::App& app, int argc, char** argv,
                          const std::vector<std::string>& also_known, const std::string& help);

// CLI11 splits a delimited value and drops its empty items ("--tokens=1,,4" reads as 1,4, "1,"
// as 1): throws std::invalid_argument for the first empty item of any delimited option of `app`,
// naming the flag, the item's position and the value. A value that is empty as a whole is the
// missing-value check's to refuse.
void reject_empty_list_items(const CLI::App& app, int argc, char** argv);

}  // namespace fusebench::bench
