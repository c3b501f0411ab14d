#include "engine/chat_template/syntax_tree.h"

namespace accel::chat_template {

ExprPtr copy(const Expr& from) {
  auto e = std::make_unique<Expr>();
  e->kind = from.kind;
  e->line = from.line;
  e->name = from.name;
  e->literal = from.literal;
  e->negated = from.negated;
  for (const auto& a : from.args) e->args.push_back(a ? copy(*a) : nullptr);
  for (const auto& [key, value] : from.kwargs) e->kwargs.emplace_back(key, copy(*value));
  return e;
}

}  // namespace accel::chat_template
