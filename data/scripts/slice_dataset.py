"""Cut a YOLO dataset (boxes or polygons) into overlapping tiles with their labels, for training a model on what
sliced inference (detect.py --slice, val.py --slice) shows it: small objects at their own pixel size.

    python data/scripts/slice_dataset.py --data data/shapes.yaml --out ../datasets/shapes-tiles --slice 256
    python data/scripts/slice_dataset.py --data DATA.yaml --out OUT --slice 640 --overlap 0.2 --min-area-ratio 0.1
    python train.py --data ../datasets/shapes-tiles/shapes-tiles.yaml --img 256 ...

A label goes into a tile when at least --min-area-ratio of its area lies inside it (boxes clipped, polygons cut by
the tile's edges); tiles without labels stay as background unless --drop-empty. Writes OUT/images/<split>/,
OUT/labels/<split>/ and OUT/<name>.yaml, all or nothing (docs/sliced-inference.md)."""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from utils.data.tiling import slice_dataset  # noqa: E402
from utils.signals import exit_on_user_error  # noqa: E402


def parse_opt(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="dataset YAML (or a folder with images/ and labels/)")
    p.add_argument("--out", required=True, help="folder of the tiled dataset")
    p.add_argument("--slice", nargs="+", type=int, default=[512], help="tile size in pixels (or H W)")
    p.add_argument("--overlap", nargs="+", type=float, default=[0.2], help="overlap ratio in [0, 1) (or H W)")
    p.add_argument("--min-area-ratio", type=float, default=0.1,
                   help="share of a label's area that must lie inside a tile for the tile to keep it")
    p.add_argument("--drop-empty", action="store_true", help="leave out tiles without labels")
    p.add_argument("--name", default=None, help="the new YAML's name (default: --out's folder name)")
    return p.parse_args(argv)


def main(opt):
    f = slice_dataset(opt.data, opt.out, size=opt.slice, overlap=opt.overlap, min_area_ratio=opt.min_area_ratio,
                      drop_empty=opt.drop_empty, name=opt.name)
    print(f"tiled dataset written: {f}")
    return f


if __name__ == "__main__":
    with exit_on_user_error("slice_dataset"):
        main(parse_opt())
