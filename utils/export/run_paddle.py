"""Running a PaddlePaddle inference model (<stem>_paddle_model/: model.json or model.pdmodel, model.pdiparams) for
utils/inference/format_loader.py on Paddle Inference's CPU predictor: NCHW float32 numpy in, [predictions] out."""
from pathlib import Path

from utils.export.folder_meta import read_folder_meta, stride_and_names


class PaddleRunner:
    def __init__(self, w):
        import sys
        if "tensorflow" in sys.modules:  # importing paddle then segfaults (TensorFlow 2.21, Paddle 3.3)
            raise OSError("Paddle Inference crashes in a process that has loaded TensorFlow: run the Paddle model in a "
                          "process of its own, or before any TensorFlow model")
        import paddle.inference as pdi
        p = Path(w)
        folder = p if p.is_dir() else p.parent
        model = next((f for f in (folder / "model.json", folder / "model.pdmodel") if f.is_file()), None)
        params = folder / "model.pdiparams"
        if model is None or not params.is_file():
            raise FileNotFoundError(f"{w}: no model.json/model.pdmodel with model.pdiparams in this folder; export it "
                                    "with export.py --include paddle")
        config = pdi.Config(str(model), str(params))
        config.disable_gpu()
        config.disable_glog_info()
        config.disable_mkldnn()  # Paddle 3.3's oneDNN kernels reject attributes of x2paddle's graph (resize scales)
        self.predictor = pdi.create_predictor(config)
        self.input = self.predictor.get_input_handle(self.predictor.get_input_names()[0])
        self.output_names = self.predictor.get_output_names()
        meta = read_folder_meta(folder / "metadata.yaml")
        self.stride, self.names = stride_and_names(meta)
        shape = tuple(self.input.shape())
        if "imgsz" in meta:  # x2paddle's graph reshapes to the export batch and size
            shape = (meta.get("batch", 1), 3, *meta["imgsz"])
        self.input_shape = shape if shape and all(d > 0 for d in shape) else None

    def __call__(self, x):
        self.input.reshape(list(x.shape))
        self.input.copy_from_cpu(x)
        self.predictor.run()
        return [self.predictor.get_output_handle(n).copy_to_cpu() for n in self.output_names][:1]
