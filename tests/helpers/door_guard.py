"""Holds build_training() to its door: the argparse namespace is read there once, and no task trainer step sees it.

guard_steps(monkeypatch, seen) makes utils.engine.build call every TrainerSteps step through a check that fails on a
namespace argument (argparse.Namespace or SimpleNamespace, what the scripts and tests pass as opt) and that the
inputs record a step gets is a frozen dataclass (writing to it raises). seen collects the steps called."""
import argparse
import dataclasses
import types

import pytest

NAMESPACES = (argparse.Namespace, types.SimpleNamespace)


def _checked(name, fn, seen):
    def step(*args, **kwargs):
        for a in (*args, *kwargs.values()):
            assert not isinstance(a, NAMESPACES), f"trainer step {name} was handed the argparse namespace"
            if dataclasses.is_dataclass(a) and type(a).__name__.endswith("Inputs"):
                with pytest.raises(dataclasses.FrozenInstanceError):
                    setattr(a, "data", "changed")
        seen.append(name)
        return fn(*args, **kwargs)
    return step


def guard_steps(monkeypatch, seen):
    import utils.engine.build as build
    real = build.steps_of

    def steps_of(task):
        steps = real(task)
        wrapped = {f.name: _checked(f.name, getattr(steps, f.name), seen) for f in dataclasses.fields(steps)
                   if callable(getattr(steps, f.name)) and not isinstance(getattr(steps, f.name), type)}
        return dataclasses.replace(steps, **wrapped)
    monkeypatch.setattr(build, "steps_of", steps_of)
