"""`packs serve --http`: the Streamable HTTP transport, driven by the official Python SDK's
client in both eras (2026-07-28 stateless, and 2025-11-25 after `initialize`), with bearer
tokens mapped to agents, plus what a client should never get through (raw httpx2 requests).

Run by .ci/run with mcp 2.3.0: PACKS_BIN=target/debug/packs python tests/mcp/test_http.py
"""

import json
import os
import http.server
import signal
import socket
import ssl
import subprocess
import threading
import time
from pathlib import Path

import anyio
import httpx2
import jwt
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from harness import check, finish, free_port, manifest, scratch

PACKS = os.environ.get("PACKS_BIN", "target/debug/packs")
OPS = "ops-token-0123456789abcdef"
SECRET = "s3cr3t-http-value"
READER = "reader-token-0123456789abcdef"
METRICS = "metrics-token-0123456789abcdef"


def start(packs_dir, root, port, *extra):
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "PACKS_AGENTS": str(Path(root, "agents")),
           "XDG_CONFIG_HOME": str(Path(root, "no-config")), "PACKS_HTTP_KEY": SECRET,
           "PACKS_LOG": str(Path(root, f"audit-{port}.jsonl")), "PACKS_STATE_DIR": str(Path(root, "state"))}
    proc = subprocess.Popen([PACKS, "--packs", packs_dir, "serve", "--http", f"127.0.0.1:{port}", *extra],
                            env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"packs serve --http did not listen: {proc.stderr.read()}")


def transport(url, token):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))


def running(marker):
    return subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0


async def gone(marker, within=5.0):
    deadline = time.time() + within
    while time.time() < deadline:
        if not running(marker):
            return True
        await anyio.sleep(0.05)
    return False


