//! OAuth 2.1 resource-server mode for `packs serve --http`: the protected-resource metadata
//! of RFC 9728 (which tells a client where to get a token), and verification of the JWT
//! access tokens the authorization server issues: signature against the issuer's JWKS
//! (RSA, EC or EdDSA keys only; the key is chosen by `kid`, the set fetched again, at most
//! once every ten seconds, when a token names a key not in it), `iss`, `aud` (this server's resource
//! URL, RFC 8707), `exp`, `nbf` and `sub`.

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::Uri;
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Value, json};

use super::auth::Client;

/// How long a fetch of metadata or keys may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest metadata or key set read.
const MAX_DOCUMENT: usize = 1 << 20;
/// The key set is fetched again for an unknown `kid` at most this often (a client sending
/// made-up key ids can delay a rotation's new key by this much, never cause a flood).
const REFETCH_EVERY: Duration = Duration::from_secs(10);
/// Clock skew allowed on `exp` and `nbf`.
const LEEWAY: u64 = 30;

/// How the resource server is configured.
#[derive(Debug, Clone)]
pub struct OAuthOptions {
    /// The authorization server's issuer identifier (`iss`).
    pub issuer: String,
    /// This MCP server's canonical URL, e.g. `https://tools.example.com/mcp` (the audience).
    pub resource: String,
    /// The expected `aud`, when it is not `resource`.
    pub audience: Option<String>,
    /// The key set's URL, when it is not discovered from the issuer's metadata.
    pub jwks_uri: Option<String>,
    /// Extra trusted CA certificates (PEM) for fetching from the issuer.
    pub ca: Option<std::path::PathBuf>,
}

/// A started resource server: what it checks, and the issuer's keys.
pub(crate) struct OAuth {
    options: OAuthOptions,
    jwks_uri: String,
    keys: RwLock<Arc<JwkSet>>,
    fetched: Mutex<Instant>,
    fetcher: Fetcher,
    /// The context a token's client runs with (its agent).
    client: Client,
}

/// Why a token is refused (said in the 401's `error_description`).
#[derive(Debug)]
pub(crate) struct Refused(pub(crate) String);

impl OAuth {
    /// Discover the issuer's key set (unless given) and fetch it; a server that cannot is
    /// not started (it could verify no token).
    pub(crate) async fn start(options: OAuthOptions, client: Client) -> Result<Self, String> {
        let fetcher = Fetcher::new(options.ca.as_deref())?;
        for url in [&options.issuer, &options.resource].into_iter().chain(options.jwks_uri.as_ref()) {
            check_url(url)?;
        }
        let jwks_uri = match &options.jwks_uri {
            Some(uri) => uri.clone(),
            None => discover(&fetcher, &options.issuer).await?,
        };
        check_url(&jwks_uri)?;
        let keys = fetch_keys(&fetcher, &jwks_uri).await?;
        Ok(OAuth {
            options,
            jwks_uri,
            keys: RwLock::new(Arc::new(keys)),
            // A token naming a key the set lacks may fetch it again at once (rotation), then every 10 s.
            fetched: Mutex::new(Instant::now().checked_sub(REFETCH_EVERY).unwrap_or_else(Instant::now)),
            fetcher,
            client,
        })
    }

