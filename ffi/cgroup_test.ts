import assert from "node:assert/strict";
import { findCgroup2Mount } from "./cgroup.ts";

Deno.test("ffi cgroup: the cgroup2 mount of the hierarchy's root is found in mountinfo", () => {
  const hybrid = [
    "25 31 0:22 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755",
    "26 25 0:23 / /sys/fs/cgroup/cpu rw,relatime shared:10 - cgroup cgroup rw,cpu",
    "41 25 0:38 / /sys/fs/cgroup/unified rw,relatime shared:11 - cgroup2 cgroup2 rw",
  ].join("\n");
  assert.equal(findCgroup2Mount(hybrid), "/sys/fs/cgroup/unified");
  const v2 = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec - cgroup2 cgroup2 rw,nsdelegate";
  assert.equal(findCgroup2Mount(v2), "/sys/fs/cgroup");
  // A bind mount of a subgroup is not the root; a v1-only host has none.
  const sub = "50 23 0:26 /system.slice /mnt/sub rw - cgroup2 cgroup2 rw";
  assert.equal(findCgroup2Mount(sub), undefined);
  assert.equal(findCgroup2Mount(hybrid.split("\n").slice(0, 2).join("\n")), undefined);
  // Spaces in mount points are octal-escaped.
  assert.equal(findCgroup2Mount("51 23 0:26 / /mnt/a\\040b rw - cgroup2 none rw"), "/mnt/a b");
});
