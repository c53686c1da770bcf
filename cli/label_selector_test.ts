import assert from "node:assert/strict";
import { parseLabelSelector } from "./label_selector.ts";

Deno.test("label selector: equality, inequality, sets and existence, all required", () => {
  const labels = { app: "web", tier: "frontend", "example.com/team": "core" };
  const yes = [
    "app=web",
    "app==web",
    "tier!=backend",
    "missing!=x",
    "app",
    "!canary",
    "tier in (frontend, edge)",
    "tier notin (backend)",
    "app=web,example.com/team=core",
    "example.com/team in (core),!canary",
  ];
  const no = ["app=api", "tier!=frontend", "canary", "!app", "tier in (backend)", "app=web,canary"];
  for (const s of yes) assert.equal(parseLabelSelector(s)(labels), true, s);
  for (const s of no) assert.equal(parseLabelSelector(s)(labels), false, s);
});

Deno.test("label selector: malformed selectors are usage errors that echo the text", () => {
  for (const s of ["", "=x", "app=(", "a b", "tier in backend", "app=web,"]) {
    assert.throws(
      () => parseLabelSelector(s),
      (e: Error) => e.message === `-l: invalid label selector ${JSON.stringify(s)}`,
      s,
    );
  }
});
