// accel-run's config file: a YAML mapping of keys to values, read before any
// worker starts. Which keys exist and what values they take is the option
// table's business (launch_option_table.cpp, launch_option_values.cpp); this file reads
// the YAML and keeps the line of every key, so each later complaint can
// name file and line.
//
// Where the file in force comes from: `--config FILE`, else the variable
// ACCEL_CONFIG_FILE, else the default file `accel-run config` writes
// ($XDG_CONFIG_HOME/accel/default_config.yaml, or ~/.config/accel/... when
// XDG_CONFIG_HOME is unset) if it exists.
#pragma once
#include <string>
#include <vector>

#include "engine/protocol/launch_options.h"

namespace accel {

// A config file that cannot be used; the message starts "FILE:LINE: " and
// names the key at fault. A LaunchOptionsError, so callers that report
// command-line mistakes report these the same way.
class ConfigError : public LaunchOptionsError {
 public:
  using LaunchOptionsError::LaunchOptionsError;
};

struct ConfigEntry {
  enum class Shape {
    plain,     // an unquoted scalar: `4`, `true`, `bf16`
    quoted,    // a quoted scalar: `'no'`, "4"
    empty,     // no value: `key:`
    compound,  // a list, or a mapping within a mapping (not read)
    mapping,   // a mapping at the top level: `fsdp_config:` with keys indented below it
  };
  std::string key;
  std::string text;  // the scalar's text; "a list" or "a mapping" for those; "" when empty
  Shape shape = Shape::plain;
  int line = 0;  // 1-based line of the key
  std::vector<ConfigEntry> entries;  // a mapping's, each key once
};

struct ConfigFile {
  std::string path;
  std::vector<ConfigEntry> entries;  // in file order, each key once
};

// Reads and parses `path`. Throws ConfigError for a missing or unreadable
// file, malformed YAML (with its line and column), a document that is not a
// mapping, a key that is not a plain word, or a key given twice in a mapping.
ConfigFile read_config_file(const std::string& path);

// The default config path for these variable values (either may be empty).
std::string default_config_path(const std::string& xdg_config_home, const std::string& home);
// The default config path for this process's environment.
std::string default_config_path();

}  // namespace accel
