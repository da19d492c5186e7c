"""A launcher, as many projects have one: it starts the training script as a new Python.

    torchplace sim examples/launch.py

Under ``torchplace sim`` the Python it starts is simulated too, with its own report section.
"""

import subprocess
import sys

train = [sys.executable, "examples/train.py", "--epochs", "1"]
sys.exit(subprocess.run(train).returncode)
