/**
 * Bucket URLs as an operator types them: a filesystem bucket that does not exist fails like S3
 * (not an empty cluster), `create-bucket` is the one way to make it, and a URL without a scheme
 * is refused with the two accepted forms.
 */

import assert from "node:assert/strict";
import { podmin } from "../support/programs.ts";

Deno.test("a missing filesystem bucket fails like S3; create-bucket makes it; bare names are refused", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-bucket-url-" });
  try {
    const bucket = `file://${tmp}/bucket`;
    const get = await podmin(["--bucket", bucket, "get", "deployments"]);
    assert.notEqual(get.code, 0, get.stdout);
    assert.match(get.stderr, new RegExp(`bucket ${bucket} does not exist`));
    assert.match(get.stderr, /create-bucket/);

    await Deno.writeTextFile(
      `${tmp}/web.yaml`,
      "apiVersion: podmin.dev/v1\nkind: Deployment\nmetadata: {name: web}\n" +
        "spec: {nodeGroup: default, template: {spec: {containers: [{name: web, image: x}]}}}\n",
    );
    const apply = await podmin(["--bucket", bucket, "apply", "-f", `${tmp}/web.yaml`]);
    assert.notEqual(apply.code, 0, apply.stdout);
    assert.match(apply.stderr, /does not exist/);
    await assert.rejects(Deno.stat(`${tmp}/bucket`), Deno.errors.NotFound); // nothing created

    const create = await podmin(["--bucket", bucket, "create-bucket"]);
    assert.equal(create.code, 0, create.stderr);
    assert.match(create.stdout, /created/);
    assert.match((await podmin(["--bucket", bucket, "create-bucket"])).stdout, /exists/);
    const empty = await podmin(["--bucket", bucket, "get", "deployments"]);
    assert.equal(empty.code, 0, empty.stderr);

    const bare = await podmin(["--bucket", "my-bucket", "get", "deployments"]);
    assert.equal(bare.code, 2, bare.stderr);
    assert.match(bare.stderr, /has no scheme/);
    assert.match(bare.stderr, /s3:\/\/my-bucket/);
    assert.match(bare.stderr, /file:\/\/\/absolute\/path/);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});
