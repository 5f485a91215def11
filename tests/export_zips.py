"""Reading a slides zip back in tests: its entries, a CSV as (columns, rows, numbers), its manifest."""

from __future__ import annotations

import csv
import io
import json
import zipfile

import numpy as np


def open_zip(data: bytes) -> zipfile.ZipFile:
    return zipfile.ZipFile(io.BytesIO(data))


def read_csv(archive: zipfile.ZipFile, name: str) -> tuple[list[str], list[str], np.ndarray]:
    """(column labels, row labels, numbers as float64) of ``name``.csv in the zip ("nan" reads back as NaN)."""
    header, *rows = csv.reader(io.StringIO(archive.read(f"{name}.csv").decode("utf-8")))
    return header[1:], [row[0] for row in rows], np.array([[float(v) for v in row[1:]] for row in rows])


def read_manifest(archive: zipfile.ZipFile) -> dict:
    """manifest.json, refusing NaN or Infinity (not JSON: a number that was not measured is written null)."""

    def refuse(constant: str):
        raise ValueError(f"manifest.json holds {constant}")

    return json.loads(archive.read("manifest.json"), parse_constant=refuse)


def export_buttons(at) -> list:
    """The '⬇ Export this … for slides' zip buttons an AppTest page shows."""
    return [b for b in at.get("download_button") if b.proto.label.startswith("⬇ Export this")]
