// libFuzzer target: the gate's report reader and rules, and the advisor's reader, decisions and
// four formats (docs/advise.md), on arbitrary bytes. Only InputError (the documented rejection)
// may escape the readers; anything else, or a sanitizer report, is a bug.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string_view>

#include "fusebench/advise.hpp"
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
  try {
    fusebench::advise::Table table =
        fusebench::advise::build({fusebench::advise::parse_report(text, "fuzz.json")});
    std::ostringstream sink;
    sink << fusebench::advise::to_json(table).dump() << fusebench::advise::to_markdown(table)
         << fusebench::advise::to_cpp(table) << fusebench::advise::to_python(table);
    // The gate's advice rule: the table against itself (nothing may flip) and against none.
    Result flips;
    compare_advice(table, table, flips);
    if (flips.failed()) __builtin_trap();
    compare_advice(table, fusebench::advise::Table{}, flips);
  } catch (const fusebench::advise::InputError&) {
  }
  return 0;
}
