"""shape_sensing: live shape sensing of continuum robots (drivers, estimators, TF, markers, bags).

The version is kept here once; ``setup.py`` reads it and ``package.xml`` must agree (``test/test_packaging.py``).
"""

__version__ = "0.2.0"
