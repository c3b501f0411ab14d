#include "engine/tokenizers/kept_tokenizers.h"

#include <sys/stat.h>

namespace accel::tokenizers {

KeptTokenizer KeptTokenizers::read(const std::string& path) {
  struct stat st {};
  std::string key;
  if (::stat(path.c_str(), &st) == 0) {
    key = path + '\n' + std::to_string(st.st_dev) + ':' + std::to_string(st.st_ino) + ':' +
          std::to_string(st.st_size) + ':' + std::to_string(st.st_mtim.tv_sec) + '.' +
          std::to_string(st.st_mtim.tv_nsec);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      it->second.used = true;
      ++found_;
      return it->second.kept;
    }
  }
  TokenizerFile file = read_tokenizer_json(path);  // names the file when it cannot
  KeptTokenizer kept{std::move(file.tokenizer), file.padding};
  if (!key.empty()) entries_[key] = Entry{kept, true};
  return kept;
}

void KeptTokenizers::end_run() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (!it->second.used) {
      it = entries_.erase(it);
    } else {
      it->second.used = false;
      ++it;
    }
  }
}

}  // namespace accel::tokenizers
