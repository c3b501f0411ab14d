#include "engine/chat_template/evaluator.h"

#include "engine/chat_template/builtins.h"
#include "engine/chat_template/filters.h"
#include "engine/chat_template/operators.h"
#include "engine/chat_template/template_error.h"

namespace accel::chat_template {
namespace {

struct Scope {
  Dict vars;
  Scope* parent;
};

enum class Flow { Normal, Break, Continue };

// Rethrows an error raised below a node with the node's line, once.
[[noreturn]] void relocate(const TemplateError& e, int line) {
  if (dynamic_cast<const TemplateRaised*>(&e)) throw TemplateRaised(e.what(), line);
  throw TemplateError(e.what(), line);
}

class Evaluator {
 public:
  Evaluator(const Dict& variables, const Limits& limits, int64_t clock)
      : budget_(limits), globals_(builtin_globals(clock)), variables_(variables) {}

  Rendered run(const Body& body) {
    out_ = &result_.text;
    exec(body, top_);
    return std::move(result_);
  }

 private:
  // --- statements

  Flow exec(const Body& body, Scope& scope) {
    for (const auto& s : body) {
      Flow flow;
      try {
        flow = statement(*s, scope);
      } catch (const TemplateError& e) {
        if (e.line() != 0) throw;
        relocate(e, s->line);
      }
      if (flow != Flow::Normal) return flow;
    }
    return Flow::Normal;
  }

  void write(const std::string& text) {
    out_->append(text);
    budget_.check_size(out_->size(), "the rendered text");
  }

  // The output of `body` run in `scope`, not written.
  std::string capture(const Body& body, Scope& scope) {
    std::string buffer;
    std::string* saved = out_;
    out_ = &buffer;
    try {
      exec(body, scope);
    } catch (...) {
      out_ = saved;
      throw;
    }
    out_ = saved;
    return buffer;
  }

  Flow statement(const Stmt& s, Scope& scope) {
    budget_.step();
    switch (s.kind) {
      case Stmt::Kind::Text:
        write(s.text);
        return Flow::Normal;
      case Stmt::Kind::Print:
        write(to_str(eval(*s.expr, scope)));
        return Flow::Normal;
      case Stmt::Kind::If:
        for (const auto& [cond, body] : s.branches) {
          if (!cond || eval(*cond, scope).truthy()) return exec(body, scope);
        }
        return Flow::Normal;
      case Stmt::Kind::For:
        for_loop(s, scope);
        return Flow::Normal;
      case Stmt::Kind::Set: {
        Value v = eval(*s.expr, scope);
        if (s.attribute.empty()) {
          bind(s.targets, std::move(v), scope);
          return Flow::Normal;
        }
        const Value ns = lookup(s.targets[0], scope);
        if (!ns.is_dict() || !ns.as_dict().is_namespace) {
          throw TemplateError("cannot set attribute '" + s.attribute + "' of '" + s.targets[0] +
                              "': only a namespace() has attributes a template may set");
        }
        ns.mutable_dict().set(s.attribute, std::move(v));
        return Flow::Normal;
      }
      case Stmt::Kind::SetBlock: {
        Value v(capture(s.body, scope));
        if (s.filter) v = filter_chain(*s.filter, v, scope);
        bind(s.targets, std::move(v), scope);
        return Flow::Normal;
      }
      case Stmt::Kind::Macro:
        scope.vars.set(s.text, Value::function(s.text, [this, &s](Call& c) { return call_macro(s, c); }));
        return Flow::Normal;
      case Stmt::Kind::CallBlock:
        write(to_str(call_block(s, scope)));
        return Flow::Normal;
      case Stmt::Kind::FilterBlock:
        write(to_str(filter_chain(*s.filter, Value(capture(s.body, scope)), scope)));
        return Flow::Normal;
      case Stmt::Kind::Generation: {
        // As transformers' AssistantTracker: the body's text, placed where
        // the top-level text has reached.
        const std::string text = capture(s.body, scope);
        const std::size_t start = result_.text.size();
        result_.generation_spans.emplace_back(start, start + text.size());
        write(text);
        return Flow::Normal;
      }
      case Stmt::Kind::Break:
        return Flow::Break;
      case Stmt::Kind::Continue:
        return Flow::Continue;
    }
    return Flow::Normal;
  }

  void bind(const std::vector<std::string>& targets, Value v, Scope& scope) {
    if (targets.size() == 1) {
      scope.vars.set(targets[0], std::move(v));
      return;
    }
    if (!v.is_list() || v.as_list().size() != targets.size()) {
      throw TemplateError("cannot unpack " + (v.is_list() ? std::to_string(v.as_list().size()) + " values" : std::string("a ") + v.type_name()) +
                          " into " + std::to_string(targets.size()) + " names");
    }
    for (std::size_t i = 0; i < targets.size(); ++i) scope.vars.set(targets[i], v.as_list()[i]);
  }