    /// The RFC 9728 protected-resource metadata.
    pub(crate) fn metadata(&self) -> Value {
        json!({
            "resource": self.options.resource,
            "authorization_servers": [self.options.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "packs",
        })
    }

    /// Where the metadata is served: `/.well-known/oauth-protected-resource` then the
    /// resource URL's path (RFC 9728, section 3.1), as a path and as a whole URL.
    pub(crate) fn metadata_path(&self) -> String {
        let path =
            self.options.resource.parse::<Uri>().map(|u| u.path().trim_end_matches('/').to_owned()).unwrap_or_default();
        format!("/.well-known/oauth-protected-resource{path}")
    }

    /// The metadata's URL, for the `WWW-Authenticate` challenge.
    pub(crate) fn metadata_url(&self) -> String {
        match self.options.resource.parse::<Uri>() {
            Ok(uri) => format!(
                "{}://{}{}",
                uri.scheme_str().unwrap_or("https"),
                uri.authority().map_or("", |a| a.as_str()),
                self.metadata_path()
            ),
            Err(_) => self.metadata_path(),
        }
    }

    /// The client a JWT access token belongs to, or why it is refused.
    pub(crate) async fn verify(&self, token: &str) -> Result<Client, Refused> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| Refused(format!("not a JWT: {e}")))?;
        if matches!(header.alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512) {
            return Err(Refused("a token signed with a shared secret (HS*) is refused".into()));
        }
        let kid = header.kid.clone().unwrap_or_default();
        let mut keys =
            self.keys.read().map(|k| Arc::clone(&k)).map_err(|_| Refused("the key set is unavailable".into()))?;
        // Only a token that names a key may cause a fetch (and then at most every 10 s).
        if !kid.is_empty() && find(&keys, &kid).is_none() && self.may_refetch(Instant::now()) {
            // A new key (rotation): fetch the set again (rate-limited).
            match fetch_keys(&self.fetcher, &self.jwks_uri).await {
                Ok(fresh) => {
                    keys = Arc::new(fresh);
                    if let Ok(mut slot) = self.keys.write() {
                        *slot = Arc::clone(&keys);
                    }
                }
                Err(e) => eprintln!("packs serve: the issuer's keys could not be fetched again: {e}"),
            }
        }
        let jwk = find(&keys, &kid).ok_or_else(|| Refused(format!("no key `{kid}` in the issuer's key set")))?;
        if let Some(alg) = jwk.common.key_algorithm
            && alg.to_string() != format!("{:?}", header.alg)
        {
            return Err(Refused(format!("the token's alg {:?} is not its key's ({alg})", header.alg)));
        }
        let key =
            DecodingKey::from_jwk(jwk).map_err(|e| Refused(format!("the issuer's key `{kid}` is unusable: {e}")))?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.options.issuer]);
        validation.set_audience(&[self.options.audience.as_ref().unwrap_or(&self.options.resource)]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY;
        let data = jsonwebtoken::decode::<Value>(token, &key, &validation)
            .map_err(|e| Refused(format!("the token is not valid: {e}")))?;
        let sub = data.claims.get("sub").and_then(Value::as_str).unwrap_or_default();
        Ok(Client { principal: format!("jwt:{sub}"), context: Arc::clone(&self.client.context) })
    }

    /// Whether the key set may be fetched again `now` (then not for another `REFETCH_EVERY`).
    fn may_refetch(&self, now: Instant) -> bool {
        let mut last = self.fetched.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if now.saturating_duration_since(*last) < REFETCH_EVERY {
            return false;
        }
        *last = now;
        true
    }
}

/// The key named `kid` (or the only key, when the token names none), if it is a public key.
fn find<'k>(keys: &'k JwkSet, kid: &str) -> Option<&'k jsonwebtoken::jwk::Jwk> {
    let public = |k: &&jsonwebtoken::jwk::Jwk| !matches!(k.algorithm, AlgorithmParameters::OctetKey(_));
    if kid.is_empty() {
        let mut all = keys.keys.iter().filter(public);
        return match (all.next(), all.next()) {
            (Some(only), None) => Some(only),
            _ => None,
        };
    }
    keys.find(kid).filter(public)
}

/// https, or http to a loopback address (a test's or a sidecar's issuer).
fn check_url(url: &str) -> Result<(), String> {
    let uri: Uri = url.parse().map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    match uri.scheme_str() {
        Some("https") => Ok(()),
        Some("http") if uri.host().is_some_and(is_loopback_host) => Ok(()),
        _ => Err(format!("`{url}`: only https (or http to a loopback address) is taken")),
    }
}

fn is_loopback_host(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The issuer's `jwks_uri`, from its RFC 8414 metadata, else its OpenID configuration;
/// the metadata must name the same issuer.
async fn discover(fetcher: &Fetcher, issuer: &str) -> Result<String, String> {
    let uri: Uri = issuer.parse().map_err(|e| format!("`{issuer}` is not a URL: {e}"))?;
    let origin = format!("{}://{}", uri.scheme_str().unwrap_or("https"), uri.authority().map_or("", |a| a.as_str()));
    let path = uri.path().trim_end_matches('/');
    let candidates = [
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/')),
    ];
    let mut failures = Vec::new();
    for url in &candidates {
        match fetcher.get_json(url).await {
            Ok(metadata) => {
                if metadata.get("issuer").and_then(Value::as_str) != Some(issuer) {
                    failures.push(format!("{url}: its `issuer` is not `{issuer}`"));
                    continue;
                }
                return metadata
                    .get("jwks_uri")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| format!("{url}: no `jwks_uri`"));
            }
            Err(e) => failures.push(e),
        }
    }
    Err(format!("cannot discover the issuer's keys: {}", failures.join("; ")))
}

