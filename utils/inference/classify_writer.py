"""classify/predict.py's task for the predict loop (utils/inference/predict.py): frames already resized and
normalised by the classify transform, class probabilities out; each image's top-5 printed, written on the saved
image and (save_txt) to its label file, whole (a rerun replaces it)."""
import numpy as np

from utils.backend import from_numpy, to_numpy
from utils.plots import Annotator


def softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def top5_text(prob, names):
    """The 5 most probable classes, highest first: [(class, '0.93 person'), ...] (ties keep class order)."""
    top = np.argsort(-prob, kind="stable")[:5]
    return [(int(j), f"{prob[j]:.2f} {names[int(j)]}") for j in top]


class ClassificationWriter:
    """outputs: a DetectionOutputs (its image/video and label writers and their names); names: the model's classes;
    save_img, save_txt, view_img: classify/predict.py's flags."""

    def __init__(self, outputs, names, save_img=True, save_txt=False, view_img=False):
        self.outputs, self.names = outputs, names
        self.save_img, self.save_txt, self.view_img = save_img, save_txt, view_img

    @property
    def save_dir(self):
        return self.outputs.save_dir

    def prepare(self, im, model):
        x = from_numpy(np.ascontiguousarray(im, dtype=np.float32)).to(model.device)
        x = x[None] if x.ndim == 3 else x
        return x.half() if model.fp16 else x

    def forward(self, model, x, path=None):
        return model(x)

    def postprocess(self, logits):
        """(images, classes) probabilities, float64 numpy."""
        return softmax(to_numpy(logits.float()).astype(np.float64))

    def write(self, i, p, im0, prob, input_hw, frame, mode, vid_cap):
        top = top5_text(prob, self.names)
        annotator = Annotator(im0, example=str(self.names))
        if self.save_img or self.view_img:
            for k, (_, t) in enumerate(top):  # one line each: cv2 draws no line breaks
                annotator.text([32, 32 + k * int(annotator.fs * 30 + 6)], t, txt_color=(255, 255, 255))
        if self.save_txt:
            self.outputs.write_labels(i, p, frame, mode, [t for _, t in top])
        if self.save_img:
            self.outputs.save_image(i, p, annotator.result(), mode, vid_cap)
        return f"{', '.join(f'{self.names[j]} {prob[j]:.2f}' for j, _ in top)}, "

    def no_result_note(self, prob):  # every image has its classes
        return ""
