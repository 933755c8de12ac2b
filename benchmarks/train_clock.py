"""Runs a train.py (this project's or the official one) in this process with a clock on its training batches, so that
both trainers are timed the same way from outside their code (benchmarks/gpu_kit.py's training section).

    GPU_KIT_CLOCK_OUT=clock.json GPU_KIT_CLOCK_EPOCHS=3 python benchmarks/train_clock.py /path/to/train.py ARGS...

What it records (written to GPU_KIT_CLOCK_OUT at the end of the warm-up epoch and at the last batch of the last
epoch, not at exit: this project's entry scripts leave without the interpreter's teardown):
* every batch the training loader hands out: the training set is the one built with augmentation (validation sets
  are not). Epoch 0 is the warm-up (worker start, first reads, cuDNN autotuning, allocator growth); the timed window
  runs from the first batch of epoch 1 to the last batch of the last epoch, with one device synchronisation at each
  end, so a trainer that queues work ahead of the GPU is charged for all of it. The window holds every step of the
  timed epochs but the last, and the work between epochs (checkpoints); images/s = images fetched in it / its span.
* peak GPU memory of the process as PyTorch's caching allocator saw it (max reserved and max allocated, MiB);
* whether a GradScaler was made enabled (the official trainer's AMP, decided by its check_amp) and which autocast
  dtypes were entered.
It imports nothing from either codebase: the trainer's own folder is first on sys.path, as when it runs directly
(benchmarks/results_io.py, standard library only, is loaded by its path for the date, commit, machine, versions and
command every results file carries). Without GPU_KIT_CLOCK_OUT the file is a new train_clock_<time>.json in
benchmarks/results/.
"""
import importlib.util
import json
import math
import os
import runpy
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _results_io():
    """benchmarks/results_io.py loaded by its path under a private name: in the official trainer's process `utils`
    and `benchmarks` (its benchmarks.py) are the official code's."""
    spec = importlib.util.spec_from_file_location("_train_clock_results_io", os.path.join(HERE, "results_io.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(path, data):
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


def install(out_path, epochs, run=None):
    """Patch PyTorch so that this process's training run is clocked into rec (returned), written to out_path."""
    import torch

    cuda = torch.cuda.is_available()
    rec = {**({"benchmark": "train_clock", "run": run} if run else {}),
           "epochs": epochs, "t_start": time.time(), "batches": 0, "nb": None, "timed_images": 0,
           "scaler_enabled": None, "autocast": [], "device": torch.cuda.get_device_name(0) if cuda else "cpu",
           "torch": torch.__version__, "done": False}
    _clock_training_batches(torch, rec, out_path, epochs)
    _record_amp(torch, rec)
    return rec


def _clock_training_batches(torch, rec, out_path, epochs):
    """Every batch of an augmenting loader counted; the timed window opened at epoch 1's first batch and closed at
    the last epoch's last one, each with a device synchronisation, and rec written at both ends."""
    from torch.utils.data import dataloader as dl

    cuda = torch.cuda.is_available()
    state = {"t0": None, "images": 0}

    def sync():
        if cuda and torch.cuda.is_initialized():
            torch.cuda.synchronize()

    def memory():
        if cuda and torch.cuda.is_initialized():
            rec["peak_reserved_mib"] = round(torch.cuda.max_memory_reserved() / 2 ** 20)
            rec["peak_allocated_mib"] = round(torch.cuda.max_memory_allocated() / 2 ** 20)

    next_batch = dl._BaseDataLoaderIter.__next__

    def clocked_next(self):
        batch = next_batch(self)
        if not getattr(getattr(self, "_dataset", None), "augment", False):
            return batch
        n = len(batch[0])
        k = rec["batches"]
        rec["batches"] += 1
        if k == 0:  # the first batch is a full one: batches per epoch from the dataset's length
            rec["nb"] = math.ceil(len(self._dataset) / n)
            rec["first_batch_s"] = round(time.time() - rec["t_start"], 2)
        nb = rec["nb"]
        if k == nb:  # first batch of epoch 1: the warm-up is over
            sync()
            state["t0"] = time.perf_counter()
            rec["warmup_epoch_s"] = round(time.time() - rec["t_start"] - rec["first_batch_s"], 2)
            memory()
            _write(out_path, {k2: v for k2, v in rec.items() if not k2.startswith("_")})
        if nb and nb < k < epochs * nb:
            state["images"] += rec.get("_last_n", n)  # the step of the previous batch finished before this fetch
        rec["_last_n"] = n
        if nb and k == epochs * nb - 1 and state["t0"] is not None:  # last batch of the last epoch
            sync()
            span = time.perf_counter() - state["t0"]
            steps = k - nb
            rec.update(timed_steps=steps, timed_images=state["images"], timed_s=round(span, 3),
                       img_s=round(state["images"] / span, 2) if span > 0 and steps else None,
                       s_per_epoch=round(span / steps * nb, 3) if steps else None, done=True)
            memory()
            _write(out_path, {k2: v for k2, v in rec.items() if not k2.startswith("_")})
        return batch

    dl._BaseDataLoaderIter.__next__ = clocked_next


def _record_amp(torch, rec):
    """rec['scaler_enabled']: whether a GradScaler was made enabled; rec['autocast']: the autocast dtypes entered."""
    scaler_init = torch.amp.GradScaler.__init__

    def recorded_scaler_init(self, *a, **kw):
        scaler_init(self, *a, **kw)
        rec["scaler_enabled"] = bool(getattr(self, "_enabled", False)) or bool(rec["scaler_enabled"])

    torch.amp.GradScaler.__init__ = recorded_scaler_init

    autocast_enter = torch.amp.autocast_mode.autocast.__enter__

    def recorded_enter(self):
        if getattr(self, "_enabled", False):
            tag = f"{getattr(self, 'device', '?')}:{str(getattr(self, 'fast_dtype', '?')).replace('torch.', '')}"
            if tag not in rec["autocast"]:
                rec["autocast"].append(tag)
        return autocast_enter(self)

    torch.amp.autocast_mode.autocast.__enter__ = recorded_enter


def main(argv):
    if not argv:
        print(__doc__)
        return 2
    script = os.path.abspath(argv[0])
    results_io = _results_io()
    out = os.environ.get("GPU_KIT_CLOCK_OUT") or str(results_io.default_path("train_clock"))
    epochs = int(os.environ.get("GPU_KIT_CLOCK_EPOCHS", "0") or 0)
    if epochs < 2:
        print("train_clock: GPU_KIT_CLOCK_EPOCHS must be the run's --epochs, at least 2 (a warm-up epoch, then the "
              "timed ones)", file=sys.stderr)
        return 2
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    run = results_io.run_metadata(argv=[os.path.join(HERE, "train_clock.py"), *argv])
    run["trainer"] = script
    sys.argv = [script, *argv[1:]]
    sys.path[0] = os.path.dirname(script)  # as `python train.py` would have it, not this file's folder
    rec = install(out, epochs, run)
    run["machine"]["gpu"] = None if rec["device"] == "cpu" else rec["device"]
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