async fn fetch_keys(fetcher: &Fetcher, url: &str) -> Result<JwkSet, String> {
    let value = fetcher.get_json(url).await?;
    serde_json::from_value(value).map_err(|e| format!("{url}: not a JWK set: {e}"))
}

/// GETs JSON documents over HTTP/1.1, with rustls for https (the webpki roots, and any
/// extra CA given).
struct Fetcher {
    tls: tokio_rustls::TlsConnector,
}

impl Fetcher {
    fn new(ca: Option<&std::path::Path>) -> Result<Self, String> {
        let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
        if let Some(ca) = ca {
            use rustls::pki_types::CertificateDer;
            use rustls::pki_types::pem::PemObject;
            let certs = CertificateDer::pem_file_iter(ca)
                .and_then(|c| c.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("{}: {e}", ca.display()))?;
            for cert in certs {
                roots.add(cert).map_err(|e| format!("{}: {e}", ca.display()))?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Fetcher { tls: tokio_rustls::TlsConnector::from(Arc::new(config)) })
    }

    async fn get_json(&self, url: &str) -> Result<Value, String> {
        tokio::time::timeout(FETCH_TIMEOUT, self.get(url))
            .await
            .unwrap_or_else(|_| Err(format!("{url}: no answer within {}s", FETCH_TIMEOUT.as_secs())))
    }

    async fn get(&self, url: &str) -> Result<Value, String> {
        let fail = |e: &dyn std::fmt::Display| format!("{url}: {e}");
        let uri: Uri = url.parse().map_err(|e| fail(&e))?;
        let host = uri.host().ok_or_else(|| fail(&"no host"))?.to_owned();
        let https = uri.scheme_str() == Some("https");
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let bare = host.trim_start_matches('[').trim_end_matches(']').to_owned();
        let stream = tokio::net::TcpStream::connect((bare.as_str(), port)).await.map_err(|e| fail(&e))?;
        let request = hyper::Request::get(uri.path_and_query().map_or("/", |p| p.as_str()))
            .header(hyper::header::HOST, uri.authority().map_or(host.as_str(), |a| a.as_str()))
            .header(hyper::header::ACCEPT, "application/json")
            .body(Empty::<Bytes>::new())
            .map_err(|e| fail(&e))?;
        let response = if https {
            let name = rustls::pki_types::ServerName::try_from(bare).map_err(|e| fail(&e))?;
            let tls = self.tls.connect(name, stream).await.map_err(|e| fail(&e))?;
            send(hyper_util::rt::TokioIo::new(tls), request).await
        } else {
            send(hyper_util::rt::TokioIo::new(stream), request).await
        }
        .map_err(|e| fail(&e))?;
        if response.status() != hyper::StatusCode::OK {
            return Err(fail(&format!("HTTP {}", response.status())));
        }
        let body = Limited::new(response.into_body(), MAX_DOCUMENT).collect().await.map_err(|e| fail(&e))?.to_bytes();
        serde_json::from_slice(&body).map_err(|e| fail(&format!("not JSON: {e}")))
    }
}

async fn send<T>(
    io: T,
    request: hyper::Request<Empty<Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>, hyper::Error>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await?;
    tokio::spawn(connection);
    sender.send_request(request).await
}

#[cfg(test)]
/// The issuer's side, also used by `http`'s tests (a server that takes JWTs).
pub(super) mod tests {
    use super::*;
    use crate::call::Context;
    use jsonwebtoken::{EncodingKey, Header};
    use std::collections::HashMap;
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A status and a body, by path.
    type Routes = Arc<Mutex<HashMap<String, (u16, Vec<u8>)>>>;

