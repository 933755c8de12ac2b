"""CoreML (<stem>.mlpackage, an ML program; <stem>.mlmodel, a neural network, with --mlmodel), converted by
coremltools from torch.export's graph (ultralytics converts the traced TorchScript one): input 'image' (an RGB
image scaled by 1/255), output the predictions. coremltools converts on Linux; running the model needs macOS, so DetectMultiBackend names
that in one line. --half/--int8 quantise the weights (fp16 / 8-bit linear). The model is saved under a temporary
name (a .mlpackage into a temporary folder whose files are then renamed into place) so that a failed export leaves
the earlier one as it was."""
import warnings

from utils.atomic_files import output_folder, output_path
from utils.export.prepare import ExportError

INT8_MLMODEL_REFUSAL = ("--int8 --mlmodel: quantising a neural-network .mlmodel needs macOS; export an .mlpackage "
                        "(drop --mlmodel)")


def export_coreml(prepared, file, mlmodel=False, int8=False, half=False):
    import importlib.util
    if importlib.util.find_spec("coremltools") is None:
        raise ExportError("CoreML export needs coremltools: build the converters' environment with `make setup-tf` "
                          "and export with .venv-tf/bin/python export.py")
    from utils.backend import require_pytorch
    torch = require_pytorch("CoreML export")
    f = file.with_suffix(".mlmodel" if mlmodel else ".mlpackage")
    model, im = prepared.model, prepared.im
    if half:  # coremltools traces in fp32 and quantises the weights itself
        model, im = model.float(), im.float()
    with warnings.catch_warnings():  # coremltools warns that it has not been tested with this torch release
        warnings.simplefilter("ignore")
        # The graph first, coremltools after: coremltools imports TensorFlow, and a process that loaded TensorFlow's
        # LLVM before Triton's (which torch.export loads) aborts ("registered more than once").
        if mlmodel:  # the neural-network backend takes only TorchScript
            graph = torch.jit.trace(model, im, strict=False)
        else:  # an ExportedProgram has static shapes; coremltools 9 cannot convert the traced graph's shape
            # arithmetic under numpy 2 (int() of a 1-element array)
            graph = torch.export.export(model, (im,)).run_decompositions({})
        import coremltools as ct
        image = ct.ImageType("image", shape=tuple(im.shape), scale=1 / 255, bias=[0, 0, 0])
        ct_model = ct.convert(graph, inputs=[image],
                              convert_to="neuralnetwork" if mlmodel else "mlprogram",
                              compute_precision=ct.precision.FLOAT16 if half and not mlmodel else
                              ct.precision.FLOAT32 if not mlmodel else None)
        if int8:
            if mlmodel:
                raise ExportError(INT8_MLMODEL_REFUSAL)  # export.py refuses it before converting
            import coremltools.optimize.coreml as cto
            config = cto.OptimizationConfig(global_config=cto.OpLinearQuantizerConfig(mode="linear_symmetric"))
            ct_model = cto.linear_quantize_weights(ct_model, config)
    ct_model.short_description = f"YOLOv5 {file.stem}"
    ct_model.user_defined_metadata.update({k: str(v) for k, v in prepared.metadata.items()})
    with (output_path(f) if mlmodel else output_folder(f)) as tmp:  # tmp keeps the suffix coremltools checks
        ct_model.save(str(tmp))
    return f
