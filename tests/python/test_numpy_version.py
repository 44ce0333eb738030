"""The run is under the NumPy it claims to be (TESSERA_EXPECT_NUMPY=2: the
project-local NumPy 2, not Debian's 1.24)."""
import os

import numpy as np


def test_numpy_major_version():
    expected = os.environ.get("TESSERA_EXPECT_NUMPY")
    if expected:
        assert np.__version__.split(".")[0] == expected, np.__version__
