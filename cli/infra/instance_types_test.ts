import assert from "node:assert/strict";
import { ValidationError } from "../../core/kit/errors.ts";
import { architectureOf, checkInstanceType } from "./instance_types.ts";

Deno.test("architectureOf: Graviton families are arm64", () => {
  for (
    const t of [
      "c8g.large",
      "t4g.nano",
      "m7gd.xlarge",
      "c7gn.16xlarge",
      "r6gd.metal",
      "x2gd.medium",
      "g5g.2xlarge",
      "is4gen.large",
      "im4gn.large",
      "hpc7g.4xlarge",
      "a1.medium",
      "a1.metal",
      "r8g.metal-24xl",
      "c6g.large",
    ]
  ) {
    assert.equal(architectureOf(t), "arm64", t);
  }
});

Deno.test("architectureOf: everything else is amd64", () => {
  for (
    const t of [
      "t3.micro",
      "m7i.large",
      "c7i-flex.large",
      "c7a.medium",
      "g4dn.xlarge",
      "g4ad.xlarge",
      "g5.xlarge",
      "g6e.xlarge",
      "p5en.48xlarge",
      "inf2.xlarge",
      "trn1n.32xlarge",
      "dl1.24xlarge",
      "x2iezn.2xlarge",
      "m5zn.large",
      "z1d.large",
      "u7i-12tb.224xlarge",
      "u-6tb1.metal",
      "hpc6id.32xlarge",
      "i7ie.large",
      "d3en.xlarge",
      "t2.micro",
    ]
  ) {
    assert.equal(architectureOf(t), "amd64", t);
  }
});

Deno.test("malformed instance types are ValidationErrors", () => {
  for (
    const t of [
      "",
      "c8g",
      "c8g.",
      ".large",
      "C8G.large",
      "c8g large",
      "8g.large",
      "c.large",
      "c8g.large.x",
      "c8g.lar_ge",
      "mac2.metal",
      "mac2-m2pro.metal",
      "x".repeat(70) + "1.large",
    ]
  ) {
    assert.throws(() => architectureOf(t), ValidationError, JSON.stringify(t));
  }
  assert.throws(() => checkInstanceType(42), ValidationError);
  assert.equal(checkInstanceType("t4g.small"), "t4g.small");
});
