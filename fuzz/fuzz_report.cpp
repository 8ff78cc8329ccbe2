// libFuzzer target: the gate's report reader and rules on arbitrary bytes. Only InputError (the
// documented rejection) may escape parse_report; anything else, or a sanitizer report, is a bug.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string_view>

#include "fusebench/gate.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fusebench::gate;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const Report report = parse_report(text, "fuzz.json");
    // Exercise the rules and printers on what was accepted: against itself and against an
    // empty report from the same device (every entry missing).
    Options options;
    std::ostringstream sink;
    Result same = compare(report, report, options);
    print_table(same, sink, true);
    write_markdown(same, options, sink);
    Report empty;
    empty.file = "empty.json";
    empty.context = report.context;
    Result missing = compare(report, empty, options);
    print_table(missing, sink, false);
  } catch (const InputError&) {
  }
  return 0;
}
