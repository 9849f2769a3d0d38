// A kiln::Error as the JSON the CLI prints for --json: what a program decides on (kind, exit
// code, context fields) beside the message a person reads.
#include <nlohmann/json.hpp>

#include "commands/commands.hpp"
#include "commands/error_json.hpp"
#include "kiln/error.hpp"

namespace kiln::commands {

nlohmann::ordered_json error_fields_json(const Error& e) {
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();
  // The first value of a name wins, as Error::field has it.
  for (const auto& f : e.fields())
    if (!fields.contains(f.name)) fields[f.name] = f.value;
  return fields;
}

std::string error_json(const Error& e) {
  nlohmann::ordered_json j = {{"error",
                               {{"kind", to_string(e.kind())},
                                {"exit_code", exit_code(e.kind())},
                                {"message", e.what()},
                                {"fields", error_fields_json(e)}}}};
  return j.dump();
}

bool json_requested(const CLI::App& app) {
  const CLI::App* sub = &app;
  while (!sub->get_subcommands().empty()) sub = sub->get_subcommands().front();
  const CLI::Option* json = sub->get_option_no_throw("--json");
  return json && json->count() > 0;
}

}  // namespace kiln::commands
