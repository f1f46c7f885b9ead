//! The network packs, offline: `get_weather` and `github_issue` are pointed at
//! a loopback HTTP server this test starts, through the operator variables
//! `PACKS_WTTR_URL` and `PACKS_GITHUB_API`. The model chooses values, never
//! the host or the path prefix.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Output, Packs, Test, require};

/// One request the server received.
#[derive(Debug)]
struct Request {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// A loopback HTTP/1.1 server answering at most `replies.len()` requests, in order.
struct Server {
    url: String,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Vec<Request>>,
}

impl Server {
    fn start(replies: Vec<(u16, &'static str)>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut replies = replies.into_iter();
            while !stopping.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let Some((status, body)) = replies.next() else { break };
                        if let Some(request) = serve(stream, status, body) {
                            seen.push(request);
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(e) => panic!("accept: {e}"),
                }
            }
            seen
        });
        Self { url, stop, handle }
    }

    /// Stop accepting and return what was received.
    fn finish(self) -> Vec<Request> {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.join().expect("server thread")
    }
}

fn serve(stream: TcpStream, status: u16, body: &str) -> Option<Request> {
    stream.set_nonblocking(false).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let len = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body_in = vec![0; len];
    reader.read_exact(&mut body_in).ok()?;
    let reason = if status < 400 { "OK" } else { "Unprocessable Entity" };
    let reply = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = stream;
    stream.write_all(reply.as_bytes()).ok()?;
    Some(Request { method, target, headers, body: body_in })
}

