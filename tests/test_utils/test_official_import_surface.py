"""The names ultralytics/yolov5's own scripts import from its utils/ and models/ modules (its detect.py, val.py,
train.py, export.py, segment/*, classify/*, hubconf.py, models/*; listed from its source at commit 5081342f): a user's
script copied from one of them imports here too, under either backend. What is left out on purpose is listed in
NOT_PROVIDED, and docs/migrating.md names it."""
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SURFACE = {
    "models.common": ["AutoShape", "Bottleneck", "BottleneckCSP", "C3", "C3Ghost", "C3SPP", "C3TR", "C3x", "Classify",
                      "Concat", "Contract", "Conv", "CrossConv", "DWConv", "DWConvTranspose2d", "DetectMultiBackend",
                      "Expand", "Focus", "GhostBottleneck", "GhostConv", "Proto", "SPP", "SPPF", "autopad"],
    "models.experimental": ["MixConv2d", "attempt_download", "attempt_load"],
    "models.yolo": ["BaseModel", "ClassificationModel", "Detect", "DetectionModel", "Model", "Segment",
                    "SegmentationModel"],
    "utils": ["TryExcept", "emojis", "threaded", "notebook_init"],
    "utils.activations": ["SiLU", "Hardswish", "Mish", "MemoryEfficientMish", "FReLU", "AconC", "MetaAconC"],
    "utils.augmentations": ["Albumentations", "augment_hsv", "classify_albumentations", "classify_transforms",
                            "copy_paste", "denormalize", "letterbox", "mixup", "random_perspective"],
    "utils.autoanchor": ["check_anchor_order", "check_anchors"],
    "utils.autobatch": ["check_train_batch_size"],
    "utils.callbacks": ["Callbacks"],
    "utils.dataloaders": ["IMG_FORMATS", "LoadImages", "LoadImagesAndLabels", "LoadScreenshots", "LoadStreams",
                          "VID_FORMATS", "create_classification_dataloader", "create_dataloader", "letterbox"],
    "utils.downloads": ["attempt_download", "curl_download", "gsutil_getsize", "is_url", "safe_download"],
    "utils.general": ["DATASETS_DIR", "LOGGER", "NUM_THREADS", "Profile", "ROOT", "TQDM", "WorkingDirectory",
                      "check_amp", "check_dataset", "check_file", "check_font", "check_git_info", "check_git_status",
                      "check_img_size", "check_imshow", "check_requirements", "check_suffix", "check_version",
                      "check_yaml", "clean_str", "coco80_to_coco91_class", "colorstr", "cv2", "download", "file_date",
                      "file_size", "get_default_args", "get_latest_run", "git_describe", "increment_path",
                      "init_seeds", "intersect_dicts", "is_colab", "is_jupyter", "is_kaggle",
                      "labels_to_class_weights", "labels_to_image_weights", "make_divisible", "methods",
                      "non_max_suppression", "one_cycle", "print_args", "print_mutation", "resample_segments",
                      "save_one_txt", "scale_boxes", "scale_segments", "segment2box", "segments2boxes",
                      "strip_optimizer", "url2file", "xyn2xy", "xywh2xyxy", "xywhn2xyxy", "xyxy2xywh", "xyxy2xywhn",
                      "yaml_load", "yaml_save"],
    "utils.loggers": ["GenericLogger", "Loggers"],
    "utils.loss": ["ComputeLoss", "FocalLoss", "QFocalLoss", "BCEBlurWithLogitsLoss", "smooth_BCE"],
    "utils.metrics": ["ConfusionMatrix", "ap_per_class", "box_iou", "fitness", "process_batch"],
    "utils.plots": ["imshow_cls", "output_to_target", "plot_evolve", "plot_images", "plot_labels", "plot_val_study"],
    "utils.segment.dataloaders": ["create_dataloader"],
    "utils.segment.general": ["process_mask", "process_mask_native", "scale_image"],
    "utils.segment.loss": ["ComputeLoss"],
    "utils.segment.metrics": ["KEYS", "Metrics", "ap_per_class_box_and_mask", "fitness"],
    "utils.segment.plots": ["plot_images_and_masks", "plot_results_with_masks"],
    "utils.torch_utils": ["EarlyStopping", "ModelEMA", "copy_attr", "de_parallel", "fuse_conv_and_bn",
                          "initialize_weights", "model_info", "profile", "reshape_classifier_output", "scale_img",
                          "select_device", "smartCrossEntropyLoss", "smart_DDP", "smart_amp_autocast",
                          "smart_inference_mode", "smart_optimizer", "smart_resume", "time_sync",
                          "torch_distributed_zero_first", "LOCAL_RANK", "RANK", "WORLD_SIZE"],
}

