"""User callbacks under ultralytics' names: `Callbacks().register_action("on_fit_epoch_end", callback=f)`, handed to
`train.main(opt, callbacks=...)` (also segment/train.py and classify/train.py), are called at the training run's
events with the official arguments (utils/engine/user_callbacks.py turns the engine's hooks into these calls).

Framework-free. An event name that is not one of EVENTS is refused at registration with one line: a misspelt name
would otherwise be a callback that silently never runs."""
import threading

from utils.errors import UserError

EVENTS = ("on_pretrain_routine_start", "on_pretrain_routine_end", "on_train_start", "on_train_epoch_start",
          "on_train_batch_start", "optimizer_step", "on_before_zero_grad", "on_train_batch_end", "on_train_epoch_end",
          "on_val_start", "on_val_batch_start", "on_val_image_end", "on_val_batch_end", "on_val_end",
          "on_fit_epoch_end", "on_model_save", "on_train_end", "on_params_update", "teardown")


class CallbackError(UserError, ValueError):
    pass


class Callbacks:
    """Named events, each with the callbacks registered for it in registration order. Setting `stop_training` to
    True from a callback ends training after the current epoch (its checkpoints saved)."""

    def __init__(self):
        self._callbacks = {event: [] for event in EVENTS}
        self.stop_training = False

    def register_action(self, hook, name="", callback=None):
        if hook not in self._callbacks:
            raise CallbackError(f"callback event '{hook}' does not exist; the events are: {', '.join(EVENTS)}")
        if not callable(callback):
            raise CallbackError(f"callback for '{hook}' ({name or callback!r}) is not callable")
        self._callbacks[hook].append({"name": name, "callback": callback})

    def get_registered_actions(self, hook=None):
        """The list of {'name', 'callback'} for hook, or the whole event table."""
        return self._callbacks[hook] if hook else self._callbacks

    def has(self, hook):
        return bool(self._callbacks.get(hook))

    def run(self, hook, *args, thread=False, **kwargs):
        """Call every callback of hook with these arguments (each in a daemon thread when thread=True)."""
        if hook not in self._callbacks:
            raise CallbackError(f"callback event '{hook}' does not exist; the events are: {', '.join(EVENTS)}")
        for logger in self._callbacks[hook]:
            if thread:
                threading.Thread(target=logger["callback"], args=args, kwargs=kwargs, daemon=True).start()
            else:
                logger["callback"](*args, **kwargs)
