"""Turn the public detection and classification datasets into the YOLO layout, one module per dataset.

The data YAMLs of ultralytics/yolov5 (VisDrone, xView, Argoverse, SKU-110K, Objects365, GlobalWheat2020, ImageNet)
carry their download-and-convert code inline as a Python ``download:`` entry. Here that entry is two lines that call
``<module>.download(yaml)``; the work lives in these modules, where it is read, reviewed and tested. Each module
splits the network part (``download``: fetch the archives with ``fetch.download``, then convert) from the offline
part (``convert*`` / ``arrange*``: raw annotations in, YOLO labels and folders out), which the tests run on tiny
synthetic copies of each raw format. The ``download:`` entries still run only with the user's consent
(YOLO_ALLOW_DOWNLOAD_SCRIPTS=1 or --allow-download-scripts, utils/dataset_config.py).

No framework import here: a conversion needs numpy, PIL and the standard library only.
"""