    /// A loopback HTTP/1.1 server answering canned documents by path (404 for any other),
    /// counting the requests for each path. No network beyond 127.0.0.1.
    pub(crate) struct Server {
        pub(crate) url: String,
        routes: Routes,
        hits: Arc<Mutex<Vec<String>>>,
        stop: Arc<AtomicBool>,
    }

    impl Server {
        pub(crate) fn start() -> Self {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let url = format!("http://{}", listener.local_addr().unwrap());
            let routes: Routes = Arc::default();
            let hits: Arc<Mutex<Vec<String>>> = Arc::default();
            let stop = Arc::new(AtomicBool::new(false));
            let (r, h, s) = (Arc::clone(&routes), Arc::clone(&hits), Arc::clone(&stop));
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if s.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(mut stream) = stream else { continue };
                    let mut request = Vec::new();
                    let mut buf = [0; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    let text = String::from_utf8_lossy(&request);
                    let path = text.split(' ').nth(1).unwrap_or_default().to_owned();
                    h.lock().unwrap().push(path.clone());
                    let (status, body) = r.lock().unwrap().get(&path).cloned().unwrap_or((404, b"{}".to_vec()));
                    let head = format!(
                        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    // The client may hang up on a document it will not read whole.
                    let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(&body));
                }
            });
            Server { url, routes, hits, stop }
        }

        fn route(&self, path: &str, status: u16, body: impl Into<Vec<u8>>) {
            self.routes.lock().unwrap().insert(path.to_owned(), (status, body.into()));
        }

        pub(crate) fn json(&self, path: &str, body: &Value) {
            self.route(path, 200, body.to_string());
        }

