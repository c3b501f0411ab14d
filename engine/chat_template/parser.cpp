#include "engine/chat_template/parser.h"

#include <cerrno>
#include <cstdlib>
#include <set>

#include "engine/chat_template/lexer.h"
#include "engine/chat_template/template_error.h"

namespace accel::chat_template {
namespace {

using K = Token::Kind;

ExprPtr node(Expr::Kind kind, int line, std::string name = {}) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  e->name = std::move(name);
  return e;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body run() {
    std::string ended;
    Body body = statements({}, ended);
    return body;
  }

 private:
  // --- statements

  // Statements up to a block whose keyword is in `enders` (its name goes to
  // `ended`, the tag's `{%` and keyword consumed) or the end of the template.
  Body statements(const std::set<std::string>& enders, std::string& ended) {
    Body body;
    const int start_line = peek().line;
    Nest nest(*this);
    while (true) {
      const Token& tok = peek();
      if (tok.kind == K::End) {
        if (!enders.empty()) {
          throw TemplateError("the block opened on line " + std::to_string(start_line) + " has no {% " +
                                  *enders.rbegin() + " %} before the template ends",
                              tok.line);
        }
        return body;
      }
      if (tok.kind == K::Text) {
        body.push_back(stmt(Stmt::Kind::Text, tok.line));
        body.back()->text = tok.value;
        next();
      } else if (tok.kind == K::PrintBegin) {
        next();
        auto s = stmt(Stmt::Kind::Print, tok.line);
        s->expr = tuple_or_expression();
        expect(K::PrintEnd, "}}");
        body.push_back(std::move(s));
      } else {
        expect(K::BlockBegin, "{%");
        const Token& keyword = peek();
        if (keyword.kind != K::Name) throw TemplateError("a block tag must start with a keyword", keyword.line);
        if (enders.count(keyword.value)) {
          ended = keyword.value;
          next();
          return body;
        }
        body.push_back(block());
      }
    }
  }

