"""A user's utils.callbacks.Callbacks, called at the training run's events with the official trainer's arguments:
the last hook of the loop (utils/engine/hooks.py default_hooks run first), on the main process (DDP rank 0).

    on_pretrain_routine_start, on_pretrain_routine_end(labels, names), on_train_start   when the loop starts (the
                                                          run is built by then; official calls the first before it)
    on_train_epoch_start, on_train_batch_start             before each epoch, each batch
    on_train_batch_end(model, ni, imgs, targets, paths, mloss)   after each batch (mloss: the mean losses as last read
                                                          back from the device)
    on_train_epoch_end(epoch=epoch), on_fit_epoch_end(mloss + results + lrs, epoch, best_fitness, fitness) and, when
    the epoch wrote last.pt, on_model_save(last, epoch, final_epoch, best_fitness, fitness)   after each epoch's
                                                          validation and checkpoints
    on_train_end(last, best, epoch, results), teardown     once training has ended

Callbacks.stop_training = True (from any callback) ends training after the current epoch, its checkpoints saved.
Validation's events (on_val_*) belong to val.py's own loop and are not called: registering one is reported once."""
import numpy as np

from utils.engine.loop import HookBase
from utils.log import LOGGER

NOT_CALLED = ("on_val_start", "on_val_batch_start", "on_val_image_end", "on_val_batch_end", "on_val_end",
              "optimizer_step", "on_before_zero_grad", "on_params_update")


class UserCallbacksHook(HookBase):
    def __init__(self, callbacks):
        self.callbacks = callbacks
        unused = [e for e in NOT_CALLED if callbacks.get_registered_actions(e)]
        if unused:
            LOGGER.warning(f"WARNING ⚠️ callbacks for {', '.join(unused)} are registered, but training here does not "
                           "call these events (utils/engine/user_callbacks.py)")

    def _run(self, event, *args, **kwargs):
        self.callbacks.run(event, *args, **kwargs)
        if self.callbacks.stop_training:
            self.loop.request_stop()

    def _paths(self):
        run = self.loop.parts.run
        return (run.last, run.best) if run is not None else (None, None)

    def before_train(self):
        p = self.loop.parts
        labels = getattr(p.dataset, "labels", None)
        labels = np.concatenate(labels, 0) if labels is not None and len(labels) else np.zeros((0, 5))
        self._run("on_pretrain_routine_start")
        self._run("on_pretrain_routine_end", labels, p.names)
        self._run("on_train_start")

    def before_epoch(self):
        self._run("on_train_epoch_start")

    def before_step(self):
        self._run("on_train_batch_start")

    def after_step(self):
        loop = self.loop
        self._run("on_train_batch_end", loop.parts.model, loop.ni, loop.imgs, loop.targets, loop.paths,
                  list(loop.record.mloss))

    def after_epoch(self):
        rec = self.loop.record
        self._run("on_train_epoch_end", epoch=rec.epoch)
        log_vals = list(rec.mloss) + list(rec.results) + list(rec.lrs)
        self._run("on_fit_epoch_end", log_vals, rec.epoch, rec.best_fitness, rec.fitness)
        last, _ = self._paths()
        if last is not None and rec.saved_in_epoch.get(last) == rec.epoch:
            self._run("on_model_save", last, rec.epoch, rec.may_be_last, rec.best_fitness, rec.fitness)

    def after_train(self):
        last, best = self._paths()
        rec = self.loop.record
        self.callbacks.run("on_train_end", last, best, rec.epoch, rec.results)
        self.callbacks.run("teardown")