        pub(crate) fn hits(&self, path: &str) -> usize {
            self.hits.lock().unwrap().iter().filter(|p| *p == path).count()
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::SeqCst);
            let _ = std::net::TcpStream::connect(self.url.trim_start_matches("http://"));
        }
    }

    /// A test key: an Ed25519 key made from a fixed seed (PKCS#8 v1: a 16-byte header, the seed).
    fn test_key(seed: u8) -> EncodingKey {
        let mut der =
            vec![0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20];
        der.extend([seed; 32]);
        EncodingKey::from_ed_der(&der)
    }

    /// The public JWK of `test_key(seed)`, named `kid`.
    pub(crate) fn jwk(seed: u8, kid: &str) -> Value {
        let mut jwk = jsonwebtoken::jwk::Jwk::from_encoding_key(&test_key(seed), Algorithm::EdDSA).unwrap();
        jwk.common.key_id = Some(kid.to_owned());
        serde_json::to_value(jwk).unwrap()
    }

    pub(crate) fn now() -> i64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs().try_into().unwrap()
    }

    pub(crate) const RESOURCE: &str = "https://tools.example.com/mcp";

    /// Valid claims for `issuer` and `RESOURCE`, with `changes` merged in (`null` removes one).
    pub(crate) fn claims(issuer: &str, changes: Value) -> Value {
        let mut claims = json!({"iss": issuer, "aud": RESOURCE, "sub": "alice", "exp": now() + 300});
        for (k, v) in changes.as_object().unwrap() {
            if v.is_null() {
                claims.as_object_mut().unwrap().remove(k);
            } else {
                claims[k] = v.clone();
            }
        }
        claims
    }

    pub(crate) fn token(seed: u8, kid: Option<&str>, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = kid.map(str::to_owned);
        jsonwebtoken::encode(&header, claims, &test_key(seed)).unwrap()
    }

    fn client() -> Client {
        Client { principal: String::new(), context: Arc::new(Context::new()) }
    }

    pub(crate) fn options(issuer: &str, jwks_uri: Option<String>) -> OAuthOptions {
        OAuthOptions { issuer: issuer.to_owned(), resource: RESOURCE.into(), audience: None, jwks_uri, ca: None }
    }

    /// A resource server that has fetched nothing (for what needs no keys).
    fn offline(resource: &str) -> OAuth {
        OAuth {
            options: OAuthOptions { resource: resource.into(), ..options("https://issuer.example.com", None) },
            jwks_uri: String::new(),
            keys: RwLock::default(),
            fetched: Mutex::new(Instant::now()),
            fetcher: Fetcher::new(None).unwrap(),
            client: client(),
        }
    }

    fn refused(result: Result<Client, Refused>) -> String {
        match result {
            Ok(client) => panic!("accepted, as {}", client.principal),
            Err(Refused(why)) => why,
        }
    }

    #[test]
    fn the_metadata_names_the_resource_and_its_issuer_and_is_served_under_the_resources_path() {
        let oauth = offline(RESOURCE);
        assert_eq!(
            oauth.metadata(),
            json!({
                "resource": RESOURCE,
                "authorization_servers": ["https://issuer.example.com"],
                "bearer_methods_supported": ["header"],
                "resource_name": "packs",
            })
        );
        assert_eq!(oauth.metadata_path(), "/.well-known/oauth-protected-resource/mcp");
        assert_eq!(oauth.metadata_url(), "https://tools.example.com/.well-known/oauth-protected-resource/mcp");
        let root = offline("http://127.0.0.1:8080/");
        assert_eq!(root.metadata_path(), "/.well-known/oauth-protected-resource");
        assert_eq!(root.metadata_url(), "http://127.0.0.1:8080/.well-known/oauth-protected-resource");
        let deep = offline("https://tools.example.com:8443/a/b/");
        assert_eq!(deep.metadata_url(), "https://tools.example.com:8443/.well-known/oauth-protected-resource/a/b");
    }

    #[test]
    fn only_https_or_http_to_a_loopback_host_is_taken() {
        for url in [
            "https://issuer.example.com",
            "https://issuer.example.com/tenant/jwks",
            "http://localhost:8080/jwks",
            "http://127.0.0.1/",
            "http://127.5.6.7:9/",
            "http://[::1]:8080/jwks",
        ] {
            assert_eq!(check_url(url), Ok(()), "{url}");
        }
        for url in [
            "http://issuer.example.com/jwks",
            "http://127.0.0.1.evil.com/jwks",
            "http://localhost.example/jwks",
            "http://10.0.0.1/jwks",
            "http://0.0.0.0/jwks",
            "http://[::2]/jwks",
            "ftp://localhost/jwks",
            "/jwks",
        ] {
            let error = check_url(url).unwrap_err();
            assert!(error.contains(url) && error.contains("only https"), "{url}: {error}");
        }
        assert!(check_url("https://exa mple.com").unwrap_err().contains("is not a URL"));
        for host in ["localhost", "127.0.0.1", "127.255.0.1", "::1", "[::1]"] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in ["localhost.example", "127.0.0.1.evil.com", "example.com", "10.0.0.1", "::2", ""] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn find_picks_the_named_public_key_or_the_only_one_and_never_a_shared_secret() {
        let secret = json!({"kty": "oct", "kid": "sym", "k": "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"});
        let set = |keys: Vec<Value>| -> JwkSet { serde_json::from_value(json!({ "keys": keys })).unwrap() };
        let kid = |k: Option<&jsonwebtoken::jwk::Jwk>| k.and_then(|k| k.common.key_id.clone());
        let two = set(vec![jwk(1, "k1"), jwk(2, "k2"), secret.clone()]);
        assert_eq!(kid(find(&two, "k2")), Some("k2".into()));
        assert_eq!(kid(find(&two, "k1")), Some("k1".into()));
        assert_eq!(kid(find(&two, "k3")), None);
        assert_eq!(kid(find(&two, "sym")), None, "a shared secret is never a token's key");
        assert_eq!(kid(find(&two, "")), None, "a token that names no key, and two keys");
        let one = set(vec![secret.clone(), jwk(1, "k1")]);
        assert_eq!(kid(find(&one, "")), Some("k1".into()), "the only public key");
        assert_eq!(kid(find(&set(vec![secret]), "")), None);
        assert_eq!(kid(find(&set(vec![]), "")), None);
    }

    #[test]
    fn the_key_set_may_be_fetched_again_once_every_ten_seconds() {
        let oauth = offline(RESOURCE);
        let start = Instant::now();
        *oauth.fetched.lock().unwrap() = start;
        assert!(!oauth.may_refetch(start));
        assert!(!oauth.may_refetch(start + REFETCH_EVERY - Duration::from_millis(1)));
        assert!(oauth.may_refetch(start + REFETCH_EVERY));
        // And the clock starts again from then.
        assert!(!oauth.may_refetch(start + REFETCH_EVERY));
        assert!(!oauth.may_refetch(start + REFETCH_EVERY + Duration::from_secs(9)));
        assert!(oauth.may_refetch(start + REFETCH_EVERY * 3));
        assert_eq!(REFETCH_EVERY, Duration::from_secs(10));
    }

    #[tokio::test]
    async fn a_fetch_takes_a_json_document_of_at_most_a_megabyte_answered_with_200() {
        let server = Server::start();
        let fetcher = Fetcher::new(None).unwrap();
        let url = |path: &str| format!("{}{path}", server.url);
        server.json("/doc", &json!({"a": [1, 2]}));
        assert_eq!(fetcher.get_json(&url("/doc")).await, Ok(json!({"a": [1, 2]})));
        let error = fetcher.get_json(&url("/missing")).await.unwrap_err();
        assert_eq!(error, format!("{}: HTTP 404 Not Found", url("/missing")));
        server.route("/created", 201, "{}");
        assert!(fetcher.get_json(&url("/created")).await.unwrap_err().ends_with("HTTP 201 Created"));
        server.route("/html", 200, "<html></html>");
        let error = fetcher.get_json(&url("/html")).await.unwrap_err();
        assert!(error.starts_with(&format!("{}: not JSON", url("/html"))), "{error}");
        // A string that makes the document exactly MAX_DOCUMENT bytes long, then one more.
        let largest = format!("\"{}\"", "x".repeat(MAX_DOCUMENT - 2));
        server.route("/largest", 200, largest.clone());
        assert_eq!(fetcher.get_json(&url("/largest")).await, Ok(Value::String(largest[1..largest.len() - 1].into())));
        server.route("/too-large", 200, format!("\"{}\"", "x".repeat(MAX_DOCUMENT - 1)));
        let error = fetcher.get_json(&url("/too-large")).await.unwrap_err();
        assert!(error.starts_with(&url("/too-large")) && error.contains("length limit"), "{error}");
        assert_eq!(MAX_DOCUMENT, 1 << 20);
        // Nothing listening.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let error = fetcher.get_json(&format!("http://{closed}/jwks")).await.unwrap_err();
        assert!(error.starts_with(&format!("http://{closed}/jwks: ")), "{error}");
        assert!(fetcher.get_json("http:///jwks").await.is_err());
    }

    #[tokio::test]
    async fn the_key_set_is_a_jwk_set() {
        let server = Server::start();
        let fetcher = Fetcher::new(None).unwrap();
        server.json("/jwks", &json!({"keys": [jwk(1, "k1"), jwk(2, "k2")]}));
        let keys = fetch_keys(&fetcher, &format!("{}/jwks", server.url)).await.unwrap();
        let kids: Vec<_> = keys.keys.iter().filter_map(|k| k.common.key_id.as_deref()).collect();
        assert_eq!(kids, ["k1", "k2"]);
        server.json("/bad", &json!({"keys": 3}));
        let error = fetch_keys(&fetcher, &format!("{}/bad", server.url)).await.unwrap_err();
        assert!(error.starts_with(&format!("{}/bad: not a JWK set", server.url)), "{error}");
    }

    #[tokio::test]
    async fn discovery_reads_the_jwks_uri_of_metadata_that_names_the_same_issuer() {
        let server = Server::start();
        let fetcher = Fetcher::new(None).unwrap();
        let issuer = format!("{}/tenant", server.url);
        let jwks = format!("{}/keys", server.url);
        // RFC 8414's place: the well-known path, then the issuer's path.
        server.json("/.well-known/oauth-authorization-server/tenant", &json!({"issuer": issuer, "jwks_uri": jwks}));
        assert_eq!(discover(&fetcher, &issuer).await, Ok(jwks.clone()));
        // Metadata for another issuer is not taken; the OpenID configuration is tried next.
        server.json(
            "/.well-known/oauth-authorization-server/tenant",
            &json!({"issuer": "https://evil.example", "jwks_uri": "x"}),
        );
        let error = discover(&fetcher, &issuer).await.unwrap_err();
        assert!(error.starts_with("cannot discover the issuer's keys: "), "{error}");
        assert!(error.contains(&format!("its `issuer` is not `{issuer}`")), "{error}");
        assert!(error.contains("/tenant/.well-known/openid-configuration: HTTP 404"), "{error}");
        let openid = format!("{}/other-keys", server.url);
        server.json("/tenant/.well-known/openid-configuration", &json!({"issuer": issuer, "jwks_uri": openid}));
        assert_eq!(discover(&fetcher, &issuer).await, Ok(openid));
        server.json("/tenant/.well-known/openid-configuration", &json!({"issuer": issuer}));
        assert!(discover(&fetcher, &issuer).await.unwrap_err().ends_with("openid-configuration: no `jwks_uri`"));
    }

    #[tokio::test]
    async fn a_token_is_verified_against_the_issuers_keys_and_claims() {
        let server = Server::start();
        let issuer = format!("{}/tenant", server.url);
        server.json(
            "/.well-known/oauth-authorization-server/tenant",
            &json!({"issuer": issuer, "jwks_uri": format!("{}/jwks", server.url)}),
        );
        server.json("/jwks", &json!({"keys": [jwk(1, "k1")]}));
        let oauth = OAuth::start(options(&issuer, None), client()).await.unwrap();
        assert_eq!(server.hits("/jwks"), 1);
        let ok = |t: &str| {
            let t = t.to_owned();
            let oauth = &oauth;
            async move { oauth.verify(&t).await.map(|c| c.principal) }
        };
        assert_eq!(ok(&token(1, Some("k1"), &claims(&issuer, json!({})))).await.unwrap(), "jwt:alice");
        // The only key, for a token that names none.
        assert_eq!(ok(&token(1, None, &claims(&issuer, json!({"sub": "bob"})))).await.unwrap(), "jwt:bob");
        // Within the leeway.
        assert!(ok(&token(1, Some("k1"), &claims(&issuer, json!({"exp": now() - 10})))).await.is_ok());
        // A token whose key is in the set fetches nothing.
        assert_eq!(server.hits("/jwks"), 1);

        let why = |claims: Value| refused_now(&oauth, token(1, Some("k1"), &claims));
        assert!(why(claims(&issuer, json!({"iss": "https://other.example"}))).await.ends_with("InvalidIssuer"));
        assert!(why(claims(&issuer, json!({"aud": "https://other.example/mcp"}))).await.ends_with("InvalidAudience"));
        assert!(why(claims(&issuer, json!({"exp": now() - 100}))).await.ends_with("ExpiredSignature"));
        assert!(why(claims(&issuer, json!({"nbf": now() + 100}))).await.ends_with("ImmatureSignature"));
        for claim in ["exp", "iss", "aud", "sub"] {
            let error = why(claims(&issuer, json!({ claim: null }))).await;
            assert!(error.starts_with("the token is not valid: ") && error.contains(claim), "{claim}: {error}");
        }
        // Signed by another key under the key's id.
        let forged = refused_now(&oauth, token(2, Some("k1"), &claims(&issuer, json!({})))).await;
        assert!(forged.ends_with("InvalidSignature"), "{forged}");
        assert!(refused_now(&oauth, "not.a.jwt".into()).await.starts_with("not a JWT: "));
        let hs = jsonwebtoken::encode(
            &Header { kid: Some("k1".into()), ..Header::new(Algorithm::HS256) },
            &claims(&issuer, json!({})),
            &EncodingKey::from_secret(b"secret"),
        )
        .unwrap();
        assert_eq!(refused_now(&oauth, hs).await, "a token signed with a shared secret (HS*) is refused");
        // An alg other than the key's (refused before the signature is looked at).
        let es = Header { kid: Some("k1".into()), ..Header::new(Algorithm::ES256) };
        let b64 = |v: &Value| data_encoding::BASE64URL_NOPAD.encode(v.to_string().as_bytes());
        let es = format!("{}.{}.AAAA", b64(&serde_json::to_value(es).unwrap()), b64(&claims(&issuer, json!({}))));
        assert_eq!(refused_now(&oauth, es).await, "the token's alg ES256 is not its key's (EdDSA)");
        assert_eq!(server.hits("/jwks"), 1, "no token above named a key the set lacks");

        // An unknown key fetches the set again, once per ten seconds.
        let k2 = token(2, Some("k2"), &claims(&issuer, json!({})));
        assert_eq!(refused_now(&oauth, k2.clone()).await, "no key `k2` in the issuer's key set");
        assert_eq!(server.hits("/jwks"), 2);
        assert_eq!(
            refused_now(&oauth, token(2, Some("k3"), &claims(&issuer, json!({})))).await,
            "no key `k3` in the issuer's key set"
        );
        assert_eq!(server.hits("/jwks"), 2, "within ten seconds of the last fetch");
        // The issuer rotates in k2; ten seconds later a token signed with it is taken.
        server.json("/jwks", &json!({"keys": [jwk(1, "k1"), jwk(2, "k2")]}));
        assert!(refused_now(&oauth, k2.clone()).await.starts_with("no key `k2`"));
        *oauth.fetched.lock().unwrap() -= REFETCH_EVERY;
        assert_eq!(ok(&k2).await.unwrap(), "jwt:alice");
        assert_eq!(server.hits("/jwks"), 3);
        assert_eq!(ok(&k2).await.unwrap(), "jwt:alice");
        assert!(ok(&token(1, Some("k1"), &claims(&issuer, json!({})))).await.is_ok());
        // A token that names no key, and two keys; a token naming a shared secret.
        assert!(refused_now(&oauth, token(1, None, &claims(&issuer, json!({})))).await.starts_with("no key ``"));
        server.json("/jwks", &json!({"keys": [jwk(1, "k1"), {"kty": "oct", "kid": "sym", "k": "c2VjcmV0"}]}));
        *oauth.fetched.lock().unwrap() -= REFETCH_EVERY;
        let sym = token(1, Some("sym"), &claims(&issuer, json!({})));
        assert_eq!(refused_now(&oauth, sym).await, "no key `sym` in the issuer's key set");
        assert_eq!(server.hits("/jwks"), 4);
    }

    async fn refused_now(oauth: &OAuth, token: String) -> String {
        refused(oauth.verify(&token).await)
    }

    #[tokio::test]
    async fn the_audience_is_the_resource_unless_given_and_the_urls_are_checked_at_start() {
        let server = Server::start();
        server.json("/jwks", &json!({"keys": [jwk(1, "k1")]}));
        let jwks = Some(format!("{}/jwks", server.url));
        let given = OAuthOptions { audience: Some("api://packs".into()), ..options(&server.url, jwks.clone()) };
        let oauth = OAuth::start(given, client()).await.unwrap();
        assert_eq!(server.hits("/jwks"), 1);
        let claims = |aud: &str| claims(&server.url, json!({ "aud": aud }));
        assert_eq!(oauth.verify(&token(1, Some("k1"), &claims("api://packs"))).await.unwrap().principal, "jwt:alice");
        assert!(refused(oauth.verify(&token(1, Some("k1"), &claims(RESOURCE))).await).ends_with("InvalidAudience"));
        // No discovery when the key set's URL is given.
        assert_eq!(server.hits.lock().unwrap().len(), 1);

        for (issuer, resource, jwks_uri) in [
            ("http://issuer.example.com", RESOURCE, jwks.clone()),
            (server.url.as_str(), "http://tools.example.com/mcp", jwks.clone()),
            (server.url.as_str(), RESOURCE, Some("http://issuer.example.com/jwks".into())),
        ] {
            let options = OAuthOptions { resource: resource.into(), ..options(issuer, jwks_uri) };
            let error = OAuth::start(options, client()).await.err().unwrap();
            assert!(error.contains("only https (or http to a loopback address) is taken"), "{error}");
        }
        // Discovered, and checked too.
        server.json(
            "/.well-known/oauth-authorization-server",
            &json!({"issuer": server.url, "jwks_uri": "http://issuer.example.com/jwks"}),
        );
        let error = OAuth::start(options(&server.url, None), client()).await.err().unwrap();
        assert_eq!(error, "`http://issuer.example.com/jwks`: only https (or http to a loopback address) is taken");
        server.route("/jwks", 500, "{}");
        let error = OAuth::start(options(&server.url, jwks), client()).await.err().unwrap();
        assert!(error.ends_with("/jwks: HTTP 500 Internal Server Error"), "{error}");
    }
}
