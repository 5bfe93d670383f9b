"""``python -m shape_sensing.cli``: the ``shape-sensing`` command."""

import sys

from shape_sensing.cli import main

sys.exit(main())
