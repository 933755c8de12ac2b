"""Running an NCNN model folder (<stem>_ncnn_model/) for DetectMultiBackend on the ncnn runtime's CPU path: NCHW
float32 numpy in, [predictions] out. NCNN takes one image at a time (blob in0 -> out0, pnnx's names); the decode
grids were fixed at export, so the input size is the one metadata.yaml records."""
from pathlib import Path

import numpy as np
from utils.export.folder_meta import read_folder_meta


class NCNNRunner:
    def __init__(self, w):
        import ncnn
        folder = Path(w)
        param = next(folder.glob("*.param"), None)
        if param is None or not param.with_suffix(".bin").is_file():
            raise FileNotFoundError(f"{w}: no .param/.bin NCNN model in this folder; export it with export.py "
                                    "--include ncnn")
        self.ncnn = ncnn
        self.net = ncnn.Net()
        self.net.opt.use_vulkan_compute = False
        # fp32 throughout: ncnn stores and computes in fp16 where the CPU allows unless told not to
        self.net.opt.use_fp16_storage = self.net.opt.use_fp16_packed = self.net.opt.use_fp16_arithmetic = False
        self.net.load_param(str(param))
        self.net.load_model(str(param.with_suffix(".bin")))
        meta = read_folder_meta(folder / "metadata.yaml")
        self.stride, self.names = int(meta.get("stride", 32)), meta.get("names")
        self.input_shape = (1, 3, *meta["imgsz"]) if "imgsz" in meta else None

    def __call__(self, x):
        out = []
        for im in x:  # (3, h, w)
            with self.net.create_extractor() as ex:
                ex.input("in0", self.ncnn.Mat(np.ascontiguousarray(im, dtype=np.float32)))
                _, y = ex.extract("out0")
                out.append(np.array(y)[None])
        return [np.concatenate(out, 0)]
