# Sourced by the tests that read accel's files with TensorBoard's own code:
# makes (once, under the build folder) a virtual environment with the
# tensorboard package from PyPI and sets $tensorboard_python to its python.
# Where PyPI cannot be reached it says why and exits 77, which CTest reports
# as a skip: the CPU build never needs PyPI, and the test must not pass.
build_dir=$(dirname "$accel_run")
venv="$build_dir/tensorboard-venv"
tensorboard_python="$venv/bin/python"
python_for_venv=/usr/bin/python3
[ -x "$python_for_venv" ] || python_for_venv=$(command -v python3)
(
  flock 9  # one test makes it; the others wait for it
  if ! "$tensorboard_python" -c "import tensorboard" 2>/dev/null; then
    rm -rf "$venv"
    if ! "$python_for_venv" -m venv "$venv" >"$work/venv.log" 2>&1 ||
       ! timeout 240 "$venv/bin/pip" install -q tensorboard >>"$work/venv.log" 2>&1; then
      echo "SKIPPED: cannot install tensorboard from PyPI into $venv:"
      tail -5 "$work/venv.log"
      rm -rf "$venv"
      exit 77
    fi
  fi
) 9>"$build_dir/tensorboard-venv.lock" || exit $?
