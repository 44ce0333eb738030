"""The run is under the NumPy it claims to be (TESSERA_EXPECT_NUMPY=2: the
project-local NumPy 2, not Debian's 1.24). Only the runs that set the
variable collect this file; without it there is nothing to check against,
which is an error in how the test was started, not a pass."""
import os

import numpy as np


def test_numpy_major_version():
    expected = os.environ.get("TESSERA_EXPECT_NUMPY")
    assert expected, "TESSERA_EXPECT_NUMPY is not set: say which NumPy major version this run must use"
    assert np.__version__.split(".")[0] == expected, np.__version__
