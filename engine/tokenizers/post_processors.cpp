#include "engine/tokenizers/post_processors.h"

#include <cstdint>
#include <map>
#include <string>

#include "engine/tokenizers/tokenizer_error.h"

namespace accel::tokenizers {
namespace {

void set_segment(Encoding& e, int32_t segment) { e.type_ids.assign(e.ids.size(), segment); }

Encoding specials(const std::vector<int32_t>& ids, int32_t segment) {
  Encoding e;
  e.ids = ids;
  set_segment(e, segment);
  return e;
}

// A [token, id] pair of BertProcessing and RobertaProcessing: the id.
int32_t token_id_pair(const JsonNode& node) {
  if (!node.is_array() || node.size() != 2) node.fail("is not a pair [\"token\", id]");
  return static_cast<int32_t>(node.item(1).unsigned_integer(INT32_MAX));
}

class TemplateProcessing : public PostProcessor {
 public:
  explicit TemplateProcessing(const JsonNode& node) {
    const JsonNode tokens = node.at("special_tokens");
    if (!tokens.is_object()) tokens.fail("is not an object");
    for (const auto& item : tokens.value().items()) {
      const std::string& name = item.key();
      const JsonNode entry = tokens.at(name.c_str());
      const JsonNode ids = entry.at("ids");
      std::vector<int32_t>& out = special_tokens_[name];
      for (std::size_t i = 0; i < ids.size(); ++i) out.push_back(static_cast<int32_t>(ids.item(i).unsigned_integer(INT32_MAX)));
      if (entry.at("tokens").size() != out.size()) entry.fail("does not have as many tokens as ids");
    }
    single_ = read_template(node.at("single"), false);
    pair_ = read_template(node.at("pair"), true);
  }

  std::size_t added_tokens(bool pair) const override {
    std::size_t n = 0;
    for (const Step& s : pair ? pair_ : single_) n += s.special ? s.special->size() : 0;
    return n;
  }

  void process(std::vector<Encoding>& encodings, bool add_special_tokens) const override {
    const std::vector<Step>& steps = encodings.size() == 2 ? pair_ : single_;
    Encoding out;
    for (const Step& s : steps) {
      if (s.special) {
        if (add_special_tokens) out.append(specials(*s.special, s.segment));
      } else {
        Encoding& sequence = encodings[s.sequence];
        set_segment(sequence, s.segment);
        out.append(sequence);
      }
    }
    encodings.assign(1, std::move(out));
  }

 private:
  // One piece of a template: sequence A (0) or B (1), or a special token's ids.
  struct Step {
    std::size_t sequence = 0;
    const std::vector<int32_t>* special = nullptr;
    int32_t segment = 0;
  };

  std::vector<Step> read_template(const JsonNode& node, bool pair) const {
    std::vector<Step> steps;
    bool has_a = false, has_b = false;
    for (std::size_t i = 0; i < node.size(); ++i) {
      const JsonNode item = node.item(i);
      Step step;
      if (item.has("Sequence")) {
        const JsonNode sequence = item.at("Sequence");
        const std::string id = sequence.string("id");
        if (id != "A" && id != "B") sequence.at("id").fail("is '" + id + "', expected A or B");
        step.sequence = id == "B" ? 1 : 0;
        if (step.sequence == 1 && !pair) sequence.at("id").fail("is B in the template for one text");
        (step.sequence == 1 ? has_b : has_a) = true;
        step.segment = static_cast<int32_t>(sequence.unsigned_or("type_id", 0, INT32_MAX));
      } else if (item.has("SpecialToken")) {
        const JsonNode special = item.at("SpecialToken");
        const std::string id = special.string("id");
        const auto it = special_tokens_.find(id);
        if (it == special_tokens_.end()) special.at("id").fail("is '" + id + "', which special_tokens does not define");
        step.special = &it->second;
        step.segment = static_cast<int32_t>(special.unsigned_or("type_id", 0, INT32_MAX));
      } else {
        item.fail("is neither {\"Sequence\": ...} nor {\"SpecialToken\": ...}");
      }
      steps.push_back(step);
    }
    if (pair && !(has_a && has_b)) node.fail("does not use both sequences A and B");
    return steps;
  }

