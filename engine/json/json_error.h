// The one error type of the JSON reader. It keeps apart the source (a file
// name, "'x.jsonl' line 3") and what is wrong with it, so that a caller
// that names the source its own way (accel-run plot's "file:line: ")
// reuses the problem without cutting the message apart.
#pragma once
#include <stdexcept>
#include <string>

namespace accel::strict_json {

class JsonError : public std::runtime_error {
 public:
  // "'<source>' <problem>", or `problem` alone for an empty source.
  JsonError(const std::string& source, const std::string& problem)
      : std::runtime_error(source.empty() ? problem : "'" + source + "' " + problem), problem_(problem) {}

  // "is not valid JSON: ...", "has the key 'a' twice in one object"...
  const std::string& problem() const { return problem_; }

 private:
  std::string problem_;
};

}  // namespace accel::strict_json
