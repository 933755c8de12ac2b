"""--nms for ONNX and OpenVINO (beyond ultralytics, whose --nms is for TensorFlow only): non-maximum suppression inside
the exported graph, so a deployed model needs no Python post-processing.

The graph ends in ONNX's NonMaxSuppression (OpenVINO reads it as its own NMS op) and gives one output, 'output0':
    float32 (N, 7), one row per kept box over the whole batch: [image index, x1, y1, x2, y2, score, class]
with x1..y2 in input pixels (letterboxed image), score = objectness x class probability, and N <= batch x classes x
--topk-per-class (N varies with the image: a dynamic axis). A box is a candidate for each class whose score exceeds
--conf-thres; boxes of one class overlapping by more than --iou-thres IoU are suppressed (--agnostic-nms: over all
classes, each box taking its best class). Model files with NMS inside are for deployment: val.py and detect.py run
the files written without --nms."""
from utils.backend import nn, require_pytorch


def nms_wrapped(model, conf_thres=0.25, iou_thres=0.45, topk_per_class=100, agnostic=False):
    torch = require_pytorch("--nms export")

    class _NonMaxSuppression(torch.autograd.Function):
        """ONNX NonMaxSuppression; traced with a stand-in result (the exporter records the op, not this value)."""

        @staticmethod
        def forward(ctx, boxes, scores):
            return torch.zeros((1, 3), dtype=torch.int64)

        @staticmethod
        def symbolic(g, boxes, scores):
            const = lambda v, dtype: g.op("Constant", value_t=torch.tensor([v], dtype=dtype))  # noqa: E731
            return g.op("NonMaxSuppression", boxes, scores, const(topk_per_class, torch.int64),
                        const(iou_thres, torch.float32), const(conf_thres, torch.float32), center_point_box_i=0)

    class NMSModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, im):
            y = self.model(im)
            y = y[0] if isinstance(y, (list, tuple)) else y  # (b, n, 5 + nc)
            xy, wh = y[..., :2], y[..., 2:4]
            boxes = torch.cat((xy - wh / 2, xy + wh / 2), -1)  # xyxy
            scores = y[..., 5:] * y[..., 4:5]  # (b, n, nc)
            if agnostic:
                best, cls = scores.max(-1, keepdim=True)
                selected = _NonMaxSuppression.apply(boxes, best.transpose(1, 2))
                b, i = selected[:, 0], selected[:, 2]
                c = cls[b, i, 0]
                s = best[b, i, 0]
            else:
                selected = _NonMaxSuppression.apply(boxes, scores.transpose(1, 2))  # (b, nc, n)
                b, c, i = selected[:, 0], selected[:, 1], selected[:, 2]
                s = scores[b, i, c]
            return torch.cat((b[:, None].float(), boxes[b, i], s[:, None], c[:, None].float()), 1)

    return NMSModel().eval()
