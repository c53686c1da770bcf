"""Runs a command in a real pseudo-terminal and plays a conversation with it.

argv[1] is JSON: {"argv": [...], "env": {...}, "steps": [{"expect": TEXT, "send": TEXT}, ...]}.
Each step waits until the terminal output so far contains TEXT, then types SEND. The whole
transcript (bytes as the terminal received them) goes to stdout as JSON with the exit code.
"""

import json
import os
import pty
import select
import sys

spec = json.loads(sys.argv[1])
pid, fd = pty.fork()
if pid == 0:
    os.execvpe(spec["argv"][0], spec["argv"], {**os.environ, **spec.get("env", {})})

transcript = b""
timed_out = False
steps = list(spec.get("steps", []))
while True:
    if steps and steps[0]["expect"].encode() in transcript:
        os.write(fd, steps.pop(0)["send"].encode())
        continue
    ready, _, _ = select.select([fd], [], [], 120)
    if not ready:
        timed_out = True  # the command went silent for two minutes: report what was seen
        os.kill(pid, 9)
        break
    try:
        chunk = os.read(fd, 65536)
    except OSError:
        break  # EIO: the child closed the terminal
    if not chunk:
        break
    transcript += chunk
_, status = os.waitpid(pid, 0)
print(json.dumps({
    "code": os.waitstatus_to_exitcode(status),
    "transcript": transcript.decode("utf-8", "replace"),
    "unplayed": [s["expect"] for s in steps],
    "timedOut": timed_out,
}))
