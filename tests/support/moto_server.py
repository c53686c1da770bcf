"""moto's server, with the public SSM parameters of the Debian AMIs seeded.

moto ships AWS's public parameter trees (Amazon Linux AMIs, regions, services) and loads
them lazily the first time a name under them is read. AWS also serves the parameters
Debian publishes (/aws/service/debian/release/12/latest/<arch>), which moto lacks; this
launcher loads them the same way from the JSON file named by
PODMIN_MOTO_PUBLIC_PARAMETERS ({"region": {"name": "value"}}). Writing under /aws/ stays
refused, as in AWS.

Usage: python3 moto_server.py -H 127.0.0.1 -p PORT
"""

import json
import os
import sys
from collections import defaultdict

from moto.core.utils import utcnow
from moto.ssm import models

SEEDS_FILE = os.environ.get("PODMIN_MOTO_PUBLIC_PARAMETERS")
SEEDS = json.load(open(SEEDS_FILE)) if SEEDS_FILE else {}
PREFIX = "/aws/service/debian/"
original = models.ParameterDict._check_loading_status


def check_loading_status(self, key):
    original(self, key)
    if str(key or "").startswith(PREFIX) and not getattr(self, "podmin_debian_loaded", False):
        self.podmin_debian_loaded = True
        for name, value in SEEDS.get(self.region_name, {}).items():
            defaultdict.__getitem__(self, name).append(
                models.Parameter(
                    account_id=self.account_id,
                    name=name,
                    value=value,
                    parameter_type="String",
                    description=None,
                    allowed_pattern=None,
                    keyid=None,
                    last_modified_date=utcnow(),
                    version=1,
                    data_type="aws:ec2:image",
                )
            )


models.ParameterDict._check_loading_status = check_loading_status

from moto.server import main  # noqa: E402  (after the patch)

main(sys.argv[1:])
