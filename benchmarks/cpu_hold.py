"""Hold the libraries a training run uses to a lesser CPU's instruction sets: how an AVX2-only CPU (AMD Zen 3, Intel
before Skylake-SP) is measured on a machine with AVX-512.

    python benchmarks/compare_train.py --hold avx2 ...      # the benchmarks that start trainers take --hold
    eval "$(python benchmarks/cpu_hold.py avx2)"            # a shell's exports, for the ones that run in-process

Each library that picks its kernels at run time by the CPU's features has its own switch, and every one of them is
set, on both sides of a comparison, so that the convolutions (oneDNN), ATen's vector kernels, BLAS (MKL), the loader's
image warps (OpenCV) and NumPy all run the code an AVX2-only CPU would run. What stays: the machine's caches, clock and
memory, so a held figure is a variant (results_io names it), never a headline.
"""
import os
import shlex
import sys

HOLDS = {
    "avx2": {
        "ONEDNN_MAX_CPU_ISA": "AVX2",            # oneDNN: convolutions, BatchNorm (and the bf16 choice: fp32 below it)
        "ATEN_CPU_CAPABILITY": "avx2",           # ATen's vectorised element-wise and reduction kernels
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",       # MKL's BLAS (matrix products outside oneDNN)
        "OPENCV_CPU_DISABLE": "AVX512-SKX",      # OpenCV 5's name for its AVX-512 dispatch target
        "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",  # NumPy 2's AVX-512 dispatch targets
    },
}


def hold_env(name):
    """The environment variables that hold the libraries to `name` ({} for None)."""
    if name is None:
        return {}
    if name not in HOLDS:
        raise ValueError(f"unknown CPU hold {name!r}; known: {', '.join(HOLDS)}")
    return dict(HOLDS[name])


def add_argument(parser):
    """--hold NAME, for a benchmark that starts trainers (both sides get the hold)."""
    parser.add_argument("--hold", default=None, choices=list(HOLDS),
                        help="hold both sides' libraries to a lesser CPU's instruction sets (benchmarks/cpu_hold.py): "
                        "avx2 measures an AVX2-only CPU on an AVX-512 one")


def apply(name):
    """Set the hold in this process's environment, for the children it starts (and for results_io, which records it).
    It reaches this process's own libraries only where they are not imported yet."""
    os.environ.update(hold_env(name))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] not in HOLDS:
        print(f"usage: python benchmarks/cpu_hold.py {{{','.join(HOLDS)}}}", file=sys.stderr)
        return 2
    for key, value in hold_env(argv[0]).items():
        print(f"export {key}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
