"""The function set every per-backend module (torch_backend.py, oneflow_backend.py) implements, with what each
name means. utils/backend/__init__.py re-exports exactly these names from the chosen module;
tests/test_backend/test_backend_api.py checks that both modules define all of them. Helpers whose code is the same
on both frameworks live in shared.py instead."""

FUNCTION_SET = {
    # the framework
    "torch": "the framework module itself (oneflow under OneFlow: `import oneflow as torch`)",
    "BatchNorm2d": "the BatchNorm2d class the models build (OneFlow: a fix for its CPU training statistics)",
    "from_numpy": "numpy array -> framework tensor (C-contiguous; dtypes the framework lacks are widened)",
    "to_device": "host tensor -> device without blocking the host where the framework allows it",
    "wait_for_work": "block until queued device work is done (for timers)",
    "require_pytorch": "the real PyTorch module for TorchScript/ONNX, or a one-line error under OneFlow",
    "set_deterministic": "ask the framework for deterministic kernels (where it has the switch)",
    "tensorboard_graph": "the TensorBoard GraphDef of a model traced on a zero image (NotImplementedError: no tracer)",
    "nms_kernel": "the framework's NMS for a device, or None (utils/nms.py then uses its own)",
    # mixed precision
    "has_amp": "whether fp16 autocast with loss scaling runs on a device",
    "no_amp_reason": "why this framework never trains in mixed precision ('' when it can)",
    "cpu_has_native_bf16": "whether this CPU computes bf16 natively and the framework uses it",
    "amp_dtype": "(autocast dtype or None, note) for --amp/--no-amp/default on a device",
    "channels_last_pays": "whether input batches (training and inference) should be channels_last on a device",
    "autocast": "the mixed-precision context for a device and dtype (a null context where none applies)",
    "grad_scaler": "a GradScaler, or a stand-in with the same calls when AMP is off",
    # fused and multi-tensor paths (--bbox_iou_optim, --multi_tensor_optimizer)
    "fused_ciou": "(implementation name, fn(box1, box2, xywh, eps) or None) of the fused CIoU for a device",
    "compiled_ciou": "the torch.compile CIoU function, or None where the framework cannot compile",
    # the models
    "conv2d": "conv(x) for a model's nn.Conv2d (PyTorch, a CPU with AVX2 kernels only: large training convolutions "
              "take their weight gradient from NCHW copies, measured faster there)",
    "bn_silu": "act(bn(x)) for a model's Conv (PyTorch, CPU fp32/bf16 channels-last training: one C kernel, "
               "utils/native/bn_silu.c, where it builds)",
    "head_layout": "Detect's (bs, na*no, ny, nx) map as contiguous (bs, na, ny, nx, no) (PyTorch, a channels-last "
                   "map in training: its gradient copied once, into the map's own layout)",
    # the loss
    "head_reads": "a level map's objectness logits and the rows at given cells, in fp32 (the map's gradient "
                  "written once where the framework allows)",
    "ema_impl": "which EMA update runs for these tensors and flag: 'oneflow-multi-tensor', 'foreach' or 'loop'",
    "ema_update_": "ema = d * ema + (1 - d) * model over tensor lists, in place, fused when the flag asks",
    "optimizer_kwargs": "constructor arguments that make an optimizer step all tensors at once",
    "RMSprop": "the RMSprop optimizer class with PyTorch's update and momentum (classification's --optimizer RMSProp)",
    "optimizer_class": "the optimizer class training builds for 'SGD', 'Adam', 'AdamW' or 'RMSprop' (PyTorch's update)",
    "optimizer_impl": "how an optimizer steps: 'fused', 'foreach' or 'loop'",
    "optimizer_variants": "other optimizer step implementations worth timing: {label: param-group settings}",
    "clip_grad_norm_": "gradient clipping by the joint L2 norm, multi-tensor when the flag asks and it exists",
    "all_finite": "whether every tensor of a list holds only finite values, with one host sync for the whole list",
    "optimizer_state_to_native": "an optimizer state dict (PyTorch's layout, as files hold it) in this framework's",
    # distributed (utils/distributed/ calls these only inside a launcher-started job)
    "dist_init": "start the process group for a launcher-started job (device, timeout in seconds)",
    "dist_ready": "whether collectives can run now",
    "dist_barrier": "wait for every rank",
    "dist_broadcast_": "in-place broadcast of a tensor from a rank",
    "ddp_wrap": "the model wrapped for DistributedDataParallel on this rank's device",
    "ddp_gpu_follows_local_rank": "whether rank i must train on cuda:<local rank i> (OneFlow's collectives)",
}