  void for_loop(const Stmt& s, Scope& scope) {
    const Value iterable = eval(*s.expr, scope);
    List items = iterate(iterable);
    Scope inner{{}, &scope};
    if (s.cond) {
      List kept;
      for (Value& v : items) {
        budget_.step();
        bind(s.targets, v, inner);
        if (eval(*s.cond, inner).truthy()) kept.push_back(std::move(v));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      exec(s.else_body, inner);
      return;
    }
    // One `loop` object whose fields change each turn, as Jinja's LoopContext.
    const int64_t n = static_cast<int64_t>(items.size());
    auto index = std::make_shared<int64_t>(0);
    Dict fields;
    for (const char* name : {"index", "index0", "revindex", "revindex0", "first", "last", "previtem", "nextitem"}) {
      fields.set(name, Value());
    }
    fields.set("length", Value(n));
    fields.set("depth", Value(int64_t{1}));
    fields.set("depth0", Value(int64_t{0}));
    fields.set("cycle", Value::function("loop.cycle", [index](Call& c) {
                 if (c.args.empty()) c.fail("needs at least one value");
                 return c.args[static_cast<std::size_t>(*index) % c.args.size()];
               }));
    const Value loop(std::move(fields));
    inner.vars.set("loop", loop);
    auto& f = loop.mutable_dict().items;
    for (int64_t i = 0; i < n; ++i) {
      budget_.step();
      *index = i;
      bind(s.targets, items[static_cast<std::size_t>(i)], inner);
      f[0].second = Value(i + 1);
      f[1].second = Value(i);
      f[2].second = Value(n - i);
      f[3].second = Value(n - i - 1);
      f[4].second = Value(i == 0);
      f[5].second = Value(i == n - 1);
      f[6].second = i > 0 ? items[static_cast<std::size_t>(i - 1)] : Value::undefined("there is no previous item");
      f[7].second = i + 1 < n ? items[static_cast<std::size_t>(i + 1)] : Value::undefined("there is no next item");
      if (exec(s.body, inner) == Flow::Break) break;
    }
  }

  // A macro's parameters from the call: positions, then names, then defaults
  // (evaluated in the macro's own scope, so they may use earlier ones).
  void bind_parameters(const Stmt& s, Call& c, Scope& scope, const std::string& what) {
    if (c.args.size() > s.params.size()) {
      throw TemplateError(what + " takes " + std::to_string(s.params.size()) + " argument(s), got " + std::to_string(c.args.size()));
    }
    for (const auto& [key, value] : c.kwargs) {
      if (key == "caller") {
        scope.vars.set("caller", value);
        continue;
      }
      bool known = false;
      for (std::size_t i = 0; i < s.params.size(); ++i) known |= s.params[i] == key && i >= c.args.size();
      if (!known) throw TemplateError(what + " has no argument '" + key + "' (or got it twice)");
    }
    for (std::size_t i = 0; i < s.params.size(); ++i) {
      Value v = c.arg(i, s.params[i].c_str());
      if (v.is_undefined()) {
        v = s.defaults[i] ? eval(*s.defaults[i], scope) : Value::undefined("'" + s.params[i] + "' was not given to " + what);
      }
      scope.vars.set(s.params[i], std::move(v));
    }
  }

  Value call_macro(const Stmt& s, Call& c) {
    if (depth_ >= budget_.limits().max_call_depth) {
      throw TemplateError("macro '" + s.text + "' called " + std::to_string(depth_) +
                          " deep: past the template's limit (a macro calling itself without end?)");
    }
    ++depth_;
    Scope scope{{}, &top_};
    try {
      bind_parameters(s, c, scope, "macro '" + s.text + "'");
      Value out(capture(s.body, scope));
      --depth_;
      return out;
    } catch (...) {
      --depth_;
      throw;
    }
  }

  Value call_block(const Stmt& s, Scope& scope) {
    const Expr& call = *s.expr;
    const Value callee = eval(*call.args[0], scope);
    Call c = arguments(call, scope, callee);
    c.kwargs.emplace_back("caller", Value::function("caller", [this, &s, &scope](Call& inner) {
                            Scope caller_scope{{}, &scope};
                            bind_parameters(s, inner, caller_scope, "caller()");
                            return Value(capture(s.body, caller_scope));
                          }));
    return invoke(callee, c);
  }

  // --- expressions

  Value lookup(const std::string& name, const Scope& scope) const {
    for (const Scope* s = &scope; s; s = s->parent) {
      if (const Value* v = s->vars.find(name)) return *v;
    }
    if (const Value* v = variables_.find(name)) return *v;
    if (const Value* v = globals_.find(name)) return *v;
    return Value::undefined("'" + name + "' is undefined");
  }

  Call arguments(const Expr& e, Scope& scope, const Value& callee) {
    Call c{"'" + callee.note() + "'", {}, {}, budget_};
    for (std::size_t i = 1; i < e.args.size(); ++i) c.args.push_back(e.args[i] ? eval(*e.args[i], scope) : Value());
    for (const auto& [key, value] : e.kwargs) c.kwargs.emplace_back(key, eval(*value, scope));
    return c;
  }

  Value invoke(const Value& callee, Call& c) {
    require_defined(callee, "it was called");
    if (!callee.is_callable()) throw TemplateError(std::string("a ") + callee.type_name() + " is not callable");
    return callee.as_function()(c);
  }

  Value filter_chain(const Expr& f, const Value& input, Scope& scope) {
    // A filter block's chain ends in a null input: the block's text.
    const Expr* inner = f.args[0].get();
    const Value in = !inner ? input : inner->kind == Expr::Kind::Filter ? filter_chain(*inner, input, scope) : eval(*inner, scope);
    Call c = arguments(f, scope, Value());
    c.what = "filter '" + f.name + "'";
    return apply_filter(f.name, in, c);
  }

  Value eval(const Expr& e, Scope& scope) {
    try {
      return expression(e, scope);
    } catch (const TemplateError& error) {
      if (error.line() != 0) throw;
      relocate(error, e.line);
    }
  }

  Value expression(const Expr& e, Scope& scope) {
    budget_.step();
    switch (e.kind) {
      case Expr::Kind::Literal:
        return e.literal;
      case Expr::Kind::Name:
        return lookup(e.name, scope);
      case Expr::Kind::Attribute:
        return attribute(eval(*e.args[0], scope), e.name);
      case Expr::Kind::Item:
        return item(eval(*e.args[0], scope), eval(*e.args[1], scope));
      case Expr::Kind::Slice: {
        Value parts[3];
        for (int i = 0; i < 3; ++i) {
          if (e.args[static_cast<std::size_t>(i) + 1]) parts[i] = eval(*e.args[static_cast<std::size_t>(i) + 1], scope);
        }
        return slice(eval(*e.args[0], scope), parts[0], parts[1], parts[2], budget_);
      }
      case Expr::Kind::Call: {
        const Value callee = eval(*e.args[0], scope);
        Call c = arguments(e, scope, callee);
        return invoke(callee, c);
      }
      case Expr::Kind::Filter:
        return filter_chain(e, Value(), scope);
      case Expr::Kind::Test: {
        const Value subject = eval(*e.args[0], scope);
        Call c = arguments(e, scope, Value());
        c.what = "test '" + e.name + "'";
        return Value(apply_test(e.name, subject, c) != e.negated);
      }
      case Expr::Kind::Unary: {
        const Value v = eval(*e.args[0], scope);
        if (e.name == "not") return Value(!v.truthy());
        return negate(v, e.name == "-");
      }
      case Expr::Kind::Binary: {
        const Value a = eval(*e.args[0], scope);
        return binary(e.name, a, eval(*e.args[1], scope), budget_);
      }
      case Expr::Kind::And: {
        Value a = eval(*e.args[0], scope);
        return a.truthy() ? eval(*e.args[1], scope) : a;
      }
      case Expr::Kind::Or: {
        Value a = eval(*e.args[0], scope);
        return a.truthy() ? a : eval(*e.args[1], scope);
      }
      case Expr::Kind::Conditional:
        if (eval(*e.args[1], scope).truthy()) return eval(*e.args[0], scope);
        return e.args[2] ? eval(*e.args[2], scope) : Value::undefined("the condition was false and there is no else");
      case Expr::Kind::List: {
        List out;
        for (const auto& a : e.args) out.push_back(eval(*a, scope));
        return e.name == "tuple" ? Value::tuple(std::move(out)) : Value(std::move(out));
      }
      case Expr::Kind::Dict: {
        Dict out;
        for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
          const Value key = eval(*e.args[i], scope);
          if (!key.is_string()) throw TemplateError(std::string("a dict key must be a string here, got a ") + key.type_name());
          out.set(key.as_string(), eval(*e.args[i + 1], scope));
        }
        return Value(std::move(out));
      }
    }
    throw TemplateError("unknown expression");
  }

  Budget budget_;
  Dict globals_;
  const Dict& variables_;
  Scope top_{{}, nullptr};
  Rendered result_;
  std::string* out_ = nullptr;
  int depth_ = 0;
};

}  // namespace

Rendered evaluate(const Body& body, const Dict& variables, const Limits& limits, int64_t clock) {
  return Evaluator(variables, limits, clock).run(body);
}

}  // namespace accel::chat_template