  std::map<std::string, std::vector<int32_t>> special_tokens_;
  std::vector<Step> single_, pair_;
};

// [CLS] A [SEP] (B [SEP]), B's [SEP] in segment 1.
class BertProcessing : public PostProcessor {
 public:
  explicit BertProcessing(const JsonNode& node)
      : cls_(token_id_pair(node.at("cls"))), sep_(token_id_pair(node.at("sep"))) {}
  std::size_t added_tokens(bool pair) const override { return pair ? 3 : 2; }
  void process(std::vector<Encoding>& encodings, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    Encoding out = specials({cls_}, 0);
    out.append(encodings[0]);
    out.append(specials({sep_}, 0));
    if (encodings.size() == 2) {
      out.append(encodings[1]);
      out.append(specials({sep_}, 1));
    }
    encodings.assign(1, std::move(out));
  }

 private:
  int32_t cls_, sep_;
};

// <s> A </s> (</s> B </s>), every segment 0.
class RobertaProcessing : public PostProcessor {
 public:
  explicit RobertaProcessing(const JsonNode& node)
      : cls_(token_id_pair(node.at("cls"))), sep_(token_id_pair(node.at("sep"))) {}
  std::size_t added_tokens(bool pair) const override { return pair ? 4 : 2; }
  void process(std::vector<Encoding>& encodings, bool add_special_tokens) const override {
    for (Encoding& e : encodings) set_segment(e, 0);
    if (!add_special_tokens) return;
    Encoding out = specials({cls_}, 0);
    out.append(encodings[0]);
    out.append(specials({sep_}, 0));
    if (encodings.size() == 2) {
      out.append(specials({sep_}, 0));
      out.append(encodings[1]);
      out.append(specials({sep_}, 0));
    }
    encodings.assign(1, std::move(out));
  }

 private:
  int32_t cls_, sep_;
};

// ByteLevel's post-processing trims offsets only: ids pass unchanged.
class ByteLevelProcessing : public PostProcessor {
 public:
  std::size_t added_tokens(bool) const override { return 0; }
  void process(std::vector<Encoding>&, bool) const override {}
};

class SequenceProcessing : public PostProcessor {
 public:
  explicit SequenceProcessing(const JsonNode& node) {
    const JsonNode steps = node.at("processors");
    for (std::size_t i = 0; i < steps.size(); ++i) steps_.push_back(make_post_processor(steps.item(i)));
  }
  std::size_t added_tokens(bool pair) const override {
    std::size_t n = 0;
    for (const auto& s : steps_) n += s->added_tokens(pair);
    return n;
  }
  void process(std::vector<Encoding>& encodings, bool add_special_tokens) const override {
    for (const auto& s : steps_) s->process(encodings, add_special_tokens);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const JsonNode& node) {
  const std::string type = node.string("type");
  if (type == "TemplateProcessing") return std::make_unique<TemplateProcessing>(node);
  if (type == "BertProcessing") return std::make_unique<BertProcessing>(node);
  if (type == "RobertaProcessing") return std::make_unique<RobertaProcessing>(node);
  if (type == "ByteLevel") return std::make_unique<ByteLevelProcessing>();
  if (type == "Sequence") return std::make_unique<SequenceProcessing>(node);
  node.at("type").fail("is '" + type +
                       "', a post-processor accel does not support (it reads TemplateProcessing, BertProcessing, "
                       "RobertaProcessing, ByteLevel and Sequence)");
}

Encoding post_process(const PostProcessor* processor, Encoding first, Encoding* pair, bool add_special_tokens) {
  std::vector<Encoding> encodings;
  set_segment(first, 0);
  encodings.push_back(std::move(first));
  if (pair) {
    set_segment(*pair, 1);
    encodings.push_back(std::move(*pair));
  }
  if (processor) processor->process(encodings, add_special_tokens);
  Encoding out = std::move(encodings[0]);
  for (std::size_t i = 1; i < encodings.size(); ++i) out.append(encodings[i]);
  return out;
}

}  // namespace accel::tokenizers
