"""Run YOLOv5 instance segmentation on images, folders, globs, .txt lists, videos, cameras and streams (the flags
and outputs of ultralytics/yolov5's segment/predict.py).

Usage:
    python segment/predict.py --weights yolov5s-seg.pt --source img.jpg      # or a folder, glob, video, 0, URL
Outputs go to runs/predict-seg/exp*: images/videos with masks and boxes drawn, labels/*.txt with --save-txt (one
line per instance: class and its polygon x1 y1 x2 y2 ... normalized to 0-1, [conf] with --save-conf).
--retina-masks computes the masks at the original image size (sharper, slower).
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from utils import signals  # noqa: E402

if __name__ == "__main__":
    signals.install("detect")

from utils.backend import inference_mode  # noqa: E402
from utils.cli_flags import FlagParser, add_predict_flags  # noqa: E402
from utils.signals import exit_on_user_error  # noqa: E402
from utils.paths import increment_path  # noqa: E402
from utils.device_header import select_and_log_device  # noqa: E402
from utils.run_header import print_args  # noqa: E402
from models.from_record import build_any_model  # noqa: E402
from utils.inference import load_model  # noqa: E402
from utils.inference.outputs import source_names  # noqa: E402
from utils.inference.predict import predict_and_report  # noqa: E402
from utils.segment.predict_writer import SegmentationWriter, SegmentOutputs  # noqa: E402
from utils.inference.sources import is_stream, open_source  # noqa: E402
from utils.segment.sliced_predict import SlicedSegmenter, SlicedSegmentWriter  # noqa: E402
from utils.inference.sliced_writer import open_sliced_source  # noqa: E402
from utils.tiles import add_slice_flags, settings_from_flags  # noqa: E402
from utils.shutdown import leave_quickly  # noqa: E402


@inference_mode()
def run(weights=ROOT / "yolov5s-seg.pt", source=ROOT / "data/images", data=ROOT / "data/coco128.yaml",
        imgsz=(640, 640), conf_thres=0.25, iou_thres=0.45, max_det=1000, device="", view_img=False, save_txt=False,
        save_conf=False, save_crop=False, nosave=False, classes=None, agnostic_nms=False, augment=False,
        visualize=False, update=False, project=ROOT / "runs/predict-seg", name="exp", exist_ok=False,
        line_thickness=3, hide_labels=False, hide_conf=False, half=False, dnn=False, vid_stride=1,
        retina_masks=False, slice=None, slice_overlap=0.2, slice_no_full=False, slice_merge="nmm", slice_match="ios",
        slice_match_thres=0.5, slice_agnostic=False, slice_batch=16):
    """Returns the run folder (Path)."""
    source = str(source)
    stream = is_stream(source)
    save_img = not nosave and not source.endswith(".txt")
    imgsz = list(imgsz) if isinstance(imgsz, (list, tuple)) else [imgsz, imgsz]
    sliced = settings_from_flags(slice, slice_overlap, slice_no_full, slice_merge, slice_match, slice_match_thres,
                                 slice_agnostic, slice_batch)  # checked before the model loads: one line if bad
    device = select_and_log_device(device)  # the official 'YOLOv5 🚀 ...' line, before the model loads
    model, imgsz = load_model(weights, device=device, half=half, dnn=dnn, data=data, imgsz=imgsz,
                              task="segment")
    if sliced is None:
        dataset = open_source(source, stream, imgsz, stride=model.stride, auto=model.pt, vid_stride=vid_stride)
    else:  # --slice: each frame at its own size, cut into tiles (docs/sliced-inference.md)
        dataset = open_sliced_source(source, stream, vid_stride)
    save_dir = increment_path(Path(project) / name, exist_ok=exist_ok, mkdir=True)
    (save_dir / "labels" if save_txt else save_dir).mkdir(parents=True, exist_ok=True)
    # labels are written here as polygons, so DetectionOutputs' own box lines are off
    outputs = SegmentOutputs(save_dir, model.names, save_img, False, 0, save_conf, save_crop, False, view_img,
                             line_thickness, hide_labels, hide_conf, n_sources=len(dataset) if stream else 1,
                             sources=source_names(dataset, stream), stream=stream)
    outputs.save_polygons = save_txt
    writer = SegmentationWriter(outputs, retina_masks, conf_thres=conf_thres, iou_thres=iou_thres, classes=classes,
                                agnostic=agnostic_nms, max_det=max_det, augment=augment)
    if sliced is not None:  # masks at each tile's own pixels, merged as the boxes are
        writer = SlicedSegmentWriter(writer, SlicedSegmenter(model, imgsz, sliced, conf_thres, iou_thres, classes,
                                                             agnostic_nms, max_det, augment))
    predict_and_report(model, dataset, writer, source, stream, imgsz, save_txt)
    if update:
        from utils.checkpoint.training import strip_optimizer
        strip_optimizer(weights[0] if isinstance(weights, (list, tuple)) else weights,
                        build_model=build_any_model)
    return save_dir


def parse_opt(argv=None):
    parser = FlagParser()
    add_predict_flags(parser, weights=ROOT / "yolov5s-seg.pt", data=ROOT / "data/coco128.yaml", imgsz=640,
                      project=ROOT / "runs/predict-seg")
    parser.add_argument("--retina-masks", action="store_true", help="whether to plot masks in native resolution")
    add_slice_flags(parser)
    opt = parser.parse_args(argv)
    opt.imgsz *= 2 if len(opt.imgsz) == 1 else 1
    print_args(vars(opt))  # official: the arguments line as soon as they are parsed
    return opt


def main(opt):
    return run(**vars(opt))


if __name__ == "__main__":
    with exit_on_user_error("predict"):
        main(parse_opt())
    leave_quickly()
