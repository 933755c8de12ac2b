"""The framework runtime settings the backend puts in the environment, before it imports the framework, on a machine
without a CUDA GPU: PyTorch's OpenMP threads wait passively, OneFlow computes on its scheduler thread without
sched_yield polling (utils/backend/oneflow_backend.py says what each was measured to buy). A value the user set wins,
and the settings reach the processes the trainer starts. Each suite checks its own backend, in a fresh interpreter
(the settings act at import, so this process, which imported the framework long ago, cannot show them)."""
import json
import os
import subprocess
import sys
from pathlib import Path

from utils.backend import BACKEND

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = {
    "torch": {"OMP_WAIT_POLICY": "PASSIVE"},
    "oneflow": {"ONEFLOW_VM_COMPUTE_ON_WORKER_THREAD": "0", "ONEFLOW_VM_ENABLE_SCHEDULE_YIELD": "0"},
}
USER_VALUES = {"torch": "ACTIVE", "oneflow": "1"}  # the other valid value of each: the framework's own default
# what the backend's process and a child it starts see (the child: a loader worker, a train.py subprocess)
PROBE = ("import json, os, subprocess, sys\n"
         "import utils.backend\n"
         "names = json.loads(sys.argv[1])\n"
         "child = subprocess.run([sys.executable, '-c', 'import json, os, sys; "
         "print(json.dumps({k: os.environ.get(k) for k in json.loads(sys.argv[1])}))', sys.argv[1]],"
         " capture_output=True, text=True, check=True).stdout\n"
         "print(json.dumps([{k: os.environ.get(k) for k in names}, json.loads(child)]))\n")


def _seen(extra_env):
    names = list(DEFAULTS[BACKEND])
    env = {k: v for k, v in os.environ.items() if k not in names}
    env.update(CUDA_VISIBLE_DEVICES="", YOLO_BACKEND=BACKEND, YOLO_QUIET="1", PYTHONPATH=str(ROOT), **extra_env)
    p = subprocess.run([sys.executable, "-c", PROBE, json.dumps(names)], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_cpu_machine_gets_the_backends_runtime_settings():
    own, child = _seen({})
    assert own == child == DEFAULTS[BACKEND]


def test_a_value_the_user_set_wins():
    mine = {name: USER_VALUES[BACKEND] for name in DEFAULTS[BACKEND]}
    own, child = _seen(mine)
    assert own == child == mine