  std::unique_ptr<Stmt> stmt(Stmt::Kind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  Body end_block(const std::string& ender) {
    std::string ended;
    Body body = statements({ender}, ended);
    expect(K::BlockEnd, "%}");
    return body;
  }

  std::unique_ptr<Stmt> block() {
    const Token keyword = next();
    const std::string& k = keyword.value;
    const int line = keyword.line;
    if (k == "if") return if_block(line);
    if (k == "for") return for_block(line);
    if (k == "set") return set_block(line);
    if (k == "macro") return macro_block(line);
    if (k == "call") return call_block(line);
    if (k == "filter") {
      auto s = stmt(Stmt::Kind::FilterBlock, line);
      s->filter = filters(nullptr, true);
      expect(K::BlockEnd, "%}");
      s->body = end_block("endfilter");
      return s;
    }
    if (k == "generation") {
      auto s = stmt(Stmt::Kind::Generation, line);
      expect(K::BlockEnd, "%}");
      s->body = end_block("endgeneration");
      return s;
    }
    if (k == "break" || k == "continue") {
      if (loops_ == 0) throw TemplateError("'" + k + "' outside a for loop", line);
      expect(K::BlockEnd, "%}");
      return stmt(k == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, line);
    }
    if (k == "extends" || k == "include" || k == "import" || k == "from") {
      throw TemplateError("'" + k + "' reaches other templates, which a chat template cannot", line);
    }
    throw TemplateError("unknown tag '" + k + "'", line);
  }

  std::unique_ptr<Stmt> if_block(int line) {
    auto s = stmt(Stmt::Kind::If, line);
    ExprPtr cond = expression();
    expect(K::BlockEnd, "%}");
    while (true) {
      std::string ended;
      Body body = statements({"elif", "else", "endif"}, ended);
      s->branches.emplace_back(std::move(cond), std::move(body));
      if (ended == "elif") {
        cond = expression();
        expect(K::BlockEnd, "%}");
      } else if (ended == "else") {
        expect(K::BlockEnd, "%}");
        s->branches.emplace_back(nullptr, end_block("endif"));
        return s;
      } else {
        expect(K::BlockEnd, "%}");
        return s;
      }
    }
  }

  std::vector<std::string> names() {
    std::vector<std::string> out;
    do {
      out.push_back(name("a variable name"));
    } while (skip_operator(","));
    return out;
  }

  std::unique_ptr<Stmt> for_block(int line) {
    auto s = stmt(Stmt::Kind::For, line);
    const bool parenthesized = skip_operator("(");
    s->targets = names();
    if (parenthesized) expect_operator(")");
    if (!skip_name("in")) throw TemplateError("expected 'in' in the for tag", peek().line);
    s->expr = or_expression();  // `if` here filters the loop
    if (skip_name("if")) s->cond = expression();
    if (skip_name("recursive")) throw TemplateError("recursive for loops are not supported", line);
    expect(K::BlockEnd, "%}");
    ++loops_;
    std::string ended;
    s->body = statements({"else", "endfor"}, ended);
    --loops_;
    expect(K::BlockEnd, "%}");
    if (ended == "else") s->else_body = end_block("endfor");
    return s;
  }

  std::unique_ptr<Stmt> set_block(int line) {
    auto s = stmt(Stmt::Kind::Set, line);
    s->targets.push_back(name("a variable name"));
    if (skip_operator(".")) {
      s->attribute = name("an attribute name");
    } else {
      while (skip_operator(",")) s->targets.push_back(name("a variable name"));
    }
    if (skip_operator("=")) {
      s->expr = tuple_or_expression();
      expect(K::BlockEnd, "%}");
      return s;
    }
    if (!s->attribute.empty() || s->targets.size() != 1) {
      throw TemplateError("a block set assigns one variable", line);
    }
    s->kind = Stmt::Kind::SetBlock;
    if (peek_operator("|")) s->filter = filters(nullptr);
    expect(K::BlockEnd, "%}");
    s->body = end_block("endset");
    return s;
  }

  void parameters(Stmt& s) {
    expect_operator("(");
    while (!skip_operator(")")) {
      if (!s.params.empty()) expect_operator(",");
      if (skip_operator(")")) break;
      s.params.push_back(name("a parameter name"));
      s.defaults.push_back(skip_operator("=") ? expression() : nullptr);
    }
  }

  std::unique_ptr<Stmt> macro_block(int line) {
    auto s = stmt(Stmt::Kind::Macro, line);
    s->text = name("a macro name");
    parameters(*s);
    expect(K::BlockEnd, "%}");
    const int loops = loops_;
    loops_ = 0;  // a loop around the definition is not one around the body
    s->body = end_block("endmacro");
    loops_ = loops;
    return s;
  }

  std::unique_ptr<Stmt> call_block(int line) {
    auto s = stmt(Stmt::Kind::CallBlock, line);
    if (peek_operator("(")) parameters(*s);
    s->expr = expression();
    if (s->expr->kind != Expr::Kind::Call) throw TemplateError("a call block needs a macro call", line);
    expect(K::BlockEnd, "%}");
    s->body = end_block("endcall");
    return s;
  }

  // --- expressions

  // `a, b` at the top of {{ }} or a set: a tuple.
  ExprPtr tuple_or_expression() {
    const int line = peek().line;
    ExprPtr first = expression();
    if (!peek_operator(",")) return first;
    auto tuple = node(Expr::Kind::List, line, "tuple");
    tuple->args.push_back(std::move(first));
    while (skip_operator(",")) {
      if (peek().kind == K::PrintEnd || peek().kind == K::BlockEnd) break;
      tuple->args.push_back(expression());
    }
    return tuple;
  }

  ExprPtr expression() {
    Nest nest(*this);
    ExprPtr e = or_expression();
    while (skip_name("if")) {
      auto c = node(Expr::Kind::Conditional, e->line);
      ExprPtr cond = or_expression();
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(cond));
      c->args.push_back(skip_name("else") ? expression() : nullptr);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr or_expression() {
    ExprPtr e = and_expression();
    while (skip_name("or")) e = binary(Expr::Kind::Or, "or", std::move(e), and_expression());
    return e;
  }

  ExprPtr and_expression() {
    ExprPtr e = not_expression();
    while (skip_name("and")) e = binary(Expr::Kind::And, "and", std::move(e), not_expression());
    return e;
  }

  ExprPtr not_expression() {
    if (peek().kind == K::Name && peek().value == "not") {
      const int line = next().line;
      Nest nest(*this);
      auto e = node(Expr::Kind::Unary, line, "not");
      e->args.push_back(not_expression());
      return e;
    }
    return comparison();
  }

  ExprPtr comparison() {
    ExprPtr e = sum();
    while (true) {
      const Token& tok = peek();
      std::string op;
      if (tok.kind == K::Operator &&
          (tok.value == "==" || tok.value == "!=" || tok.value == "<" || tok.value == "<=" || tok.value == ">" ||
           tok.value == ">=")) {
        op = tok.value;
        next();
      } else if (skip_name("in")) {
        op = "in";
      } else if (tok.kind == K::Name && tok.value == "not" && at(1).kind == K::Name && at(1).value == "in") {
        next();
        next();
        op = "not in";
      } else {
        return e;
      }
      e = binary(Expr::Kind::Binary, op, std::move(e), sum());
    }
  }

  ExprPtr sum() {
    ExprPtr e = concat();
    while (peek_operator("+") || peek_operator("-")) {
      const std::string op = next().value;
      e = binary(Expr::Kind::Binary, op, std::move(e), concat());
    }
    return e;
  }

  ExprPtr concat() {
    ExprPtr e = product();
    while (skip_operator("~")) e = binary(Expr::Kind::Binary, "~", std::move(e), product());
    return e;
  }

  ExprPtr product() {
    ExprPtr e = power();
    while (peek_operator("*") || peek_operator("/") || peek_operator("//") || peek_operator("%")) {
      const std::string op = next().value;
      e = binary(Expr::Kind::Binary, op, std::move(e), power());
    }
    return e;
  }

  ExprPtr power() {
    ExprPtr e = unary(true);
    while (skip_operator("**")) e = binary(Expr::Kind::Binary, "**", std::move(e), unary(true));
    return e;
  }

  ExprPtr unary(bool with_filters) {
    Nest nest(*this);
    ExprPtr e;
    if (peek_operator("-") || peek_operator("+")) {
      const Token& op = next();
      e = node(Expr::Kind::Unary, op.line, op.value);
      e->args.push_back(unary(false));
    } else {
      e = postfix(primary());
    }
    if (with_filters) return filters(std::move(e));
    return e;
  }

  ExprPtr binary(Expr::Kind kind, const std::string& op, ExprPtr a, ExprPtr b) {
    auto e = node(kind, a->line, op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  ExprPtr primary() {
    const Token tok = next();
    switch (tok.kind) {
      case K::Name: {
        if (tok.value == "true" || tok.value == "True") return literal(Value(true), tok.line);
        if (tok.value == "false" || tok.value == "False") return literal(Value(false), tok.line);
        if (tok.value == "none" || tok.value == "None") return literal(Value::none(), tok.line);
        return node(Expr::Kind::Name, tok.line, tok.value);
      }
      case K::String: {
        std::string text = tok.value;
        while (peek().kind == K::String) text += next().value;  // adjacent literals join, as in Python
        return literal(Value(std::move(text)), tok.line);
      }
      case K::Integer: {
        errno = 0;
        const long long v = std::strtoll(tok.value.c_str(), nullptr, 10);
        if (errno == ERANGE) throw TemplateError("the integer " + tok.value + " is too large", tok.line);
        return literal(Value(static_cast<int64_t>(v)), tok.line);
      }
      case K::Float:
        return literal(Value(std::strtod(tok.value.c_str(), nullptr)), tok.line);
      case K::Operator:
        if (tok.value == "(") {
          if (skip_operator(")")) return node(Expr::Kind::List, tok.line, "tuple");
          ExprPtr first = expression();
          if (skip_operator(")")) return first;
          auto tuple = node(Expr::Kind::List, tok.line, "tuple");
          tuple->args.push_back(std::move(first));
          while (skip_operator(",")) {
            if (peek_operator(")")) break;
            tuple->args.push_back(expression());
          }
          expect_operator(")");
          return tuple;
        }
        if (tok.value == "[") {
          auto list = node(Expr::Kind::List, tok.line);
          while (!skip_operator("]")) {
            if (!list->args.empty()) expect_operator(",");
            if (skip_operator("]")) break;
            list->args.push_back(expression());
          }
          return list;
        }
        if (tok.value == "{") {
          auto dict = node(Expr::Kind::Dict, tok.line);
          while (!skip_operator("}")) {
            if (!dict->args.empty()) expect_operator(",");
            if (skip_operator("}")) break;
            dict->args.push_back(expression());
            expect_operator(":");
            dict->args.push_back(expression());
          }
          return dict;
        }
        break;
      default:
        break;
    }
    throw TemplateError("unexpected " + describe(tok) + " in an expression", tok.line);
  }

  ExprPtr literal(Value v, int line) {
    auto e = node(Expr::Kind::Literal, line);
    e->literal = std::move(v);
    return e;
  }

  ExprPtr postfix(ExprPtr e) {
    while (true) {
      if (skip_operator(".")) {
        const Token& tok = next();
        if (tok.kind == K::Integer) {  // foo.0, as Jinja: an item
          auto item = node(Expr::Kind::Item, tok.line);
          item->args.push_back(std::move(e));
          item->args.push_back(literal(Value(static_cast<int64_t>(std::stoll(tok.value))), tok.line));
          e = std::move(item);
          continue;
        }
        if (tok.kind != K::Name) throw TemplateError("expected an attribute name after '.'", tok.line);
        auto attr = node(Expr::Kind::Attribute, tok.line, tok.value);
        attr->args.push_back(std::move(e));
        e = std::move(attr);
      } else if (peek_operator("[")) {
        e = subscript(std::move(e));
      } else if (peek_operator("(")) {
        auto call = node(Expr::Kind::Call, peek().line);
        call->args.push_back(std::move(e));
        arguments(*call);
        e = std::move(call);
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr e) {
    const int line = next().line;  // [
    ExprPtr parts[3];
    int colons = 0;
    while (!skip_operator("]")) {
      if (skip_operator(":")) {
        if (++colons > 2) throw TemplateError("a slice has at most two ':'", line);
        continue;
      }
      if (parts[colons]) throw TemplateError("expected ':' or ']' in a subscript", line);
      parts[colons] = expression();
    }
    if (colons == 0) {
      if (!parts[0]) throw TemplateError("an empty subscript", line);
      auto item = node(Expr::Kind::Item, line);
      item->args.push_back(std::move(e));
      item->args.push_back(std::move(parts[0]));
      return item;
    }
    auto slice = node(Expr::Kind::Slice, line);
    slice->args.push_back(std::move(e));
    for (auto& p : parts) slice->args.push_back(std::move(p));
    return slice;
  }

  // (a, b, key=c) into e's args and kwargs.
  void arguments(Expr& e) {
    expect_operator("(");
    bool first = true;
    while (!skip_operator(")")) {
      if (!first) expect_operator(",");
      first = false;
      if (skip_operator(")")) break;
      if (peek().kind == K::Name && at(1).kind == K::Operator && at(1).value == "=") {
        std::string key = next().value;
        next();
        e.kwargs.emplace_back(std::move(key), expression());
      } else {
        if (!e.kwargs.empty()) throw TemplateError("a positional argument after a keyword one", peek().line);
        e.args.push_back(expression());
      }
    }
  }

  // `| f(args)` and `is [not] t args` after `e` (null in filter blocks,
  // whose first filter comes without its `|`: `bare_first`).
  ExprPtr filters(ExprPtr e, bool bare_first = false) {
    while (true) {
      if (bare_first || skip_operator("|")) {
        bare_first = false;
        const int line = peek().line;
        auto f = node(Expr::Kind::Filter, line, name("a filter name"));
        f->args.push_back(std::move(e));
        if (peek_operator("(")) arguments(*f);
        e = std::move(f);
      } else if (e && skip_name("is")) {
        const int line = peek().line;
        const bool negated = skip_name("not");
        auto t = node(Expr::Kind::Test, line, name("a test name"));
        t->negated = negated;
        t->args.push_back(std::move(e));
        if (peek_operator("(")) {
          arguments(*t);
        } else if (test_argument_follows()) {
          t->args.push_back(postfix(primary()));
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  // `x is divisibleby 3`, `x is sameas none`: one argument without parentheses.
  bool test_argument_follows() const {
    const Token& tok = peek();
    if (tok.kind == K::String || tok.kind == K::Integer || tok.kind == K::Float) return true;
    if (tok.kind == K::Operator) return tok.value == "[" || tok.value == "{";
    static const std::set<std::string> kStops = {"else", "or", "and", "if", "not", "in", "is"};
    return tok.kind == K::Name && !kStops.count(tok.value);
  }

  // --- tokens

  // Limits the parser's recursion: a template nested deeper is refused.
  struct Nest {
    explicit Nest(Parser& p) : p(p) {
      if (++p.depth_ > kMaxNesting) {
        throw TemplateError("the template nests deeper than " + std::to_string(kMaxNesting) + " levels",
                            p.peek().line);
      }
    }
    ~Nest() { --p.depth_; }
    Parser& p;
  };

  const Token& peek() const { return t_[i_]; }
  const Token& at(std::size_t ahead) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& next() {
    const Token& tok = t_[i_];
    if (i_ + 1 < t_.size()) ++i_;
    return tok;
  }
  bool peek_operator(const char* op) const { return peek().kind == K::Operator && peek().value == op; }
  bool skip_operator(const char* op) {
    if (!peek_operator(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* word) {
    if (peek().kind != K::Name || peek().value != word) return false;
    next();
    return true;
  }
  void expect_operator(const char* op) {
    if (!skip_operator(op)) throw TemplateError(std::string("expected '") + op + "', got " + describe(peek()), peek().line);
  }
  void expect(K kind, const char* what) {
    if (peek().kind != kind) throw TemplateError(std::string("expected '") + what + "', got " + describe(peek()), peek().line);
    next();
  }
  std::string name(const char* what) {
    if (peek().kind != K::Name) throw TemplateError(std::string("expected ") + what + ", got " + describe(peek()), peek().line);
    return next().value;
  }
  static std::string describe(const Token& tok) {
    switch (tok.kind) {
      case K::Text: return "text";
      case K::PrintBegin: return "'{{'";
      case K::PrintEnd: return "'}}'";
      case K::BlockBegin: return "'{%'";
      case K::BlockEnd: return "'%}'";
      case K::End: return "the end of the template";
      case K::String: return "a string";
      default: return "'" + tok.value + "'";
    }
  }

  std::vector<Token> t_;
  std::size_t i_ = 0;
  int depth_ = 0;
  int loops_ = 0;
};

}  // namespace

Body parse(const std::string& source) { return Parser(lex(source)).run(); }

}  // namespace accel::chat_template