async def main():
    root = scratch("packs-http-")
    d = Path(root, "packs")
    d.mkdir()
    for agent, toml in [("ops", ""), ("reader", 'deny = ["careful"]\n')]:
        Path(root, "agents", agent).mkdir(parents=True)
        Path(root, "agents", agent, "agent.toml").write_text(toml)
    tokens = Path(root, "tokens")
    tokens.write_text(f"# clients\n{OPS} ops\n{READER} reader\n")
    metrics_tokens = Path(root, "metrics-tokens")
    metrics_tokens.write_text(f"# Prometheus\n{METRICS}\n")
    manifest(d, "echo_words", parameters={"words": {"type": "string", "required": True}},
             command={"program": "echo", "args": ["--", "{{words}}"]}, policy={"read_only": True})
    manifest(d, "careful", command="echo approved-and-ran", policy={"confirm_before_run": True})
    manifest(d, "leak", command={"program": "sh", "args": ["-c", 'echo "out $1"', "sh", "{{secret.PACKS_HTTP_KEY}}"]})
    manifest(d, "slow", parameters={"marker": {"type": "string", "required": True}},
             command={"program": "sleep", "args": ["{{marker}}"]}, policy={"timeout_secs": 60})
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    server = start(str(d), root, port, "--token-file", str(tokens), "--metrics-token-file", str(metrics_tokens))
    answers = []
    asked = []

    async def on_elicit(context, params):
        asked.append(params.message)
        approve = answers.pop(0) if answers else True
        return types.ElicitResult(action="accept", content={"approve": approve})

    try:
        for mode, version in [("auto", "2026-07-28"), ("legacy", "2025-11-25")]:
            async with Client(transport(url, OPS), mode=mode, elicitation_callback=on_elicit) as c:

                async def negotiates():
                    assert c.protocol_version == version, c.protocol_version

                async def lists_tools():
                    names = {t.name for t in (await c.list_tools()).tools}
                    assert names == {"echo_words", "careful", "slow", "leak"}, names

                async def calls_a_tool():
                    r = await c.call_tool("echo_words", {"words": "hi; $(id)"})
                    assert not r.is_error and r.content[0].text == "-- hi; $(id)\n", r

                async def validation_error_is_an_error_result():
                    r = await c.call_tool("echo_words", {"words": 5})
                    assert r.is_error, r
                    assert json.loads(r.content[0].text)["error"]["kind"] == "validation"

                async def approval_by_elicitation():
                    before = len(asked)
                    r = await c.call_tool("careful", {})
                    assert len(asked) == before + 1, "the server did not ask"
                    assert "echo approved-and-ran" in asked[-1], asked[-1]
                    assert not r.is_error and r.content[0].text == "approved-and-ran\n", r
                    answers.append(False)
                    r = await c.call_tool("careful", {})
                    assert r.is_error and json.loads(r.content[0].text)["error"]["kind"] == "permission_denied", r

                async def secrets_are_masked():
                    seen = []

                    async def progress(p, total, message):
                        seen.append(message or "")

                    r = await c.call_tool("leak", {}, progress_callback=progress)
                    assert r.content[0].text == "out ***\n", r
                    assert SECRET not in json.dumps(r.model_dump()) and not any(SECRET in m for m in seen), seen
                    log = Path(root, f"audit-{port}.jsonl").read_text()
                    assert '"tool":"leak"' in log and SECRET not in log, log[-500:]

                async def cancellation_kills_the_tool():
                    marker = f"41.{port}{len(mode)}"
                    with anyio.move_on_after(1.0):
                        await c.call_tool("slow", {"marker": marker})
                    assert await gone(marker), f"`sleep {marker}` still runs after the call was cancelled"
                    # The connection goes on.
                    r = await c.call_tool("echo_words", {"words": "after"})
                    assert r.content[0].text == "-- after\n", r

                for name, fn in [("negotiates", negotiates), ("tools/list", lists_tools), ("tools/call", calls_a_tool),
                                 ("validation error as isError", validation_error_is_an_error_result),
                                 ("approval by elicitation", approval_by_elicitation),
                                 ("secrets masked in the result, progress and audit log", secrets_are_masked),
                                 ("cancellation kills the process group", cancellation_kills_the_tool)]:
                    await check(f"{version}: {name}", fn)

            # The reader agent may not run `careful`: not offered, and denied when called anyway.
            async with Client(transport(url, READER), mode=mode, elicitation_callback=on_elicit) as c:

                async def agent_rules_apply():
                    names = {t.name for t in (await c.list_tools()).tools}
                    assert "careful" not in names, names
                    r = await c.call_tool("careful", {})
                    assert r.is_error, r
                    err = json.loads(r.content[0].text)["error"]
                    assert err["kind"] == "permission_denied" and "reader" in err["message"], err

                await check(f"{version}: a token's agent decides (deny)", agent_rules_apply)

        async with httpx2.AsyncClient() as h:
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
            json_headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

            async def no_token_401():
                r = await h.post(url, json=init, headers=json_headers)
                assert r.status_code == 401, r
                assert r.headers["www-authenticate"].startswith("Bearer"), r.headers
                r = await h.post(url, json=init, headers={**json_headers, "Authorization": "Bearer wrong-token-0123456789"})
                assert r.status_code == 401 and "invalid_token" in r.headers["www-authenticate"], r.headers

            async def bad_origin_or_host_403():
                auth = {**json_headers, "Authorization": f"Bearer {OPS}"}
                r = await h.post(url, json=init, headers={**auth, "Origin": "https://evil.example"})
                assert r.status_code == 403, r
                r = await h.post(url, json=init, headers={**auth, "Host": f"evil.example:{port}"})
                assert r.status_code == 403, r
                r = await h.post(url, json=init, headers={**auth, "Host": f"localhost:{port}"})
                assert r.status_code == 200, r

            async def a_forged_session_is_refused():
                auth = {**json_headers, "Authorization": f"Bearer {OPS}"}
                r = await h.post(url, json=init, headers=auth)
                session = r.headers["mcp-session-id"]
                ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
                r = await h.post(url, json=ping, headers={**auth, "Mcp-Session-Id": session})
                assert r.status_code == 200, r
                r = await h.post(url, json=ping, headers={**auth, "Mcp-Session-Id": session[:-2] + "xx"})
                assert r.status_code == 404, r
                # Another client cannot use it.
                r = await h.post(url, json=ping, headers={**json_headers, "Authorization": f"Bearer {READER}", "Mcp-Session-Id": session})
                assert r.status_code == 404, r

            async def metrics_parse():
                r = await h.get(f"http://127.0.0.1:{port}/metrics")
                assert r.status_code == 401, r
                # A client's token does not open them: they count every agent's calls.
                r = await h.get(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {OPS}"})
                assert r.status_code == 403, r
                r = await h.get(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {METRICS}"})
                assert r.status_code == 200, r
                families = {f.name: f for f in text_string_to_metric_families(r.text)}
                calls = {(s.labels["tool"], s.labels["outcome"]): s.value for s in families["packs_calls"].samples}
                assert calls[("echo_words", "ok")] >= 4, calls
                assert calls[("slow", "cancelled")] >= 1, calls
                assert families["packs_denials"].samples, families["packs_denials"]
                assert "packs_call_duration_seconds" in families and "packs_calls_in_flight" in families
                r = await h.get(f"http://127.0.0.1:{port}/healthz")
                assert r.status_code == 200 and r.text == "ok\n", r

            for name, fn in [("no or wrong token: 401 with a challenge", no_token_401),
                             ("bad Origin or Host: 403", bad_origin_or_host_403),
                             ("a forged or borrowed session: 404", a_forged_session_is_refused),
                             ("/metrics takes its own token, parses (OpenMetrics); /healthz", metrics_parse)]:
                await check(name, fn)

        # SIGTERM: no new connections, the call in flight finishes, the server exits 0.
        async def graceful_shutdown():
            async with Client(transport(url, OPS)) as c:
                # Listed first: the client checks a result against the tool's schema, and
                # after SIGTERM nothing new is accepted.
                await c.list_tools()

                async def call():
                    return await c.call_tool("slow", {"marker": "1.5"})

                async with anyio.create_task_group() as tg:
                    result = {}

                    async def run():
                        result["r"] = await call()

                    tg.start_soon(run)
                    await anyio.sleep(0.5)
                    server.send_signal(signal.SIGTERM)
                assert not result["r"].is_error, result["r"]
            code = server.wait(timeout=15)
            assert code == 0, (code, server.stderr.read())

        await check("SIGTERM: the call in flight finishes, then exit 0", graceful_shutdown)

        # TLS (rustls): a CA and a server certificate made here, the CA trusted by the client;
        # plain HTTP on the TLS port gets nothing.
        ca, ca_key = Path(root, "ca.pem"), Path(root, "ca.key")
        cert, key, csr, ext = Path(root, "cert.pem"), Path(root, "key.pem"), Path(root, "cert.csr"), Path(root, "ext")
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        subprocess.run(["openssl", "req", "-x509", *ec, "-keyout", str(ca_key), "-out", str(ca), "-days", "1",
                        "-subj", "/CN=packs test CA"], check=True, capture_output=True)
        subprocess.run(["openssl", "req", *ec, "-keyout", str(key), "-out", str(csr), "-subj", "/CN=localhost"],
                       check=True, capture_output=True)
        ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
        subprocess.run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
                        "-out", str(cert), "-days", "1", "-extfile", str(ext)], check=True, capture_output=True)
        tls_port = free_port()
        server = start(str(d), root, tls_port, "--token-file", str(tokens), "--tls-cert", str(cert), "--tls-key", str(key))

        async def tls():
            ctx = ssl.create_default_context(cafile=str(ca))
            client = httpx2.AsyncClient(verify=ctx, headers={"Authorization": f"Bearer {OPS}"},
                                        timeout=httpx2.Timeout(30, read=300))
            async with Client(streamable_http_client(f"https://localhost:{tls_port}/mcp", http_client=client)) as c:
                r = await c.call_tool("echo_words", {"words": "over tls"})
                assert r.content[0].text == "-- over tls\n", r
            async with httpx2.AsyncClient() as plain:
                try:
                    r = await plain.get(f"http://127.0.0.1:{tls_port}/healthz")
                except httpx2.HTTPError:
                    pass
                else:
                    raise AssertionError(f"plain HTTP on the TLS port was answered: {r.status_code}")
            async with httpx2.AsyncClient(verify=ctx) as h:
                r = await h.get(f"https://127.0.0.1:{tls_port}/healthz")
                assert r.status_code == 200, r

        await check("TLS: --tls-cert/--tls-key", tls)
        server.terminate()
        server.wait(timeout=15)

        server = await oauth_checks(root, d, ca, cert, key)
    finally:
        if server.poll() is None:
            server.kill()


