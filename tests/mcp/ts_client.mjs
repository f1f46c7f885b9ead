// `packs serve` driven by the official TypeScript MCP clients from npm, in both eras and over
// both transports (stdio, and Streamable HTTP with a bearer token): @modelcontextprotocol/client
// 2.x probing `server/discover` (2026-07-28) and in legacy mode, and @modelcontextprotocol/sdk
// 1.x (the `initialize` handshake, 2025-11-25).
//
// Run by .ci/run from the directory the packages are installed in (NODE_PATH):
//   PACKS_BIN=target/debug/packs node tests/mcp/ts_client.mjs
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(join(process.env.NODE_PACKAGES ?? process.cwd(), 'noop.js'));
const load = async (name) => import(require.resolve(name));

const PACKS = process.env.PACKS_BIN ?? 'target/debug/packs';
const dir = mkdtempSync(join(tmpdir(), 'packs-ts-'));
// Every server's state directory (the approval key `packs serve` opens at start) is a scratch
// one, never the real user's; it goes with the rest of `dir` when the script exits.
const STATE = join(dir, 'state');
let http;
process.on('exit', () => {
  http?.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});
const manifest = (name, body) =>
  writeFileSync(join(dir, `${name}.tool.json`), JSON.stringify({ name, description: `The ${name} tool`, ...body }));
manifest('echo_words', {
  parameters: { words: { type: 'string', required: true } },
  command: { program: 'echo', args: ['--', '{{words}}'] },
  policy: { read_only: true },
});
manifest('careful', { command: 'echo approved-and-ran', policy: { confirm_before_run: true } });
manifest('slow', {
  parameters: { marker: { type: 'string', required: true } },
  command: { program: 'sleep', args: ['{{marker}}'] },
  policy: { timeout_secs: 60 },
});

const params = { command: PACKS, args: ['--packs', dir, 'serve'], env: { PATH: process.env.PATH, PACKS_STATE_DIR: STATE } };

// `packs serve --http` on a free loopback port, with a token file mapping TOKEN to an agent.
const TOKEN = 'ts-client-token-0123456789abcdef';
mkdirSync(join(dir, 'agents', 'ops'), { recursive: true });
writeFileSync(join(dir, 'agents', 'ops', 'agent.toml'), '');
writeFileSync(join(dir, 'tokens'), `${TOKEN} ops\n`);
http = spawn(PACKS, ['--packs', dir, 'serve', '--http', '127.0.0.1:0', '--token-file', join(dir, 'tokens')], {
  env: {
    PATH: process.env.PATH,
    PACKS_AGENTS: join(dir, 'agents'),
    XDG_CONFIG_HOME: join(dir, 'no-config'),
    PACKS_STATE_DIR: STATE,
  },
  stdio: ['ignore', 'ignore', 'pipe'],
});
const url = await new Promise((resolve, reject) => {
  let seen = '';
  http.stderr.on('data', (chunk) => {
    seen += chunk;
    const m = seen.match(/listening on (http:\/\/\S+)/);
    if (m) resolve(m[1]);
  });
  http.on('exit', (code) => reject(new Error(`packs serve --http exited ${code}: ${seen}`)));
});
const headers = { Authorization: `Bearer ${TOKEN}` };
let marker = 0;
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
    assert.deepEqual(tools.map((t) => t.name).sort(), ['careful', 'echo_words', 'slow']);
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
  await check(`${label}: cancellation kills the tool`, async () => {
    marker += 1;
    const seconds = `43.${process.pid}${marker}`;
    const abort = new AbortController();
    const call = client.callTool({ name: 'slow', arguments: { marker: seconds } }, undefined, { signal: abort.signal });
    await new Promise((r) => setTimeout(r, 700));
    assert.equal(running(seconds), true, 'the tool did not start');
    abort.abort();
    await call.catch(() => {});
    const deadline = Date.now() + 5000;
    while (running(seconds) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.equal(running(seconds), false, `sleep ${seconds} still runs after the call was cancelled`);
  });
}

function running(marker) {
  return spawnSync('pgrep', ['-f', `sleep ${marker}`]).status === 0;
}

// The 2.x client, both eras, both transports.
{
  const { Client, StreamableHTTPClientTransport } = await load('@modelcontextprotocol/client');
  const { StdioClientTransport } = await load('@modelcontextprotocol/client/stdio');
  const transports = {
    stdio: () => new StdioClientTransport(params),
    http: () => new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }),
  };
  for (const [name, transport] of Object.entries(transports)) {
    for (const [mode, version] of [['auto', '2026-07-28'], ['legacy', '2025-11-25']]) {
      const client = new Client(
        { name: 'packs-ts-test', version: '1.0.0' },
        { capabilities: { elicitation: {} }, versionNegotiation: { mode } },
      );
      client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { approve: true } }));
      await client.connect(transport());
      await exercise(`@modelcontextprotocol/client ${mode} ${name}`, client, version);
      await client.close();
    }
  }
}

// The 1.x SDK: the handshake era, both transports.
{
  const { Client } = await load('@modelcontextprotocol/sdk/client/index.js');
  const { StdioClientTransport } = await load('@modelcontextprotocol/sdk/client/stdio.js');
  const { StreamableHTTPClientTransport } = await load('@modelcontextprotocol/sdk/client/streamableHttp.js');
  const { ElicitRequestSchema } = await load('@modelcontextprotocol/sdk/types.js');
  const transports = {
    stdio: () => new StdioClientTransport(params),
    http: () => new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }),
  };
  for (const [name, transport] of Object.entries(transports)) {
    const client = new Client({ name: 'packs-ts-test', version: '1.0.0' }, { capabilities: { elicitation: {} } });
    client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { approve: true } }));
    await client.connect(transport());
    await exercise(`@modelcontextprotocol/sdk 1.x ${name}`, client, '2025-11-25');
    await client.close();
  }
}

http.kill('SIGTERM');

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
