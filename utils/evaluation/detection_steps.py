"""Detection's steps in the validation loop (utils/evaluation/loop.py): (im, targets, paths, shapes) batches through
the model (in chunks when the memory headroom is small), the task's post-process (NMS) and a DetectionEvaluator."""
from utils.backend import torch
from utils.evaluation.batch_memory import ForwardBudget, forward_in_chunks
from utils.inference.steps import preprocess
from utils.nms import non_max_suppression


def model_device(model):
    """DetectMultiBackend knows its device (an ONNX model has no parameters); a plain module has parameters."""
    device = getattr(model, "device", None)
    return device if device is not None else next(model.parameters()).device


def _hybrid_labels(targets, nb, width, height):
    """--save-hybrid: each image's labels [cls, xywh] in input pixels, which NMS adds as confidence-1 boxes."""
    gain = torch.tensor([1.0, width, height, width, height], device=targets.device, dtype=targets.dtype)
    return [targets[targets[:, 0] == i, 1:] * gain for i in range(nb)]


class DetectionSteps:
    """One detection validation's steps. The batch on the device is (im, targets, paths, shapes, *extras) with im
    the float input; forward returns the model's output: decoded predictions, or (decoded predictions, raw maps) from
    an eval-mode module (NMS reads the first)."""

    loss_names = ("box", "obj", "cls")

    def __init__(self, model, evaluator, compute_loss=None, half=False, augment=False, conf_thres=0.001,
                 iou_thres=0.6, max_det=300, save_hybrid=False, postprocess=non_max_suppression, n_loss_items=3):
        self.evaluator, self.compute_loss, self.half, self.augment = evaluator, compute_loss, half, augment
        self.conf_thres, self.iou_thres, self.max_det = conf_thres, iou_thres, max_det
        self.save_hybrid, self.nms = save_hybrid, postprocess
        self.device = model_device(model)
        self.loss = torch.zeros(n_loss_items, device=self.device)
        self.budget = ForwardBudget(model)

    def to_device(self, batch):
        im, targets, *rest = batch
        return (preprocess(im, self.device, self.half), targets.to(self.device), *rest)

    def forward(self, model, batch, keep=1):
        """The model's output for the batch's images; in chunks unless the whole batch fits the memory headroom,
        each chunk keeping its first keep outputs (the decoded predictions that NMS reads), or all of them when the
        loss needs the raw maps. The loss runs on the plain forward (no test-time augmentation)."""
        im = batch[0]
        chunk = self.budget.chunk_size(im)  # the whole batch unless the memory headroom is small
        if chunk < im.shape[0]:
            return forward_in_chunks(model, im, chunk, augment=self.augment and not self.compute_loss,
                                     keep=None if self.compute_loss else keep)
        return model(im, augment=True) if self.augment and not self.compute_loss else model(im)

    def add_loss(self, out, batch):
        if self.compute_loss:  # eval mode: (decoded, raw maps); the loss needs the raw maps
            self.loss += self.compute_loss(out[1], batch[1])[1]  # box, obj, cls

    def postprocess(self, out, batch):
        im, targets = batch[0], batch[1]
        nb, _, height, width = im.shape
        labels = _hybrid_labels(targets, nb, width, height) if self.save_hybrid else []
        return self.nms(out, self.conf_thres, self.iou_thres, labels=labels, multi_label=True,
                        agnostic=self.evaluator.single_cls, max_det=self.max_det)

    def update(self, batch_i, batch, out, preds):
        im, targets, paths, shapes = batch[:4]
        self.evaluator.update(preds, targets, shapes, tuple(im.shape[2:]), paths)
        self.evaluator.plot_batch(batch_i, im, targets, preds, paths, max_det=self.max_det)