class Issuer:
    """A loopback OAuth authorization server (https, the test's certificate): RFC 8414
    metadata and a JWKS whose keys the test signs tokens with."""

    def __init__(self, cert, key):
        from cryptography.hazmat.primitives.asymmetric import ec, rsa

        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.keys = [("k1", "RS256", self.rsa), ("k2", "ES256", self.ec)]
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the stdlib's name
                if self.path == "/.well-known/oauth-authorization-server":
                    body = {"issuer": issuer.url, "jwks_uri": f"{issuer.url}/jwks", "token_endpoint": f"{issuer.url}/token"}
                elif self.path == "/jwks":
                    body = {"keys": [issuer.jwk(kid, alg, k) for kid, alg, k in issuer.keys]}
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(cert), str(key))
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://localhost:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @staticmethod
    def jwk(kid, alg, private):
        j = json.loads(jwt.algorithms.get_default_algorithms()[alg].to_jwk(private.public_key()))
        return {**j, "kid": kid, "alg": alg, "use": "sig"}

    def token(self, kid="k1", alg=None, key=None, **claims):
        found = {k: (a, p) for k, a, p in self.keys}
        alg = alg or found[kid][0]
        key = key if key is not None else found[kid][1]
        now = int(time.time())
        body = {"iss": self.url, "sub": "alice", "iat": now, "exp": now + 300, **claims}
        return jwt.encode({k: v for k, v in body.items() if v is not None}, key, algorithm=alg, headers={"kid": kid})


