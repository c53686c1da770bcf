import assert from "node:assert/strict";
import { UsageError } from "../../core/kit/errors.ts";
import { parseListenAddress } from "./mesh_server.ts";

Deno.test("mesh server: listen addresses are HOST:PORT or [IPv6]:PORT", () => {
  assert.deepEqual(parseListenAddress("[::]:7443"), { host: "::", port: 7443 });
  assert.deepEqual(parseListenAddress("127.0.0.1:0"), { host: "127.0.0.1", port: 0 });
  assert.deepEqual(parseListenAddress("[fd00::a]:1"), { host: "fd00::a", port: 1 });
  assert.deepEqual(parseListenAddress("localhost:7443"), { host: "localhost", port: 7443 });
  for (const bad of ["7443", "::7443", "[::]", "host:", "host:70000", "[::]:x", ""]) {
    assert.throws(() => parseListenAddress(bad), UsageError, bad);
  }
});
