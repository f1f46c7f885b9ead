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
        if !kid.is_empty() && find(&keys, &kid).is_none() && self.may_refetch() {
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

    fn may_refetch(&self) -> bool {
        let mut last = self.fetched.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if last.elapsed() < REFETCH_EVERY {
            return false;
        }
        *last = Instant::now();
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