# module -> why it is not here; docs/migrating.md names each
NOT_PROVIDED = {
    "models.tf": "the TensorFlow formats are exported through onnx2tf, not a Keras rebuild of the model",
    "utils.loggers.comet.comet_utils": "the official trainer's own Comet resume helper (Comet logging is "
                                       "utils/loggers/comet_logger.py)",
    "utils.triton": "no Triton Inference Server client",
}


@pytest.mark.parametrize("module", sorted(SURFACE))
def test_official_names_import(module):
    m = importlib.import_module(module)
    missing = [n for n in SURFACE[module] if not hasattr(m, n)]
    assert not missing, f"{module} lacks {missing}"


def test_left_out_modules_are_named_in_the_migration_guide():
    text = (ROOT / "docs" / "migrating.md").read_text()
    for module in NOT_PROVIDED:
        assert f"`{module}`" in text, f"docs/migrating.md does not say that {module} is left out"
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(module)


# The parameters of each official name, in order (ultralytics/yolov5 at 5081342f): a call written against the official
# signature, by position or by keyword, means the same here. Ours may take more parameters after these.
OFFICIAL_PARAMETERS = {
    "models.common.AutoShape": ('model', 'verbose'),
    "models.common.Bottleneck": ('c1', 'c2', 'shortcut', 'g', 'e'),
    "models.common.BottleneckCSP": ('c1', 'c2', 'n', 'shortcut', 'g', 'e'),
    "models.common.C3": ('c1', 'c2', 'n', 'shortcut', 'g', 'e'),
    "models.common.C3Ghost": ('c1', 'c2', 'n', 'shortcut', 'g', 'e'),
    "models.common.C3SPP": ('c1', 'c2', 'k', 'n', 'shortcut', 'g', 'e'),
    "models.common.C3TR": ('c1', 'c2', 'n', 'shortcut', 'g', 'e'),
    "models.common.C3x": ('c1', 'c2', 'n', 'shortcut', 'g', 'e'),
    "models.common.Classify": ('c1', 'c2', 'k', 's', 'p', 'g', 'dropout_p'),
    "models.common.Concat": ('dimension',),
    "models.common.Contract": ('gain',),
    "models.common.Conv": ('c1', 'c2', 'k', 's', 'p', 'g', 'd', 'act'),
    "models.common.CrossConv": ('c1', 'c2', 'k', 's', 'g', 'e', 'shortcut'),
    "models.common.DWConv": ('c1', 'c2', 'k', 's', 'd', 'act'),
    "models.common.DWConvTranspose2d": ('c1', 'c2', 'k', 's', 'p1', 'p2'),
    "models.common.DetectMultiBackend": ('weights', 'device', 'dnn', 'data', 'fp16', 'fuse'),
    "models.common.Expand": ('gain',),
    "models.common.Focus": ('c1', 'c2', 'k', 's', 'p', 'g', 'act'),
    "models.common.GhostBottleneck": ('c1', 'c2', 'k', 's'),
    "models.common.GhostConv": ('c1', 'c2', 'k', 's', 'g', 'act'),
    "models.common.Proto": ('c1', 'c_', 'c2'),
    "models.common.SPP": ('c1', 'c2', 'k'),
    "models.common.SPPF": ('c1', 'c2', 'k'),
    "models.common.autopad": ('k', 'p', 'd'),
    "models.experimental.MixConv2d": ('c1', 'c2', 'k', 's', 'equal_ch'),
    "models.experimental.attempt_download": ('file', 'repo', 'release'),
    "models.experimental.attempt_load": ('weights', 'device', 'inplace', 'fuse'),
    "models.yolo.ClassificationModel": ('cfg', 'model', 'nc', 'cutoff'),
    "models.yolo.Detect": ('nc', 'anchors', 'ch', 'inplace'),
    "models.yolo.DetectionModel": ('cfg', 'ch', 'nc', 'anchors'),
    "models.yolo.Model": ('cfg', 'ch', 'nc', 'anchors'),
    "models.yolo.Segment": ('nc', 'anchors', 'nm', 'npr', 'ch', 'inplace'),
    "models.yolo.SegmentationModel": ('cfg', 'ch', 'nc', 'anchors'),
    "utils.TryExcept": ('msg', 'verbose'),
    "utils.activations.SiLU": (),
    "utils.augmentations.Albumentations": ('size',),
    "utils.augmentations.augment_hsv": ('im', 'hgain', 'sgain', 'vgain'),
    "utils.augmentations.classify_albumentations": ('augment', 'size', 'scale', 'ratio', 'hflip', 'vflip', 'jitter',
        'mean', 'std', 'auto_aug'),
    "utils.augmentations.classify_transforms": ('size',),
    "utils.augmentations.copy_paste": ('im', 'labels', 'segments', 'p'),
    "utils.augmentations.denormalize": ('x', 'mean', 'std'),
    "utils.augmentations.letterbox": ('im', 'new_shape', 'color', 'auto', 'scaleFill', 'scaleup', 'stride'),
    "utils.augmentations.mixup": ('im', 'labels', 'im2', 'labels2'),
    "utils.augmentations.random_perspective": ('im', 'targets', 'segments', 'degrees', 'translate', 'scale', 'shear',
        'perspective', 'border'),
    "utils.autoanchor.check_anchor_order": ('m',),
    "utils.autoanchor.check_anchors": ('dataset', 'model', 'thr', 'imgsz'),
    "utils.autobatch.check_train_batch_size": ('model', 'imgsz', 'amp'),
    "utils.callbacks.Callbacks": (),
    "utils.dataloaders.LoadImages": ('path', 'img_size', 'stride', 'auto', 'transforms', 'vid_stride'),
    "utils.dataloaders.LoadImagesAndLabels": ('path', 'img_size', 'batch_size', 'augment', 'hyp', 'rect',
        'image_weights', 'cache_images', 'single_cls', 'stride', 'pad', 'min_items', 'prefix', 'rank', 'seed'),
    "utils.dataloaders.LoadScreenshots": ('source', 'img_size', 'stride', 'auto', 'transforms'),
    "utils.dataloaders.LoadStreams": ('sources', 'img_size', 'stride', 'auto', 'transforms', 'vid_stride'),
    "utils.dataloaders.create_classification_dataloader": ('path', 'imgsz', 'batch_size', 'augment', 'cache', 'rank',
        'workers', 'shuffle'),
    "utils.dataloaders.create_dataloader": ('path', 'imgsz', 'batch_size', 'stride', 'single_cls', 'hyp', 'augment',
        'cache', 'pad', 'rect', 'rank', 'workers', 'image_weights', 'quad', 'prefix', 'shuffle', 'seed'),
    "utils.dataloaders.letterbox": ('im', 'new_shape', 'color', 'auto', 'scaleFill', 'scaleup', 'stride'),
    "utils.downloads.attempt_download": ('file', 'repo', 'release'),
    "utils.downloads.curl_download": ('url', 'filename', 'silent'),
    "utils.downloads.gsutil_getsize": ('url',),
    "utils.downloads.is_url": ('url', 'check'),
    "utils.emojis": ('string',),
    "utils.general.Profile": ('t', 'device'),
    "utils.general.TQDM": ('iterable', 'desc', 'total', 'leave', 'file', 'mininterval', 'disable', 'unit', 'unit_scale',
        'unit_divisor', 'bar_format', 'initial'),
    "utils.general.WorkingDirectory": ('new_dir',),
    "utils.general.check_amp": ('model',),
    "utils.general.check_dataset": ('data', 'autodownload'),
    "utils.general.check_file": ('file', 'suffix'),
    "utils.general.check_font": ('font', 'progress'),
    "utils.general.check_git_info": ('path',),
    "utils.general.check_git_status": ('repo', 'branch'),
    "utils.general.check_img_size": ('imgsz', 's', 'floor'),
    "utils.general.check_imshow": ('warn',),
    "utils.general.check_requirements": ('requirements', 'exclude', 'install', 'cmds'),
    "utils.general.check_suffix": ('file', 'suffix', 'msg'),
    "utils.general.check_version": ('current', 'minimum', 'name', 'pinned', 'hard', 'verbose'),
    "utils.general.check_yaml": ('file', 'suffix'),
    "utils.general.clean_str": ('s',),
    "utils.general.coco80_to_coco91_class": (),
    "utils.general.colorstr": ('input',),
    "utils.general.download": ('url', 'dir', 'unzip', 'delete', 'curl', 'threads', 'retry'),
    "utils.general.file_date": ('path',),
    "utils.general.file_size": ('path',),
    "utils.general.get_default_args": ('func',),
    "utils.general.get_latest_run": ('search_dir',),
    "utils.general.git_describe": ('path',),
    "utils.general.increment_path": ('path', 'exist_ok', 'sep', 'mkdir'),
    "utils.general.init_seeds": ('seed', 'deterministic'),
    "utils.general.intersect_dicts": ('da', 'db', 'exclude'),
    "utils.general.is_colab": (),
    "utils.general.is_jupyter": (),
    "utils.general.is_kaggle": (),
    "utils.general.labels_to_class_weights": ('labels', 'nc'),
    "utils.general.labels_to_image_weights": ('labels', 'nc', 'class_weights'),
    "utils.general.make_divisible": ('x', 'divisor'),
    "utils.general.methods": ('instance',),
    "utils.general.non_max_suppression": ('prediction', 'conf_thres', 'iou_thres', 'classes', 'agnostic', 'multi_label',
        'labels', 'max_det', 'nm'),
    "utils.general.one_cycle": ('y1', 'y2', 'steps'),
    "utils.general.print_args": ('show_file', 'show_func'),
    "utils.general.print_mutation": ('keys', 'results', 'hyp', 'save_dir', 'bucket', 'prefix'),
    "utils.general.resample_segments": ('segments', 'n'),
    "utils.general.save_one_txt": ('predn', 'save_conf', 'shape', 'file'),
    "utils.general.scale_boxes": ('img1_shape', 'boxes', 'img0_shape', 'ratio_pad'),
    "utils.general.scale_segments": ('img1_shape', 'segments', 'img0_shape', 'ratio_pad', 'normalize'),
    "utils.general.segment2box": ('segment', 'width', 'height'),
    "utils.general.segments2boxes": ('segments',),
    "utils.general.strip_optimizer": ('f', 's'),
    "utils.general.url2file": ('url',),
    "utils.general.xyn2xy": ('x', 'w', 'h', 'padw', 'padh'),
    "utils.general.xywh2xyxy": ('x',),
    "utils.general.xywhn2xyxy": ('x', 'w', 'h', 'padw', 'padh'),
    "utils.general.xyxy2xywh": ('x',),
    "utils.general.xyxy2xywhn": ('x', 'w', 'h', 'clip', 'eps'),
    "utils.general.yaml_load": ('file',),
    "utils.general.yaml_save": ('file', 'data'),
    "utils.loggers.GenericLogger": ('opt', 'console_logger', 'include'),
    "utils.loss.ComputeLoss": ('model', 'autobalance'),
    "utils.metrics.ConfusionMatrix": ('nc', 'conf', 'iou_thres'),
    "utils.metrics.ap_per_class": ('tp', 'conf', 'pred_cls', 'target_cls', 'plot', 'save_dir', 'names', 'eps',
        'prefix'),
    "utils.metrics.box_iou": ('box1', 'box2', 'eps'),
    "utils.metrics.fitness": ('x',),
    "utils.metrics.process_batch": ('detections', 'labels', 'iouv', 'pred_masks', 'gt_masks', 'overlap', 'masks'),
    "utils.plots.imshow_cls": ('im', 'labels', 'pred', 'names', 'nmax', 'verbose', 'f'),
    "utils.plots.output_to_target": ('output', 'max_det'),
    "utils.plots.plot_evolve": ('evolve_csv',),
    "utils.plots.plot_images": (),
    "utils.plots.plot_labels": ('labels', 'names', 'save_dir'),
    "utils.plots.plot_val_study": ('file', 'dir', 'x'),
    "utils.segment.dataloaders.create_dataloader": ('path', 'imgsz', 'batch_size', 'stride', 'single_cls', 'hyp',
        'augment', 'cache', 'pad', 'rect', 'rank', 'workers', 'image_weights', 'quad', 'prefix', 'shuffle',
        'mask_downsample_ratio', 'overlap_mask', 'seed'),
    "utils.segment.general.process_mask": ('protos', 'masks_in', 'bboxes', 'shape', 'upsample'),
    "utils.segment.general.process_mask_native": ('protos', 'masks_in', 'bboxes', 'shape'),
    "utils.segment.general.scale_image": ('im1_shape', 'masks', 'im0_shape', 'ratio_pad'),
    "utils.segment.loss.ComputeLoss": ('model', 'autobalance', 'overlap'),
    "utils.segment.metrics.Metrics": (),
    "utils.segment.metrics.ap_per_class_box_and_mask": ('tp_m', 'tp_b', 'conf', 'pred_cls', 'target_cls', 'plot',
        'save_dir', 'names'),
    "utils.segment.metrics.fitness": ('x',),
    "utils.segment.plots.plot_images_and_masks": (),
    "utils.segment.plots.plot_results_with_masks": ('file', 'dir', 'best'),
    "utils.threaded": ('func',),
    "utils.torch_utils.EarlyStopping": ('patience',),
    "utils.torch_utils.ModelEMA": ('model', 'decay', 'tau', 'updates'),
    "utils.torch_utils.copy_attr": ('a', 'b', 'include', 'exclude'),
    "utils.torch_utils.de_parallel": ('model',),
    "utils.torch_utils.fuse_conv_and_bn": ('conv', 'bn'),
    "utils.torch_utils.initialize_weights": ('model',),
    "utils.torch_utils.model_info": ('model', 'detailed', 'verbose', 'imgsz'),
    "utils.torch_utils.profile": ('input', 'ops', 'n', 'device'),
    "utils.torch_utils.reshape_classifier_output": ('model', 'n'),
    "utils.torch_utils.scale_img": ('img', 'ratio', 'same_shape', 'gs'),
    "utils.torch_utils.select_device": ('device', 'batch_size', 'newline'),
    "utils.torch_utils.smartCrossEntropyLoss": ('label_smoothing',),
    "utils.torch_utils.smart_DDP": ('model',),
    "utils.torch_utils.smart_amp_autocast": ('enabled', 'device'),
    "utils.torch_utils.smart_inference_mode": ('torch_1_9',),
    "utils.torch_utils.smart_optimizer": ('model', 'name', 'lr', 'momentum', 'decay'),
    "utils.torch_utils.smart_resume": ('ckpt', 'optimizer', 'ema', 'weights', 'epochs', 'resume'),
    "utils.torch_utils.time_sync": ('device',),
    "utils.torch_utils.torch_distributed_zero_first": ('local_rank',),
}
# different on purpose: the trainer's logger set is built from the run's options here (utils/loggers/__init__.py)
DIFFERENT_PARAMETERS = {"utils.loggers.Loggers"}


@pytest.mark.parametrize("qualified", sorted(OFFICIAL_PARAMETERS))
def test_official_parameters_come_first_in_their_order(qualified):
    import inspect
    module, _, name = qualified.rpartition(".")
    obj = getattr(importlib.import_module(module), name)
    params = inspect.signature(obj.__init__ if inspect.isclass(obj) else obj).parameters.values()
    ours = [p.name for p in params if p.name != "self"]
    want = list(OFFICIAL_PARAMETERS[qualified])
    if "args" in ours or ("kwargs" in ours and set(want) <= set(ours)):  # takes anything on to the real function
        return
    assert ours[:len(want)] == want, f"{qualified}: ours {ours}, official {want}"
