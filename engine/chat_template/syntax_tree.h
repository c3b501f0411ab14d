// A parsed template: statements holding expressions, each with the line it
// came from (for errors). The parser (parser.h) makes them, the evaluator
// (evaluator.h) walks them; nothing else reads the template's text.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/chat_template/value.h"

namespace accel::chat_template {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,    // literal
    Name,       // name
    Attribute,  // args[0].name
    Item,       // args[0][args[1]]
    Slice,      // args[0][args[1]:args[2]:args[3]] (absent parts null)
    Call,       // args[0](args[1:], kwargs)
    Filter,     // args[0] | name(args[1:], kwargs); args[0] null in a filter block
    Test,       // args[0] is [not] name(args[1:])
    Unary,      // name ("-", "+", "not") args[0]
    Binary,     // args[0] name args[1]: arithmetic, "~", comparisons, "in", "not in"
    And,
    Or,
    Conditional,  // args[0] if args[1] else args[2] (null: undefined)
    List,         // [args...], or a tuple (name "tuple")
    Dict,         // {args[2i]: args[2i+1]}
  };
  Kind kind;
  int line;
  std::string name;
  Value literal;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // `is not`
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    Text,        // text
    Print,       // {{ expr }}
    If,          // branches (cond null: else)
    For,         // for targets in expr [if cond]: body [else else_body]
    Set,         // set targets = expr; `set ns.attr = expr` has attribute
    SetBlock,    // set targets[0] [| filter] : body
    Macro,       // macro name(params = defaults): body
    CallBlock,   // call[(params)] expr: body, the callee's caller()
    FilterBlock, // filter filter: body
    Generation,  // generation: body (transformers' assistant masks)
    Break,
    Continue,
  };
  Kind kind;
  int line;
  std::string text;
  std::vector<std::string> targets;
  std::string attribute;
  ExprPtr expr;
  ExprPtr cond;
  ExprPtr filter;  // Expr::Kind::Filter chain whose innermost input is null
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // one per param, null where none
};

}  // namespace accel::chat_template
