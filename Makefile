# Two commands do everything on a fresh machine:
#   make train-demo   set up, make the offline shapes dataset, train yolov5n on it (the first GPU if any, else
#                     the CPU; DEVICE=cpu or DEVICE=0 to choose)
#   make test         set up, run the test suite under both backends
#   make docs         the user's guide (docs/, mkdocs.yml) built offline into site/ (--strict: a broken link fails)
#   make test-fast    the fast tier (-m "not slow": the tests measured under 2 s) under each backend in turn
#   make test-durations   the whole suite, measured: rewrites tests/durations/ (what the fast tier is made of)
# The backend this machine should train with: OneFlow with a CUDA GPU, PyTorch without (OneFlow 0.9.0's CPU kernels
# are single-threaded). `make train-demo BACKEND=oneflow` chooses it explicitly.
BACKEND ?= $(shell python3 utils/backend_choice.py 2>/dev/null || echo torch)
EPOCHS ?= 30
# The demo's image size follows the CPU: 256 px where it has AVX-512 (a 2-core AMD Zen 5 ran it in 186 s), 160 px
# where it has only AVX2 (a 2-core AMD Zen 3 took 541 s at 256 px; 160 px is 0.39x the pixels), so it stays under
# 5 minutes on both kinds. IMG=256 chooses the size.
IMG ?= $(shell grep -qw avx512f /proc/cpuinfo 2>/dev/null && echo 256 || echo 160)
DEVICE ?=
PY_oneflow := .venv-oneflow/bin/python
PY_torch := .venv-torch/bin/python

.PHONY: setup setup-oneflow setup-torch setup-tf docs test test-oneflow test-torch test-fast test-fast-torch test-fast-oneflow \
	test-durations \
	train-demo train-demo-detect train-demo-segment train-demo-classify

setup:
	bash scripts/setup.sh all

setup-oneflow:
	bash scripts/setup.sh oneflow

setup-torch:
	bash scripts/setup.sh torch

# The export converters' environment (.venv-tf: TensorFlow, onnx2tf, paddle, pnnx/ncnn, coremltools;
# requirements-tf.txt), on request only: about 6 GB. Its tests (tests/test_export_converters.py) skip while it is
# missing.
setup-tf:
	bash scripts/setup.sh tf

# The site: MkDocs Material from the PyTorch environment (requirements.txt, "# Docs"); every page is in mkdocs.yml's nav
docs: setup-torch
	NO_MKDOCS_2_WARNING=1 $(PY_torch) -m mkdocs build --strict --site-dir site

test: setup
	bash scripts/test.sh

test-torch: setup-torch
	bash scripts/test.sh torch

test-oneflow: setup-oneflow
	bash scripts/test.sh oneflow

# The tier to run while working: each backend's fast tier, one after the other, each with its own time, each on two
# pytest-xdist workers (whole test files each)
test-fast: test-fast-torch test-fast-oneflow

test-fast-torch: setup-torch
	bash scripts/test.sh torch -m "not slow" -n 2 --dist loadfile

test-fast-oneflow: setup-oneflow
	bash scripts/test.sh oneflow -m "not slow" -n 2 --dist loadfile

# `make test` with each test's wall time recorded, then merged into tests/durations/<backend>.json: a test over 2 s
# there leaves the fast tier (tests/helpers/tiers.py). Run it on a quiet machine after adding slow tests.
test-durations: setup
	d=$$(mktemp -d) && YOLO_RECORD_DURATIONS=$$d bash scripts/test.sh && $(PY_torch) scripts/record_durations.py $$d \
		&& rm -rf $$d

# TASK=detect (default), TASK=segment (segment/train.py on the same shapes with polygon labels, data/shapes-seg.yaml)
# or TASK=classify (classify/train.py on an ImageFolder of shape crops)
TASK ?= detect
train-demo: train-demo-$(TASK)

# data/shapes.yaml's download: is Python code (it runs data/scripts/make_shapes.py): the demo opts in to running it
train-demo-detect: setup-$(BACKEND)
	YOLO_ALLOW_DOWNLOAD_SCRIPTS=1 YOLO_BACKEND=$(BACKEND) $(PY_$(BACKEND)) train.py --data data/shapes.yaml \
		--cfg yolov5n.yaml --weights '' --img $(IMG) --batch-size 16 --epochs $(EPOCHS) --workers 2 --device "$(DEVICE)"

# Segmentation: yolov5n-seg from scratch, then its learning figure (mask mAP50, first epoch against last). At 160 px
# on any CPU: a segmentation step costs about 1.8x a detection one (30 epochs: 259 s on a quiet 2-core Xeon).
SEG_IMG ?= 160
SEG_EPOCHS ?= $(EPOCHS)
train-demo-segment: setup-$(BACKEND)
	YOLO_ALLOW_DOWNLOAD_SCRIPTS=1 YOLO_BACKEND=$(BACKEND) $(PY_$(BACKEND)) segment/train.py --data data/shapes-seg.yaml \
		--cfg yolov5n-seg.yaml --weights '' --img $(SEG_IMG) --batch-size 16 --epochs $(SEG_EPOCHS) --workers 2 \
		--device "$(DEVICE)"
	$(PY_$(BACKEND)) scripts/learning_figure.py runs/train-seg "metrics/mAP_0.5(M)"

# Classification: the generator writes ../datasets/shapes-cls (train/ and val/, one crop per object of 120 + 40
# scenes, 6 classes) the first time; yolov5n's backbone (cut at layer 10, as official) trains from scratch at 64 px.
CLS_EPOCHS ?= 10
CLS_DATA := ../datasets/shapes-cls
train-demo-classify: setup-$(BACKEND)
	test -d $(CLS_DATA)/train || $(PY_$(BACKEND)) data/scripts/make_shapes.py --classify --out $(CLS_DATA) \
		--train 120 --val 40
	YOLO_BACKEND=$(BACKEND) $(PY_$(BACKEND)) classify/train.py --model yolov5n.yaml --data $(CLS_DATA) --img 64 \
		--batch-size 32 --epochs $(CLS_EPOCHS) --workers 2 --device "$(DEVICE)"
