#pragma once
// The JSON forms of a kiln::Error the commands print (error_json.cpp).
#include <nlohmann/json.hpp>

#include "kiln/error.hpp"

namespace kiln::commands {

// An Error's fields as {name: value, ...}; the first value of a name wins, as Error::field has it.
nlohmann::ordered_json error_fields_json(const Error& e);

}  // namespace kiln::commands
