#include "engine/protocol/config_file.h"

#include <yaml-cpp/yaml.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>

namespace accel {
namespace {

std::string at_line(const std::string& path, int line) {
  return path + ":" + std::to_string(line) + ": ";
}

const char* shape_name(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Null: return "nothing";
    default: return "a value";
  }
}

// Keys read inside the top level's mappings, in all: an alias repeats a
// mapping under as many keys as a file names it, so a small file could
// expand without end.
constexpr size_t kMaxNestedKeys = 4096;

// The entries of `map`. With `nested_budget` (at the top level), the
// entries of a mapping among them are read too, as many as the budget
// allows; deeper mappings are compound.
std::vector<ConfigEntry> read_entries(const YAML::Node& map, const std::string& path,
                                      size_t* nested_budget) {
  std::vector<ConfigEntry> entries;
  std::map<std::string, int> seen;  // key -> its line
  // Each pair is a value yaml-cpp's iterator makes on the fly: bound to the
  // loop's reference it lives through the body (`it->first` is a member of
  // a temporary that ends with its expression).
  for (const auto& pair : map) {
    const YAML::Node& key = pair.first;
    const YAML::Node& value = pair.second;
    ConfigEntry entry;
    entry.line = key.Mark().line + 1;
    if (!key.IsScalar()) {
      throw ConfigError(at_line(path, entry.line) + "a key must be a plain word, not " +
                        shape_name(key));
    }
    entry.key = key.Scalar();
    auto [previous, fresh] = seen.emplace(entry.key, entry.line);
    if (!fresh) {
      throw ConfigError(at_line(path, entry.line) + "key '" + entry.key +
                        "' is given twice (first at line " + std::to_string(previous->second) +
                        ")");
    }
    if (value.IsNull() && value.Tag() != "!") {
      entry.shape = ConfigEntry::Shape::empty;
    } else if (value.IsScalar()) {
      entry.text = value.Scalar();
      // yaml-cpp tags a quoted scalar "!" and a plain one "?".
      entry.shape = value.Tag() == "!" ? ConfigEntry::Shape::quoted : ConfigEntry::Shape::plain;
    } else if (value.IsMap() && nested_budget) {
      if (value.size() > *nested_budget) {
        throw ConfigError(at_line(path, entry.line) + "the config holds more than " +
                          std::to_string(kMaxNestedKeys) + " nested keys; is it a config file?");
      }
      *nested_budget -= value.size();
      entry.shape = ConfigEntry::Shape::mapping;
      entry.text = shape_name(value);
      entry.entries = read_entries(value, path, nullptr);
    } else {
      entry.shape = ConfigEntry::Shape::compound;
      entry.text = shape_name(value);
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

// A config file is a few lines: a path that reads without end
// (--config /dev/zero) or a huge file is refused, not read into memory, and
// one that gives nothing for kWaitSeconds (a FIFO nobody writes to, a
// terminal) too. A FIFO that is written to, as a shell's <(...) is, reads.
std::string read_config_text(const std::string& path) {
  constexpr size_t kMaxBytes = 1 << 20;
  constexpr int kWaitSeconds = 5;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw ConfigError("cannot read the config file '" + path + "': " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) == 0 && S_ISDIR(info.st_mode)) {
    throw ConfigError("the config file '" + path + "' is a folder");
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kWaitSeconds);
  // A FIFO's reader sees end of file while no writer has come yet: it waits
  // for its first bytes (or a writer that closes) before reading.
  bool waiting = S_ISFIFO(info.st_mode);
  std::string contents;
  char buffer[65536];
  for (;;) {
    if (waiting) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd readable{fd, POLLIN, 0};
      const int ready = left.count() > 0 ? ::poll(&readable, 1, static_cast<int>(left.count())) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        throw ConfigError("the config file '" + path + "' gave nothing to read within " +
                          std::to_string(kWaitSeconds) + " s (a FIFO nobody writes to?)");
      }
      waiting = false;
    }
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        waiting = true;
        continue;
      }
      throw ConfigError("cannot read the config file '" + path + "': " + std::strerror(errno));
    }
    contents.append(buffer, static_cast<size_t>(n));
    if (contents.size() > kMaxBytes) {
      throw ConfigError("the config file '" + path + "' is larger than 1 MiB; is it a config file?");
    }
  }
  return contents;
}

}  // namespace

ConfigFile read_config_file(const std::string& path) {
  const std::string contents = read_config_text(path);

  YAML::Node root;
  try {
    root = YAML::Load(contents);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(path + ":" + std::to_string(e.mark.line + 1) + ":" +
                      std::to_string(e.mark.column + 1) + ": malformed YAML: " + e.msg);
  }
  ConfigFile file{path, {}};
  if (root.IsNull()) return file;  // an empty file sets nothing
  if (!root.IsMap()) {
    throw ConfigError(at_line(path, root.Mark().line + 1) +
                      "the config must be a mapping of keys to values (key: value), not " +
                      shape_name(root));
  }
  size_t nested_budget = kMaxNestedKeys;
  file.entries = read_entries(root, path, &nested_budget);
  return file;
}

std::string default_config_path(const std::string& xdg_config_home, const std::string& home) {
  std::string base = !xdg_config_home.empty() ? xdg_config_home
                     : !home.empty()          ? home + "/.config"
                                              : ".config";
  return base + "/accel/default_config.yaml";
}

std::string default_config_path() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  const char* home = std::getenv("HOME");
  return default_config_path(xdg ? xdg : "", home ? home : "");
}

}  // namespace accel
