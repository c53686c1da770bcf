"""moto's server, with S3's conditional writes made atomic and the public SSM parameters of the
Debian AMIs seeded.

S3 evaluates If-Match / If-None-Match and writes the object atomically: of two concurrent
conditional writes on one version, one wins and the other gets 412. moto checks the condition
and then writes, without a lock, on a threaded server, so two racing writers can both succeed
(seen in tests/store/races_test.ts). This launcher serializes moto's S3 object writes (PUT,
the POST that completes a multipart upload, DELETE) so its conditional writes are atomic, as
S3's are.

moto ships AWS's public parameter trees (Amazon Linux AMIs, regions, services) and loads
them lazily the first time a name under them is read. AWS also serves the parameters
Debian publishes (/aws/service/debian/release/12/latest/<arch>), which moto lacks; this
launcher loads them the same way from the JSON file named by
PODMIN_MOTO_PUBLIC_PARAMETERS ({"region": {"name": "value"}}). Writing under /aws/ stays
refused, as in AWS.

With PODMIN_MOTO_TOFU_SHIMS=1 it also installs the shims of the moto faults that stop the real
AWS provider from applying Podmin's configuration (tests/support/moto_tofu_shims.py, each named
and explained there); without it moto answers as shipped.

Usage: python3 moto_server.py -H 127.0.0.1 -p PORT
"""

import functools
import json
import os
import sys
import threading
from collections import defaultdict

from moto.core.utils import utcnow
from moto.s3.responses import S3Response
from moto.ssm import models

S3_WRITES = threading.Lock()


def serialized(method):
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with S3_WRITES:
            return method(self, *args, **kwargs)

    return run


for name in ("put_object", "delete_object", "_key_response_post"):
    setattr(S3Response, name, serialized(getattr(S3Response, name)))

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

if os.environ.get("PODMIN_MOTO_TOFU_SHIMS") == "1":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import moto_tofu_shims  # noqa: E402

    moto_tofu_shims.apply()

from moto.server import main  # noqa: E402  (after the patch)

main(sys.argv[1:])
