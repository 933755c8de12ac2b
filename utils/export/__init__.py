"""Writing trained models in deployment formats (export.py) and recognising them again (utils/inference/format_loader).

formats.py is the table of formats and their file names; prepare.py readies a checkpoint for tracing; one
``to_<format>.py`` per format writes the file. Everything here except formats.py needs the PyTorch environment.
"""
