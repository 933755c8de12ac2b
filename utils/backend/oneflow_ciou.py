"""The fused CIoU on OneFlow + CUDA: the ``flow._C.fused_get_*`` kernel chain. Written against an ``ops`` namespace
and importing no framework, so tests run the chain with CPU stand-ins of the same signatures: the real kernels exist
only for CUDA, and a wrong argument order (the coordinate op returns x1, x2, y1, y2, not x1, y1, x2, y2) would
otherwise only show on a GPU."""
from utils.iou_math import corners_and_sizes


def ciou_fused_chain(box1, box2, xywh=True, eps=1e-7, ops=None):
    """CIoU through OneFlow's fused kernels; ``ops`` is ``flow._C`` (oneflow_backend.fused_ciou passes it).

    Signatures (OneFlow 0.9.0): the coordinate op returns b1_x1, b1_x2, b1_y1, b1_y2, b2_x1, b2_x2, b2_y1, b2_y2,
    and every op after it takes the eight coordinates in that x1, x2 order; fused_get_ciou_result returns
    (ciou, alpha) with alpha already treated as a constant in its backward.
    """
    if xywh:
        (x1, y1, w1, h1), (x2, y2, w2, h2) = box1.chunk(4, -1), box2.chunk(4, -1)
        coords = ops.fused_get_boundding_boxes_coord(x1, y1, w1, h1, x2, y2, w2, h2)
        b1_x1, b1_x2, b1_y1, b1_y2, b2_x1, b2_x2, b2_y1, b2_y2 = coords
    else:
        (b1_x1, b1_x2, b1_y1, b1_y2, b2_x1, b2_x2, b2_y1, b2_y2), (w1, h1, w2, h2) = \
            corners_and_sizes(box1, box2, False, eps)
    inter = ops.fused_get_intersection_area(b1_x1, b1_x2, b2_x1, b2_x2, b1_y1, b1_y2, b2_y1, b2_y2)
    iou = ops.fused_get_iou(w1, h1, w2, h2, inter, eps)
    c2 = ops.fused_get_convex_diagonal_squared(b1_x1, b1_x2, b2_x1, b2_x2, b1_y1, b1_y2, b2_y1, b2_y2, eps)
    rho2 = ops.fused_get_center_dist(b1_x1, b1_x2, b2_x1, b2_x2, b1_y1, b1_y2, b2_y1, b2_y2)
    v = ops.fused_get_ciou_diagonal_angle(w1, h1, w2, h2, eps)
    return ops.fused_get_ciou_result(v, iou, rho2, c2, eps)[0]
