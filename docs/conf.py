"""Sphinx configuration (``make docs``; CI builds with warnings as errors). rosdoc2 builds ROS 2 packages' docs with
Sphinx as well, so the same pages serve a ROS index."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "shape_sensing"
author = "shape_sensing maintainers"
copyright = "the shape_sensing maintainers; Apache-2.0"
release = re.search(r'__version__ = "([^"]+)"', (ROOT / "shape_sensing" / "__init__.py").read_text()).group(1)
version = release

extensions = ["myst_parser", "generated_reference"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
exclude_patterns = ["_build", "README.md"]
html_theme = "alabaster"
html_static_path: list[str] = []
html_title = f"shape_sensing {release}"
