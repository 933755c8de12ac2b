"""Metadata (stride, names) inside a .tflite file, as ultralytics writes it: a zip archive appended to the flatbuffer
holding one text member, meta.txt, with a Python dict literal. TFLite readers ignore the trailing bytes; zipfile finds
the archive from the end of the file. Framework-free, so any environment can read a .tflite's class names."""
import ast
import zipfile


def append_tflite_metadata(path, metadata):
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("meta.txt", str(metadata))


def read_tflite_metadata(path):
    """-> the metadata dict, or None when the file carries none (a .tflite written by another tool)."""
    try:
        with zipfile.ZipFile(path) as z:
            return ast.literal_eval(z.read(z.namelist()[0]).decode("utf-8"))  # a literal: evaluates no code
    except (zipfile.BadZipFile, IndexError, KeyError, ValueError, SyntaxError):
        return None
