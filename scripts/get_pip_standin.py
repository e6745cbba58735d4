"""Stand-in for pip's get-pip.py, for ansible-test on machines that reach PyPI but not
ci-files.testing.ansible.com (where ansible-test downloads get-pip from).

ansible-test runs this in a fresh virtualenv without pip, with pip-install arguments
(for example ``pip==24.2 --no-setuptools --no-wheel``), and with PIP_CONFIG_FILE=/dev/null.
We install the pip bundled with Python (ensurepip, offline) and let it install what was
asked for, trusting the system's CA bundle (the pip config that names it is switched off).
"""

import ensurepip
import os
import ssl
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
cafile = ssl.get_default_verify_paths().openssl_cafile
if cafile and os.path.exists(cafile):
    args = ["--cert", cafile] + args
ensurepip.bootstrap(upgrade=True)
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install"] + args))
