#include "engine/chat_template/json_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/chat_template/template_error.h"
#include "engine/tokenizers/utf8.h"

namespace accel::chat_template {
namespace {

void hex_escape(std::string& out, unsigned code) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\u%04x", code);
  out += buf;
}

void quote(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const auto byte = static_cast<unsigned char>(s[i]);
    if (byte >= 0x80) {
      const std::size_t start = i;
      const char32_t c = tokenizers::next_code_point(s, i);
      if (!ensure_ascii) {
        out.append(s, start, i - start);
      } else if (c >= 0x10000) {
        hex_escape(out, 0xD800 + ((c - 0x10000) >> 10));
        hex_escape(out, 0xDC00 + ((c - 0x10000) & 0x3FF));
      } else {
        hex_escape(out, c);
      }
      continue;
    }
    ++i;
    switch (byte) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (byte < 0x20) {
          hex_escape(out, byte);
        } else {
          out += static_cast<char>(byte);
        }
    }
  }
  out += '"';
}

class Writer {
 public:
  Writer(const JsonOptions& o, Budget& budget)
      : o_(o),
        budget_(budget),
        item_sep_(o.item_separator.value_or(o.indent ? "," : ", ")),
        key_sep_(o.key_separator.value_or(": ")) {}

  void value(const Value& v, int level) {
    budget_.step();
    budget_.check_size(out.size(), "tojson's text");
    switch (v.kind()) {
      case Value::Kind::None: out += "null"; return;
      case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
      case Value::Kind::Int: out += std::to_string(v.as_int()); return;
      case Value::Kind::Float: {
        const double d = v.as_number();
        out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : float_repr(d);
        return;
      }
      case Value::Kind::String: quote(out, v.as_string(), o_.ensure_ascii); return;
      case Value::Kind::List: {
        const List& list = v.as_list();
        if (list.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (std::size_t i = 0; i < list.size(); ++i) {
          separate(i, level + 1);
          value(list[i], level + 1);
        }
        close(level, ']');
        return;
      }
      case Value::Kind::Dict: {
        std::vector<const std::pair<std::string, Value>*> items;
        for (const auto& item : v.as_dict().items) items.push_back(&item);
        if (items.empty()) {
          out += "{}";
          return;
        }
        if (o_.sort_keys) {
          std::sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
        }
        out += '{';
        for (std::size_t i = 0; i < items.size(); ++i) {
          separate(i, level + 1);
          quote(out, items[i]->first, o_.ensure_ascii);
          out += key_sep_;
          value(items[i]->second, level + 1);
        }
        close(level, '}');
        return;
      }
      default:
        throw TemplateError(std::string("tojson cannot write ") +
                            (v.is_undefined() ? "an undefined value" + (v.note().empty() ? "" : " (" + v.note() + ")")
                                              : std::string("a ") + v.type_name()));
    }
  }

  std::string out;

 private:
  void newline(int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += *o_.indent;
  }
  void separate(std::size_t i, int level) {
    if (i > 0) out += item_sep_;
    if (o_.indent) newline(level);
  }
  void close(int level, char bracket) {
    if (o_.indent) newline(level);
    out += bracket;
  }

  const JsonOptions& o_;
  Budget& budget_;
  std::string item_sep_;
  std::string key_sep_;
};

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options, Budget& budget) {
  Writer w(options, budget);
  w.value(v, 0);
  return std::move(w.out);
}

}  // namespace accel::chat_template
