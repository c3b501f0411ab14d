// Feeds the input to the chat-template interpreter as a template's text
// (after its first byte, which picks the conversation and the variables),
// parsed and rendered with small limits: the lexer, parser, evaluator,
// filters, methods and tojson on whatever a template file may hold.
// Finding: anything but a TemplateError escaping, a crash, a sanitizer
// report, a hang or a leak; also a generation span outside the text.
#include <cstdlib>
#include <string>

#include "engine/chat_template/chat_template.h"
#include "engine/chat_template/template_error.h"

namespace ct = accel::chat_template;

namespace {

ct::Value message(const char* role, const char* content) {
  ct::Dict m;
  m.set("content", content);
  m.set("role", role);
  return ct::Value(std::move(m));
}

ct::Dict variables(unsigned char pick) {
  ct::List messages;
  if (pick & 1) messages.push_back(message("system", "Be brief."));
  messages.push_back(message("user", "Hi \xc3\xa9 \xf0\x9f\x99\x82"));
  messages.push_back(message("assistant", "  Hello!  "));
  if (pick & 2) {
    ct::Dict call;
    call.set("arguments", ct::Value(ct::Dict{{{"city", ct::Value("Paris")}, {"days", ct::Value(int64_t{3})}}}));
    call.set("name", "get_weather");
    ct::Dict wrapped;
    wrapped.set("function", ct::Value(std::move(call)));
    ct::Dict m = message("assistant", "").as_dict();
    m.set("tool_calls", ct::Value(ct::List{ct::Value(std::move(wrapped))}));
    messages.push_back(ct::Value(std::move(m)));
    messages.push_back(message("tool", "22.5"));
  }
  ct::Dict vars;
  vars.set("messages", ct::Value(std::move(messages)));
  vars.set("add_generation_prompt", ct::Value((pick & 4) != 0));
  vars.set("tools", ct::Value::none());
  vars.set("bos_token", "<s>");
  vars.set("eos_token", "</s>");
  return vars;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string source(reinterpret_cast<const char*>(data) + 1, size - 1);
  ct::Limits limits;
  limits.max_output_bytes = 1 << 20;
  limits.max_steps = 200'000;
  limits.max_call_depth = 20;
  try {
    const ct::ChatTemplate t(source, "fuzz");
    const ct::Rendered r = t.render(variables(data[0]), limits, 0);
    for (const auto& [begin, end] : r.generation_spans) {
      if (begin > end || end > r.text.size()) std::abort();
    }
  } catch (const ct::TemplateError&) {
    // what a bad or hostile template gets
  }
  return 0;
}
