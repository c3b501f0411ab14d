// The chat-template interpreter alone (engine/chat_template/): each Jinja2
// feature chat templates use, with the text Jinja2 (as transformers sets it
// up) gives for it, whitespace control, Python's printing, the sandbox
// and the limits that end hostile templates, and errors naming the line.
// tests/tokenizers/test_chat_template_parity.sh compares whole templates
// with transformers itself.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "engine/chat_template/assistant_mask.h"
#include "engine/chat_template/chat_template.h"
#include "engine/chat_template/template_error.h"

namespace ct = accel::chat_template;

namespace {

ct::Dict message(const std::string& role, const std::string& content) {
  ct::Dict m;
  m.set("content", content);
  m.set("role", role);
  return m;
}

ct::Dict chat_variables() {
  ct::Dict vars;
  vars.set("messages", ct::Value(ct::List{ct::Value(message("system", "Be brief.")), ct::Value(message("user", "Hi")),
                                          ct::Value(message("assistant", "Hello!"))}));
  vars.set("add_generation_prompt", ct::Value(true));
  vars.set("tools", ct::Value::none());
  vars.set("bos_token", "<s>");
  return vars;
}

ct::Rendered render_full(const std::string& source, const ct::Dict& vars = chat_variables(), ct::Limits limits = {}) {
  return ct::ChatTemplate(source, "'test.jinja'").render(vars, limits, 0);
}

std::string render(const std::string& source, const ct::Dict& vars = chat_variables()) {
  return render_full(source, vars).text;
}

std::string error_of(const std::string& source, ct::Limits limits = {}) {
  try {
    render_full(source, chat_variables(), limits);
  } catch (const ct::TemplateError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("chat template: statements", "[chat_template]") {
  CHECK(render("{% if 1 > 2 %}a{% elif 2 > 1 %}b{% else %}c{% endif %}") == "b");
  CHECK(render("{% if none %}a{% else %}c{% endif %}") == "c");
  CHECK(render("{% for m in messages %}{{ m.role }},{% endfor %}") == "system,user,assistant,");
  CHECK(render("{% for m in [] %}x{% else %}empty{% endfor %}") == "empty");
  CHECK(render("{% for m in messages if m.role != 'system' %}{{ loop.index }}{{ m.role }}{% endfor %}") == "1user2assistant");
  CHECK(render("{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}") == "02");
  CHECK(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}") == "a=1;b=2;");
  // set in a loop stays in it; a namespace carries out
  CHECK(render("{% set x = 0 %}{% set ns = namespace(x=0) %}{% for i in [1, 2] %}{% set x = x + i %}{% set ns.x = ns.x + i %}{% endfor %}{{ x }},{{ ns.x }}") == "0,3");
  CHECK(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}") == "21");
  CHECK(render("{% set block %} in {{ 1 + 1 }} {% endset %}[{{ block }}]") == "[ in 2 ]");
  CHECK(render("{% set block | trim | upper %} in {% endset %}[{{ block }}]") == "[IN]");
  CHECK(render("{% macro tag(name, close=false) %}<{{ '/' if close }}{{ name }}>{% endmacro %}{{ tag('a') }}{{ tag('a', close=true) }}") == "<a></a>");
  CHECK(render("{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}inside{% endcall %}") == "[inside]");
  CHECK(render("{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(x) each([1, 2]) %}<{{ x }}>{% endcall %}") == "<1><2>");
  CHECK(render("{% filter upper %}shout {{ 'this' }}{% endfilter %}") == "SHOUT THIS");
  CHECK(render("{# a comment #}x{% raw %}{{ not run }}{% endraw %}") == "x{{ not run }}");
}

TEST_CASE("chat template: loop variables", "[chat_template]") {
  CHECK(render("{% for x in 'abc' %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }} {% endfor %}") ==
        "03TrueFalse3 12FalseFalse3 21FalseTrue3 ");
  CHECK(render("{% for x in [1, 2, 3] %}{{ loop.previtem | default('-') }}{{ loop.nextitem | default('-') }} {% endfor %}") == "-2 13 2- ");
  CHECK(render("{% for x in [1, 2, 3] %}{{ loop.cycle('a', 'b') }}{% endfor %}") == "aba");
}

TEST_CASE("chat template: expressions", "[chat_template]") {
  CHECK(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }}") == "3 -4 2 3.5 1024 7 9");
  CHECK(render("{{ 'a' ~ 1 ~ none ~ true }} {{ 'ab' * 2 }} {{ [1] + [2] }}") == "a1NoneTrue abab [1, 2]");
  CHECK(render("{{ 'b' in 'abc' }} {{ 2 not in [1, 2] }} {{ 'role' in messages[0] }}") == "True False True");
  CHECK(render("{{ 1 < 2 and 'x' or 'y' }} {{ 0 or 'fallback' }} {{ not 0 }}") == "x fallback True");
  CHECK(render("{{ 'yes' if messages | length > 2 else 'no' }}") == "yes");
  CHECK(render("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1 != 2 }}") == "True False True");
  CHECK(render("{{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ [1, 2, 3, 4][-2:] }} {{ 'héllo'[1] }}") == "el olleh [3, 4] é");
  CHECK(render("{{ messages[-1]['content'] }} {{ messages[0].role }} {{ messages[5] is defined }}") == "Hello! system False");
  CHECK(render("{{ {'a': [1, {'b': none}]} }} {{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 2.5e-5 }} {{ 'it\\'s' }}") ==
        "{'a': [1, {'b': None}]} 1.0 0.30000000000000004 1e+20 2.5e-05 it's");
  CHECK(render("{{ [\"it's\", 'a\\nb'] }}") == "[\"it's\", 'a\\nb']");
  CHECK(render("{{ '%s has %d' % ('x', 3) }} {{ '%s-%s' | format('a', 2) }} {{ '%s' % [1, 2] }}") == "x has 3 a-2 [1, 2]");
  CHECK(render("{{ (1, 'a') }} {{ (1,) }} {{ () }}") == "(1, 'a') (1,) ()");
  // Widths and precisions count characters, as Python's; a long text is never cut to a buffer.
  CHECK(render("{{ '%-5s|%5s|%.2s|%3d|%05.1f' % ('ab', '\u00e9', 'h\u00e9llo', 7, 2.25) }}") ==
        "ab   |    \u00e9|h\u00e9|  7|002.2");
  CHECK(render("{{ ('%3s' % ('x' * 600)) | length }}") == "600");
  CHECK(render("{{ x }}|{{ x is defined }}|{{ x is undefined }}|{{ tools is none }}") == "|False|True|True");
}

TEST_CASE("chat template: methods", "[chat_template]") {
  CHECK(render("{{ '  a b  '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'xxaxx'.rstrip('x') }}") == "a b|axx|xxa");
  CHECK(render("{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }}") ==
        "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b,c'] ['a,b', 'c']");
  CHECK(render("{{ 'Hello'.startswith('He') }} {{ 'Hello'.endswith(('x', 'lo')) }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }}") ==
        "True True Hello World Hello");
  CHECK(render("{{ 'aaa'.replace('a', 'b', 2) }} {{ 'abc'.upper() }} {{ 'ABC'.lower() }} {{ 'abcb'.find('b') }} {{ 'abcb'.count('b') }}") ==
        "bba ABC abc 1 2");
  CHECK(render("{{ '-'.join(['a', 'b']) }} {{ messages[0].get('name', 'anon') }} {{ messages[0].keys() | list }}") == "a-b anon ['content', 'role']");
}

TEST_CASE("chat template: filters and tests", "[chat_template]") {
  CHECK(render("{{ '  x  ' | trim }}|{{ 'héllo' | length }}|{{ messages | length }}|{{ 'ab' | upper }}") == "x|5|3|AB");
  CHECK(render("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(', ') }}") == "Hi");
  CHECK(render("{{ messages | rejectattr('role', 'eq', 'system') | map(attribute='role') | list }}") == "['user', 'assistant']");
  CHECK(render("{{ [1, 2, 3, 4] | select('even') | list }} {{ ['a', 'b'] | map('upper') | join }}") == "[2, 4] AB");
  CHECK(render("{{ x | default('d') }} {{ '' | default('e', true) }} {{ none | default('n') }}") == "d e None");
  CHECK(render("{{ {'b': 1, 'a': 2} | items | list }} {{ {'b': 1, 'a': 2} | dictsort }}") == "[('b', 1), ('a', 2)] [('a', 2), ('b', 1)]");
  CHECK(render("{{ [3, 1, 2] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ ['b', 'A', 'a'] | unique | list }} {{ [1, 2] | reverse | list }}") ==
        "[1, 2, 3] [3, 2, 1] ['b', 'A'] [2, 1]");
  CHECK(render("{{ [1, 2] | first }}{{ [1, 2] | last }} {{ '12' | int + 1 }} {{ '1.5' | float }} {{ -3 | abs }} {{ 2.567 | round(2) }} {{ 3 | string }}") ==
        "12 13 1.5 3 2.57 3");
  CHECK(render("{{ 'a\\nb' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'ab' | center(6) }}|") == "a\n  b|  a\n  b|  ab  |");
  CHECK(render("{{ 'hello world' | title }} {{ 'hello' | capitalize }} {{ 'a-b' | replace('-', '+') }}") == "Hello World Hello a+b");
  CHECK(render("{{ 3 is odd }} {{ 4 is divisibleby 2 }} {{ 'x' is string }} {{ 1 is number }} {{ {} is mapping }} {{ none is none }} {{ messages is iterable }}") ==
        "True True True True True True True");
  CHECK(render("{{ 1 is not none }} {{ x is not defined }} {{ true is sameas true }} {{ 'ab' is lower }}") == "True True True True");
}

TEST_CASE("chat template: tojson as transformers defines it", "[chat_template]") {
  CHECK(render("{{ {'name': 'f', 'args': [1, 2.5, true, none]} | tojson }}") == "{\"name\": \"f\", \"args\": [1, 2.5, true, null]}");
  CHECK(render("{{ {'a': [1]} | tojson(indent=2) }}") == "{\n  \"a\": [\n    1\n  ]\n}");
  CHECK(render("{{ {'b': 1, 'a': 2} | tojson(sort_keys=true, separators=(',', ':')) }}") == "{\"a\":2,\"b\":1}");
  CHECK(render("{{ 'é<\"' | tojson }} {{ 'é' | tojson(ensure_ascii=true) }} {{ '😀' | tojson(ensure_ascii=true) }}") ==
        "\"é<\\\"\" \"\\u00e9\" \"\\ud83d\\ude00\"");
}

TEST_CASE("chat template: whitespace control as transformers' environment", "[chat_template]") {
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indent before one.
  CHECK(render("{% if true %}\n  a\n{% endif %}\nb") == "  a\nb");
  CHECK(render("x\n    {% if true %}y{% endif %}") == "x\ny");
  CHECK(render("x\n    {%+ if true %}y{% endif %}") == "x\n    y");
  CHECK(render("a  {{- ' b ' -}}  c") == "a b c");
  CHECK(render("a\n{%- if true -%}\n  b\n{%- endif %}") == "ab");
  CHECK(render("{{ 'x' }}\n") == "x");  // one trailing newline dropped
  CHECK(render("{{ 'x' }}\r\ny") == "x\ny");
}

TEST_CASE("chat template: builtins", "[chat_template]") {
  CHECK(render("{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(3, 0, -1) | list }}") == "[0, 1, 2] [1, 3, 5] [3, 2, 1]");
  CHECK(render("{{ dict(a=1, b='x') }} {{ namespace(a=1).a }}") == "{'a': 1, 'b': 'x'} 1");
  CHECK(render("{{ strftime_now('%Y-%m-%d') }}").size() == 10);
  const std::string raised = error_of("{{ raise_exception('Only user and assistant roles are supported!') }}");
  CHECK(raised.find("Only user and assistant roles are supported!") != std::string::npos);
  CHECK(raised.find("line 1") != std::string::npos);
}

TEST_CASE("chat template: generation spans", "[chat_template]") {
  const ct::Rendered r = render_full(
      "{% for m in messages %}<{{ m.role }}>{% if m.role == 'assistant' %}{% generation %}{{ m.content }}</s>{% endgeneration %}"
      "{% else %}{{ m.content }}{% endif %}{% endfor %}");
  REQUIRE(r.generation_spans.size() == 1);
  CHECK(r.text.substr(r.generation_spans[0].first, r.generation_spans[0].second - r.generation_spans[0].first) == "Hello!</s>");
  // Tokens overlapping a span: token ends at 2, 5, 9, 12 bytes.
  const std::size_t ends[] = {0, 2, 5, 9, 12};
  const auto mask = ct::assistant_mask(4, {{4, 9}}, [&](std::size_t n) { return ends[n]; });
  CHECK(mask == std::vector<int32_t>{0, 1, 1, 0});
}

TEST_CASE("chat template: errors name the template and line", "[chat_template]") {
  CHECK_THROWS_WITH(ct::ChatTemplate("a\n{% if x %}\nb", "'t.jinja'"), Catch::Contains("'t.jinja'") && Catch::Contains("endif"));
  CHECK_THROWS_WITH(ct::ChatTemplate("a\n\n{{ 1 + }}", "'t.jinja'"), Catch::Contains("line 3"));
  CHECK_THROWS_WITH(ct::ChatTemplate("{% include 'x' %}", "t"), Catch::Contains("other templates"));
  CHECK(error_of("a\nb\n{{ nothing.here }}").find("line 3: 'nothing' is undefined") != std::string::npos);
  CHECK(error_of("{{ 1 + 'a' }}").find("unsupported operand") != std::string::npos);
  CHECK(error_of("{{ x | nofilter }}").find("no filter named 'nofilter'") != std::string::npos);
  CHECK(error_of("{% set s = 'a' %}{% set s.x = 1 %}").find("namespace") != std::string::npos);
}

TEST_CASE("chat template: the sandbox and its limits end hostile templates", "[chat_template]") {
  const auto quick = [](const std::string& source, const char* expected) {
    const auto start = std::chrono::steady_clock::now();
    const std::string e = error_of(source);
    INFO(source << " -> " << e);
    CHECK(e.find(expected) != std::string::npos);
    // a bound generous enough for a loaded machine; the limits stop these in milliseconds
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
  };
  quick("{{ ''.__class__ }}", "not allowed");
  quick("{{ messages.__class__.__mro__ }}", "not allowed");
  quick("{{ messages[0]._private }}", "not allowed");
  quick("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "deep");
  quick("{% for i in range(10**9) %}x{% endfor %}", "range()");
  quick("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "steps");
  quick("{% set s = namespace(t='x') %}{% for i in range(40) %}{% set s.t = s.t ~ s.t %}{% endfor %}", "limit");
  quick("{% set big = 'x' * 1000000 %}{% for i in range(1000) %}{{ big }}{% endfor %}", "rendered text");  // 1 GB
  quick("{{ 'x' * 10**10 }}", "limit");
  // A width the C library formats in full before cutting (seconds a call):
  // tests/fuzz/crashes/chat_template/percent_format_width_2e9.bin.
  quick("{{ '%2000000000s' % 'x' }}", "width may be at most 400");
  quick("{{ '%.2000000000f' % 1.5 }}", "precision may be at most 400");
  std::string deep(500, '(');
  CHECK_THROWS_WITH(ct::ChatTemplate("{{ " + deep + "1" + std::string(500, ')') + " }}", "t"), Catch::Contains("nests deeper"));
}