async def oauth_checks(root, d, ca, cert, key):
    """OAuth 2.1 resource-server mode: RFC 9728 metadata, JWTs verified against the JWKS."""
    issuer = Issuer(cert, key)
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    server = start(str(d), root, port, "--oauth-issuer", issuer.url, "--resource", resource,
                   "--oauth-ca", str(ca), "--oauth-agent", "reader")
    url = resource

    async def valid_jwt_calls_tools():
        token = issuer.token(aud=resource)
        async with Client(transport(url, token)) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert names == {"echo_words", "slow", "leak"}, f"the reader agent's rules apply: {names}"
            r = await c.call_tool("echo_words", {"words": "jwt"})
            assert r.content[0].text == "-- jwt\n", r
        # An EC key works too.
        async with Client(transport(url, issuer.token(kid="k2", aud=resource))) as c:
            r = await c.call_tool("echo_words", {"words": "ec"})
            assert r.content[0].text == "-- ec\n", r

    async def bad_jwts_get_401():
        from cryptography.hazmat.primitives.asymmetric import rsa

        stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        cases = {
            "expired": issuer.token(aud=resource, exp=int(time.time()) - 600),
            "wrong audience": issuer.token(aud="https://elsewhere.example/mcp"),
            "no audience": issuer.token(),
            "wrong issuer": issuer.token(aud=resource, iss="https://evil.example"),
            "not yet valid": issuer.token(aud=resource, nbf=int(time.time()) + 600),
            "signed by another key": issuer.token(aud=resource, key=stranger),
            "HS256 with the public key as secret": jwt.encode(
                {"iss": issuer.url, "aud": resource, "sub": "x", "exp": int(time.time()) + 60},
                "secret-of-thirty-two-bytes-long!", algorithm="HS256", headers={"kid": "k1"}),
            "not a JWT": "definitely-not-a-jwt-0123456789",
        }
        unsigned = jwt.encode({"iss": issuer.url, "aud": resource, "sub": "x", "exp": int(time.time()) + 60}, None, algorithm="none")
        cases["alg none"] = unsigned
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        async with httpx2.AsyncClient() as h:
            for why, token in cases.items():
                r = await h.post(url, json=init, headers={"Content-Type": "application/json", "Accept": "application/json",
                                                          "Authorization": f"Bearer {token}"})
                assert r.status_code == 401, (why, r.status_code, r.text)
                challenge = r.headers["www-authenticate"]
                assert 'error="invalid_token"' in challenge and "resource_metadata=" in challenge, (why, challenge)
            r = await h.post(url, json=init, headers={"Content-Type": "application/json"})
            assert r.status_code == 401
            metadata_url = r.headers["www-authenticate"].split('resource_metadata="')[1].split('"')[0]
            assert metadata_url == f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp", metadata_url
            m = (await h.get(metadata_url)).json()
            assert m["resource"] == resource and m["authorization_servers"] == [issuer.url], m

    async def a_rotated_key_is_fetched():
        from cryptography.hazmat.primitives.asymmetric import ec

        issuer.keys.append(("k3", "ES256", ec.generate_private_key(ec.SECP256R1())))
        async with Client(transport(url, issuer.token(kid="k3", aud=resource))) as c:
            r = await c.call_tool("echo_words", {"words": "rotated"})
            assert r.content[0].text == "-- rotated\n", r

    for name, fn in [("OAuth: a valid JWT (RS256, ES256) calls tools as --oauth-agent", valid_jwt_calls_tools),
                     ("OAuth: expired, wrong audience/issuer, foreign key, HS256, alg none: 401 + RFC 9728 metadata", bad_jwts_get_401),
                     ("OAuth: a rotated key is fetched from the JWKS", a_rotated_key_is_fetched)]:
        await check(name, fn)
    issuer.httpd.shutdown()
    return server


anyio.run(main)
finish()
