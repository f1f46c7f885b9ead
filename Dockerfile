# packs as a remote MCP server: `docker build -t packs .` (see docs/DEPLOY.md).
# The runtime image holds packs and coreutils only: build your own image FROM this one with
# the programs your manifests call.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# The dist build (Cargo.toml's [profile.dist], .cargo/config.toml's alias): a static PIE for an
# explicit target. Building on another architecture: change the target in the alias and below.
RUN cargo build-dist --locked

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --create-home --home-dir /var/lib/packs packs
COPY --from=build /src/target/x86_64-unknown-linux-gnu/dist/packs /usr/local/bin/packs
USER 10001
WORKDIR /var/lib/packs
ENV PACKS_PATH=/packs PACKS_AGENTS=/agents
EXPOSE 8731
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s CMD ["curl", "-fsS", "http://127.0.0.1:8731/healthz"]
ENTRYPOINT ["/usr/local/bin/packs"]
CMD ["serve", "--http", "0.0.0.0:8731", "--token-file", "/run/secrets/packs-tokens"]
