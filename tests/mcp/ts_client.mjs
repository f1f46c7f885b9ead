// `packs serve` driven by the official TypeScript MCP clients from npm, in both eras:
// @modelcontextprotocol/client 2.x probing `server/discover` (2026-07-28) and in legacy mode,
// and @modelcontextprotocol/sdk 1.x (the `initialize` handshake, 2025-11-25).
//
// Run by .ci/run from the directory the packages are installed in (NODE_PATH):
//   PACKS_BIN=target/debug/packs node tests/mcp/ts_client.mjs
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(join(process.env.NODE_PACKAGES ?? process.cwd(), 'noop.js'));
const load = async (name) => import(require.resolve(name));

const PACKS = process.env.PACKS_BIN ?? 'target/debug/packs';
const dir = mkdtempSync(join(tmpdir(), 'packs-ts-'));
const manifest = (name, body) =>
  writeFileSync(join(dir, `${name}.tool.json`), JSON.stringify({ name, description: `The ${name} tool`, ...body }));
manifest('echo_words', {
  parameters: { words: { type: 'string', required: true } },
  command: { program: 'echo', args: ['--', '{{words}}'] },
  policy: { read_only: true },
});
manifest('careful', { command: 'echo approved-and-ran', policy: { confirm_before_run: true } });

const params = { command: PACKS, args: ['--packs', dir, 'serve'], env: { PATH: process.env.PATH } };
let failed = 0;
let passed = 0;

async function check(name, fn) {
  try {
    await fn();
    passed += 1;
    console.log(`PASS ${name}`);
  } catch (e) {
    failed += 1;
    console.log(`FAIL ${name}\n${e?.stack ?? e}`);
  }
}

async function exercise(label, client, version) {
  await check(`${label}: negotiates ${version}`, async () => {
    assert.equal(client.getServerVersion().name, 'packs');
    // The 1.x SDK speaks only the handshake era and does not expose the version it agreed.
    if (typeof client.getNegotiatedProtocolVersion === 'function') {
      assert.equal(client.getNegotiatedProtocolVersion(), version);
    }
  });
  await check(`${label}: tools/list`, async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), ['careful', 'echo_words']);
  });
  await check(`${label}: tools/call`, async () => {
    const r = await client.callTool({ name: 'echo_words', arguments: { words: 'hi; $(id)' } });
    assert.equal(r.isError, false);
    assert.equal(r.content[0].text, '-- hi; $(id)\n');
  });
  await check(`${label}: validation error as isError`, async () => {
    const r = await client.callTool({ name: 'echo_words', arguments: { words: 5 } });
    assert.equal(r.isError, true);
    assert.equal(JSON.parse(r.content[0].text).error.kind, 'validation');
  });
  await check(`${label}: approval by elicitation`, async () => {
    const r = await client.callTool({ name: 'careful', arguments: {} });
    assert.equal(r.isError, false, JSON.stringify(r));
    assert.equal(r.content[0].text, 'approved-and-ran\n');
  });
}

// The 2.x client, both eras.
{
  const { Client } = await load('@modelcontextprotocol/client');
  const { StdioClientTransport } = await load('@modelcontextprotocol/client/stdio');
  for (const [mode, version] of [['auto', '2026-07-28'], ['legacy', '2025-11-25']]) {
    const client = new Client(
      { name: 'packs-ts-test', version: '1.0.0' },
      { capabilities: { elicitation: {} }, versionNegotiation: { mode } },
    );
    client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { approve: true } }));
    await client.connect(new StdioClientTransport(params));
    await exercise(`@modelcontextprotocol/client ${mode}`, client, version);
    await client.close();
  }
}

// The 1.x SDK: the handshake era.
{
  const { Client } = await load('@modelcontextprotocol/sdk/client/index.js');
  const { StdioClientTransport } = await load('@modelcontextprotocol/sdk/client/stdio.js');
  const { ElicitRequestSchema } = await load('@modelcontextprotocol/sdk/types.js');
  const client = new Client({ name: 'packs-ts-test', version: '1.0.0' }, { capabilities: { elicitation: {} } });
  client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { approve: true } }));
  await client.connect(new StdioClientTransport(params));
  await exercise('@modelcontextprotocol/sdk 1.x', client, '2025-11-25');
  await client.close();
}

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
