import assert from "node:assert/strict";
import { parseChecksumFile, VendorChecksumError } from "./vendor_checksum.ts";

const hex = "0123456789abcdef".repeat(4);
const at = {
  checksumUrl: "https://m/crictl-v1.35.0-linux-amd64.tar.gz.sha256",
  artifactUrl: "https://m/crictl-v1.35.0-linux-amd64.tar.gz",
  label: "crictl 1.35.0 amd64",
};

Deno.test("vendor checksum: bare digest and sha256sum lines are both accepted", () => {
  const file = "crictl-v1.35.0-linux-amd64.tar.gz";
  for (
    const text of [
      hex,
      `${hex}\n`,
      `${hex.toUpperCase()}\r\n`,
      `${hex}  ${file}\n`,
      `${hex} *${file}\n`,
      `${hex}  ./${file}`,
      `${"f".repeat(64)}  crictl-v1.35.0-linux-arm64.tar.gz\n${hex}  ${file}\n`,
    ]
  ) {
    assert.equal(parseChecksumFile({ ...at, text }), hex, JSON.stringify(text));
  }
});

Deno.test("vendor checksum: malformed files fail naming the URL, the content and the expected form", () => {
  const cases: [string, RegExp][] = [
    ["", /it is empty/],
    ["<html>Not Found</html>", /line "<html>Not Found<\/html>" is not "HEX" or "HEX {2}FILENAME"/],
    [hex.slice(0, 63), /is not "HEX"/],
    [`${hex}  other-file.tar.gz`, /no line names crictl-v1\.35\.0-linux-amd64\.tar\.gz/],
    [`${hex}\n${hex}`, /a bare digest among several lines/],
  ];
  for (const [text, re] of cases) {
    assert.throws(
      () => parseChecksumFile({ ...at, text }),
      (e: Error) => {
        assert.ok(e instanceof VendorChecksumError, String(e));
        assert.match(e.message, re);
        assert.ok(e.message.includes(`the published checksum ${at.checksumUrl} is malformed`));
        assert.ok(e.message.includes(`it holds ${JSON.stringify(text)}`), e.message);
        assert.ok(e.message.includes("expected 64 hex digits"), e.message);
        assert.ok(e.hint?.includes("--dependency-catalog"));
        return true;
      },
      JSON.stringify(text),
    );
  }
});