/// Percent-decode a URL component (`+` is a space, as in a query).
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match (bytes[i], hex) {
            (b'+', _) => out.push(b' '),
            (b'%', Some(b)) => {
                out.push(b);
                i += 2;
            }
            (b, _) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A run of a network pack with a neutral curl configuration.
fn net(packs: Packs) -> Test {
    let test = Test::new();
    // curl reads ~/.curlrc; give it a home without one.
    let home = test.path().to_owned();
    test.with_packs(packs).env("HOME", &home).env("CURL_HOME", &home).env("NO_PROXY", "*")
}

fn weather() -> Packs {
    Packs::new().bundled("get_weather.tool.json")
}

fn github() -> Packs {
    Packs::new().bundled("github_issue.tool.json")
}

#[test]
fn get_weather_rejects_locations_that_would_change_host_or_path() {
    let server = Server::start(Vec::new());
    for location in ["evil.com/x", "a?b", "a#b", "user@evil.com", "a%2Fb", "a&b=c", "a\\b", "../admin/x", ""] {
        net(weather())
            .env("PACKS_WTTR_URL", &server.url)
            .args(["run", "get_weather", "--arg"])
            .arg(format!("location={location}"))
            .run()
            .code(1)
            .stdout_eq("")
            .one_line_error()
            .stderr_contains("`location`");
    }
    assert!(server.finish().is_empty(), "a rejected call reached the network");
}

#[test]
fn get_weather_url_comes_from_the_operator() {
    let out = net(weather())
        .env("PACKS_WTTR_URL", "http://127.0.0.1:9")
        .args(["run", "get_weather", "--dry-run", "--json", "--arg", "location=Lisbon"])
        .run();
    out.success();
    let argv: Vec<String> = serde_json::from_value(out.json()["argv"].clone()).unwrap();
    assert_eq!(argv[0], "curl");
    assert_eq!(argv[argv.len() - 2..], ["--", "http://127.0.0.1:9/Lisbon"]);

    let out = net(weather()).args(["run", "get_weather", "--dry-run", "--json", "--arg", "location=Lisbon"]).run();
    out.success();
    assert_eq!(out.json()["argv"].as_array().unwrap().last().unwrap(), "https://wttr.in/Lisbon");
}

/// Check the query curl sent for the bundled weather request.
fn assert_weather_query(req: &Request, path: &str, unit: &str) {
    assert_eq!(req.method, "GET");
    let (p, query) = req.target.split_once('?').unwrap_or((&req.target, ""));
    assert_eq!(decode(p), path, "{req:?}");
    let params: Vec<String> = query.split('&').map(decode).collect();
    assert_eq!(params, ["format=%l: %C, %t, wind %w", unit], "{req:?}");
}

#[test]
fn get_weather_asks_the_configured_server() {
    require("curl");
    let server = Server::start(vec![(200, "Lisbon: Sunny, +21°C, wind ↗10km/h"), (200, "Lisbon: Sunny, +70°F")]);
    net(weather())
        .env("PACKS_WTTR_URL", &server.url)
        .args(["run", "get_weather", "--arg", "location=Lisbon"])
        .run()
        .success()
        .stdout_eq("Lisbon: Sunny, +21°C, wind ↗10km/h\n");
    net(weather())
        .env("PACKS_WTTR_URL", &server.url)
        .args(["run", "get_weather", "--arg", "location=Lisbon", "--arg", "unit=imperial"])
        .run()
        .success();
    let seen = server.finish();
    assert_eq!(seen.len(), 2);
    assert_weather_query(&seen[0], "/Lisbon", "m");
    assert_weather_query(&seen[1], "/Lisbon", "u");
}

#[test]
fn get_weather_encodes_the_location() {
    require("curl");
    let server = Server::start(vec![(200, "ok"), (200, "ok")]);
    for location in ["New York", "São Paulo"] {
        net(weather())
            .env("PACKS_WTTR_URL", &server.url)
            .args(["run", "get_weather", "--arg"])
            .arg(format!("location={location}"))
            .run()
            .success();
    }
    let seen = server.finish();
    assert_eq!(seen.len(), 2);
    assert_weather_query(&seen[0], "/New York", "m");
    assert_weather_query(&seen[1], "/São Paulo", "m");
}

#[test]
fn get_weather_cannot_leave_the_base_path() {
    require("curl");
    let server = Server::start(vec![(200, "ok")]);
    let out = net(weather())
        .env("PACKS_WTTR_URL", format!("{}/api/v1", server.url))
        .args(["run", "get_weather", "--arg", "location=.."])
        .run();
    let seen = server.finish();
    // Either validation refuses the call, or the request stays below /api/v1/.
    if out.status.code() != Some(1) {
        assert_eq!(seen.len(), 1, "exit {:?}, stderr {}", out.status.code(), out.stderr);
        assert!(seen[0].target.starts_with("/api/v1/"), "{:?}", seen[0]);
    }
}

const TITLE: &str = "Login fails: \"quotes\", 'single', back\\slash\nsecond line\t{{title}} $(id) ✓";
const BODY: &str = "Steps:\n1. `curl` it\n2. see {\"json\": true}\n";

/// Run `github_issue` (approved: it asks to be confirmed before each run).
fn github_issue(server: &Server, token: Option<&str>, repo: &str, extra: &[&str]) -> Output {
    let mut test = net(github()).env("PACKS_GITHUB_API", &server.url);
    test = match token {
        Some(t) => test.env("GITHUB_TOKEN", t),
        None => test.env_remove("GITHUB_TOKEN"),
    };
    test.args(["run", "github_issue", "--yes"])
        .arg(json!({"repo": repo, "title": TITLE, "body": BODY}).to_string())
        .args(extra.iter().copied())
        .run()
}

#[test]
fn github_issue_posts_to_the_configured_api() {
    require("curl");
    let server = Server::start(vec![(201, r#"{"html_url":"http://x/1","number":1}"#)]);
    github_issue(&server, Some("t0ken"), "acme/widgets", &[])
        .success()
        .stdout_eq("Created issue: http://x/1\n")
        .stderr_eq("");
    let seen = server.finish();
    assert_eq!(seen.len(), 1);
    let req = &seen[0];
    assert_eq!(req.method, "POST");
    assert_eq!(req.target, "/repos/acme/widgets/issues");
    assert_eq!(req.header("Authorization"), Some("Bearer t0ken"));
    assert_eq!(req.header("Content-Type"), Some("application/json"));
    assert_eq!(req.header("Accept"), Some("application/vnd.github+json"));
    let body: Value = serde_json::from_slice(&req.body).expect("the body is JSON");
    assert_eq!(body, json!({"title": TITLE, "body": BODY}));
}

#[test]
fn github_issue_body_defaults_to_empty() {
    require("curl");
    let server = Server::start(vec![(201, r#"{"html_url":"http://x/2"}"#)]);
    net(github())
        .env("PACKS_GITHUB_API", &server.url)
        .env("GITHUB_TOKEN", "t0ken")
        .args(["run", "github_issue", "--yes", "--arg", "repo=acme/widgets", "--arg", "title=Short"])
        .run()
        .success()
        .stdout_eq("Created issue: http://x/2\n");
    let seen = server.finish();
    assert_eq!(serde_json::from_slice::<Value>(&seen[0].body).unwrap(), json!({"title": "Short", "body": ""}));
}

#[test]
fn github_issue_masks_the_token() {
    let server = Server::start(Vec::new());
    let out = github_issue(&server, Some("t0ken-s3cret"), "acme/widgets", &["--dry-run"]);
    out.success().stdout_contains("'Authorization: Bearer ***'").stdout_lacks("t0ken-s3cret");
    let out = github_issue(&server, Some("t0ken-s3cret"), "acme/widgets", &["--dry-run", "--json"]);
    out.success().stdout_lacks("t0ken-s3cret");
    assert!(out.json()["argv"].as_array().unwrap().contains(&json!("Authorization: Bearer ***")));
    assert!(server.finish().is_empty(), "--dry-run reached the network");
}

#[test]
fn github_issue_masks_the_token_in_results() {
    require("curl");
    let server = Server::start(vec![(201, r#"{"html_url":"http://x/t0ken-s3cret"}"#)]);
    let out = github_issue(&server, Some("t0ken-s3cret"), "acme/widgets", &["--json"]);
    out.success().stdout_lacks("t0ken-s3cret");
    assert_eq!(out.json()["output"], "Created issue: http://x/***");
    server.finish();
}

#[test]
fn github_issue_is_not_run_without_approval() {
    let server = Server::start(vec![(201, r#"{"html_url":"http://x/1"}"#)]);
    let out = net(github())
        .env("PACKS_GITHUB_API", &server.url)
        .env("GITHUB_TOKEN", "t0ken")
        .args(["run", "github_issue", "--arg", "repo=acme/widgets", "--arg", "title=T"])
        .run();
    out.code(3).stdout_eq("").stderr_contains("error: permission denied for `github_issue`").stderr_lacks("t0ken");
    assert!(server.finish().is_empty(), "an unapproved call reached the network");
}

#[test]
fn github_issue_without_a_token_is_refused() {
    let server = Server::start(Vec::new());
    github_issue(&server, None, "acme/widgets", &[])
        .code(1)
        .stdout_eq("")
        .one_line_error()
        .stderr_contains("GITHUB_TOKEN");
    github_issue(&server, None, "acme/widgets", &["--dry-run"]).code(1).stderr_contains("GITHUB_TOKEN");
    assert!(server.finish().is_empty());
}

#[test]
fn github_issue_api_errors_fail_the_call() {
    require("curl");
    let server = Server::start(vec![(422, r#"{"message":"Validation Failed"}"#)]);
    let out = github_issue(&server, Some("t0ken"), "acme/widgets", &["--json"]);
    out.code(2);
    let r = out.json();
    assert_eq!(r["ok"], false);
    assert_eq!(r["exit_code"], 22, "curl --fail-with-body exits 22 on HTTP errors");
    assert_eq!(r["output"], r#"{"message":"Validation Failed"}"#);
    server.finish();
}

#[test]
fn github_issue_rejects_repos_that_are_not_owner_slash_name() {
    let server = Server::start(Vec::new());
    for repo in
        ["acme", "acme/widgets/x", "http://evil.com/a", "acme/wid gets", "acme/widgets?x=1", "a/b#c", "@evil.com/x"]
    {
        github_issue(&server, Some("t0ken"), repo, &[]).code(1).one_line_error().stderr_contains("`repo`");
    }
    assert!(server.finish().is_empty());
}

#[test]
fn github_issue_cannot_leave_repos() {
    require("curl");
    let server = Server::start(vec![(201, r#"{"html_url":"http://x/1"}"#)]);
    let out = github_issue(&server, Some("t0ken"), "../user", &[]);
    let seen = server.finish();
    // Either validation refuses the call, or the request stays below /repos/.
    if out.status.code() != Some(1) {
        assert_eq!(seen.len(), 1);
        assert!(seen[0].target.starts_with("/repos/"), "the request went to {}", seen[0].target);
    }
}
